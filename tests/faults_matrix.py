"""A pytest plugin for ``make faults``: the correctness matrix as a table.

One row per fault scenario (test) and committer, with its result and the number of multipart
uploads left pending under the test's destination afterwards (recorded by the ``dest`` fixture).
"""

from __future__ import annotations

import re

_rows: dict[str, dict] = {}
COMMITTERS = ("directory", "partitioned", "magic")


def _split(nodeid: str) -> tuple[str, str, str]:
    path, _, name = nodeid.partition("::")
    base, _, params = name.partition("[")
    params = params.rstrip("]")
    committer = next((c for c in COMMITTERS if re.search(rf"\b{c}\b", params)), "-")
    rest = "-".join(p for p in params.split("-") if p and p != committer)
    scenario = (
        f"{path.removeprefix('tests/test_').removesuffix('.py')}: {base.removeprefix('test_')}"
    )
    return scenario + (f" [{rest}]" if rest else ""), committer, nodeid


def pytest_runtest_logreport(report) -> None:
    row = _rows.setdefault(report.nodeid, {"result": "pass", "pending": "-"})
    if report.failed:
        row["result"] = "FAIL"
    elif report.skipped and report.when == "setup":
        row["result"] = "skip"
    for name, value in report.user_properties:
        if name == "pending_uploads":
            row["pending"] = str(value)


def pytest_terminal_summary(terminalreporter) -> None:
    lines = [(*_split(nodeid)[:2], row["result"], row["pending"]) for nodeid, row in _rows.items()]
    if not lines:
        return
    width = max(len(s) for s, *_ in lines)
    write = terminalreporter.write_line
    write("")
    write("correctness matrix (pending = multipart uploads left under the destination)")
    write(f"{'scenario':<{width}}  {'committer':<11}  {'result':<6}  pending")
    for scenario, committer, result, pending in sorted(lines):
        write(f"{scenario:<{width}}  {committer:<11}  {result:<6}  {pending}")
    failed = sum(1 for *_, r, _p in lines if r == "FAIL")
    write(f"{len(lines)} scenarios, {failed} failed")
