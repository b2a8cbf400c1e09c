"""Which parameter sets of a test run on RGW (``tests/conftest.py`` calls it at collection).

Every test that takes the ``s3_server`` fixture runs on moto. The RGW run proves the SDK's
requests against a real server; the parameters of a matrix (committers, formats, types, fault
points) exercise the SDK's code, the same on either server, and so does the driving side (Spark
classic, Connect and clusters, notebooks, the browser), which issues its requests through the
same store. So by default (``first``) RGW runs each in-process test function with its first
parameter set, and the tests marked ``spark``, ``cluster``,
``notebook``, ``browser`` or ``slow`` on moto only; pytest reports the rest as deselected. ``full``
(``S3COMMIT_TEST_RGW_MATRIX=full``) runs them all on RGW too.
"""

from __future__ import annotations

from pathlib import Path

import pytest

MODES = ("first", "full")
#: the driving side, and the builds of a virtualenv or the docs site: proven on moto
MOTO_ONLY_MARKERS = ("spark", "cluster", "notebook", "browser", "slow")


def select_rgw_matrix(config: pytest.Config, items: list[pytest.Item], mode: str) -> None:
    """Deselect, in ``items``, every RGW parameter set but one per in-process test function."""
    if mode not in MODES:
        raise pytest.UsageError(f"S3COMMIT_TEST_RGW_MATRIX={mode!r}: use one of {MODES}")
    if mode == "full":
        return
    chosen: dict[tuple[Path, str], pytest.Item] = {}
    rgw_items = [i for i in items if server_of(i) == "rgw"]
    in_process = [i for i in rgw_items if not any(map(i.get_closest_marker, MOTO_ONLY_MARKERS))]
    for item in sorted(in_process, key=lambda i: sorted(i.callspec.indices.items())):
        chosen.setdefault((item.path, item.originalname), item)
    kept = set(map(id, chosen.values()))
    deselected = [i for i in rgw_items if id(i) not in kept]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = [i for i in items if server_of(i) != "rgw" or id(i) in kept]


def server_of(item: pytest.Item) -> str | None:
    """The S3 server a collected test runs against, if it takes one."""
    callspec = getattr(item, "callspec", None)
    return callspec.params.get("s3_server") if callspec else None
