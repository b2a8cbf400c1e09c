"""Which parameter sets of a test run on RGW (``tests/conftest.py`` calls it at collection).

Every test that takes the ``s3_server`` fixture runs on moto. The RGW run proves the SDK's
requests against a real server; the parameters of a matrix (committers, formats, types, fault
points) exercise the SDK's code, the same on either server, and so does the driving side (Spark
classic, Connect and clusters, notebooks, the browser), which issues its requests through the
same store. So by default (``first``) RGW runs each in-process test function with its first
parameter set, and the tests marked ``spark``, ``cluster``, ``notebook``, ``browser`` or ``slow``
on moto only; pytest reports the rest as deselected. ``full`` (``S3COMMIT_TEST_RGW_MATRIX=full``)
runs them all on RGW too.
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
    first: dict[tuple[Path, str], pytest.Item] = {}
    for item in items:
        if server_of(item) == "rgw" and not any(map(item.get_closest_marker, MOTO_ONLY_MARKERS)):
            first.setdefault((item.path, item.originalname), item)  # collected in param order
    kept = set(first.values())
    deselected = [i for i in items if server_of(i) == "rgw" and i not in kept]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = [i for i in items if server_of(i) != "rgw" or i in kept]


def server_of(item: pytest.Item) -> str | None:
    """The S3 server a collected test runs against, if it takes one."""
    callspec = getattr(item, "callspec", None)
    return callspec.params.get("s3_server") if callspec else None
