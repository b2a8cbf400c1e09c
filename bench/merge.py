"""One report from a full run made in parts: ``python -m bench.merge OUT.json PART.json ...``.

A full ``make bench`` takes longer than one sitting (job commit at 100,000 files alone is about
40 minutes per round and endpoint), so it can be run in parts with ``bench.run --only`` and
``--endpoints``, and the parts merged. A later part's record replaces an earlier part's of
the same scenario and labels (a rerun after a fix; the same scenario at other sizes stays);
every part's start, code commit, cases and time are kept, and the report lists them, so what
was measured with which code stays visible. A run stopped before its end can be a part: its
``bench/results/<stamp>.partial.json`` holds the cases it finished. A merged report can be a
part: a later rerun merges into it, and its own parts stay listed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from .harness import KINDS, Record, Run
from .report import charts, evaluate, markdown


def part_summary(run: Run) -> dict[str, Any]:
    """What the report says of one part: when, which code, which cases, how long (a run
    stopped before its end, its ``.partial.json``, has no total: its finished cases' time)."""
    cases = {case: s for case, s in run.seconds.items() if case != "total"}
    return {
        "started": run.started,
        "commit": run.machine_info.get("commit", "unknown"),
        "cases": sorted(cases),
        "seconds": run.seconds.get("total", round(sum(cases.values()), 1)),
    }


def merged(parts: list[Run]) -> Run:
    """The parts as one run: later parts' records replace earlier ones of the same scenario and
    labels (endpoint, size, writer, ...); failures of a case that a later part ran again are
    dropped."""
    modes = {part.mode for part in parts}
    if len(modes) != 1:
        raise ValueError(f"the parts mix run modes {sorted(modes)}: merge full runs only")
    whole = Run(
        mode=modes.pop(),
        endpoints=[k for k in KINDS if any(k in part.endpoints for part in parts)],
        started=parts[0].started,
        machine_info={k: v for k, v in parts[0].machine_info.items() if k != "commit"},
    )
    for part in parts:
        rerun = {_identity(r) for r in part.records}
        whole.records = [r for r in whole.records if _identity(r) not in rerun] + part.records
        cases = {case for case in part.seconds if case != "total"}
        whole.failures = {
            case: error for case, error in whole.failures.items() if case not in cases
        } | part.failures
        whole.seconds |= {case: s for case, s in part.seconds.items() if case != "total"}
        whole.parts.extend(part.parts or [part_summary(part)])  # a merged report: its parts
    whole.seconds["total"] = round(sum(p["seconds"] or 0 for p in whole.parts), 1)
    return whole


def _identity(record: Record) -> str:
    """What a record measured: its scenario and labels (a rerun measures the same again)."""
    return json.dumps([record.scenario, record.labels], sort_keys=True, default=str)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="the merged JSON, e.g. bench/reports/<stamp>.json")
    parser.add_argument("parts", type=Path, nargs="+", help="the parts' JSON, oldest first")
    args = parser.parse_args(argv)
    parts = [Run.from_json(json.loads(path.read_text())) for path in args.parts]
    run = merged(parts)
    run.targets = evaluate(run)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(run.to_json(), indent=2))
    text = markdown(run, charts(run, args.out.parent, args.out.stem))
    args.out.with_suffix(".md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
