"""Run the benchmark suite: ``python -m bench.run --quick`` (CI smoke) or ``--full``.

Writes ``bench/results/<timestamp>.json`` and, beside it, a markdown report with PNG charts
(``--report-dir`` puts the report elsewhere, e.g. ``bench/reports/``), and prints the report.
The quick run checks that every scenario works end to end; it asserts nothing about speed.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from s3commit_sdk.faultproxy import bandwidth, delay

from . import commit_scaling, end_to_end, memory, peers, store_limit
from .data import tasks_for
from .harness import Endpoint, Run
from .report import charts, evaluate, markdown

HERE = Path(__file__).parent
#: seed 003 "Results": S3 copies at about 10 MB/s; a typical S3 request takes tens of ms
LATENCY_RULES = [
    delay(30),
    bandwidth(10 * 10**6, "CopyObject"),
    bandwidth(10 * 10**6, "UploadPartCopy"),
]


@dataclass(frozen=True)
class Plan:
    """How big and how often each scenario runs."""

    e2e: tuple[tuple[int, bool, tuple[str, ...] | None], ...]  # (MiB, partitioned, writers)
    repeats: int
    requests_mib: int
    scaling: tuple[tuple[str, int, tuple[int, ...]], ...]  # (committer, files, threads)
    scaling_repeats: int
    bytes_files: int
    bytes_totals_mib: tuple[int, ...]
    memory_mib: tuple[int, ...]
    memory_part: str
    memory_repeats: int
    peers_mib: int
    latency_mib: int


QUICK = Plan(
    e2e=((32, True, None),),
    repeats=2,
    requests_mib=16,
    scaling=(
        ("directory", 100, (8, 32)),
        ("directory", 400, (8, 32)),
        (commit_scaling.RAW, 400, (32,)),
    ),
    scaling_repeats=2,
    bytes_files=100,
    bytes_totals_mib=(64, 256),
    memory_mib=(32, 128),
    memory_part="8M",
    memory_repeats=1,
    peers_mib=32,
    latency_mib=16,
)
FULL = Plan(
    e2e=(
        (256, False, None),
        (256, True, None),
        (1024, False, None),
        (1024, True, ("direct (unsafe)", "directory", "partitioned", "magic")),
        (4096, False, ("direct (unsafe)", "directory", "magic")),
    ),
    repeats=3,
    requests_mib=64,
    scaling=(
        ("directory", 100, (8, 32, 64)),
        ("directory", 1000, (8, 32, 64)),
        ("magic", 1000, (32,)),
        (commit_scaling.RAW, 1000, (8, 32, 64)),
        ("directory", 10_000, (32,)),
    ),
    scaling_repeats=2,
    bytes_files=100,
    bytes_totals_mib=(1024, 4096),
    memory_mib=(256, 4096),
    memory_part="16M",
    memory_repeats=2,
    peers_mib=256,
    latency_mib=64,
)


def scenarios(plan: Plan, endpoint: Endpoint, spark) -> list[tuple[str, Callable[[Run], None]]]:
    top = max(size for size, _, _ in plan.e2e)
    steps: list[tuple[str, Callable[[Run], None]]] = [
        (
            f"end to end {size} MiB{' partitioned' if partitioned else ''}",
            lambda run, s=size, p=partitioned, w=writers: end_to_end.run_end_to_end(
                run, endpoint, spark, s, p, plan.repeats, w
            ),
        )
        for size, partitioned, writers in plan.e2e
    ]
    steps += [
        (
            "store limit",
            lambda run: store_limit.run_store_limit(
                run, endpoint, top, tasks_for(top), 2, plan.repeats
            ),
        ),
        (
            "requests and copies",
            lambda run: end_to_end.run_requests(
                run, endpoint, spark, plan.requests_mib, [], "requests", plan.repeats
            ),
        ),
        (
            "emulated latency",
            lambda run: end_to_end.run_requests(
                run, endpoint, spark, plan.latency_mib, LATENCY_RULES, "latency", plan.repeats
            ),
        ),
        (
            "commit scaling",
            lambda run: commit_scaling.run_scaling(
                run, endpoint, plan.scaling, plan.scaling_repeats
            ),
        ),
        (
            "commit bytes",
            lambda run: commit_scaling.run_bytes(
                run,
                endpoint,
                "directory",
                plan.bytes_files,
                plan.bytes_totals_mib,
                32,
                plan.repeats,
            ),
        ),
        ("peers", lambda run: peers.run_peers(run, endpoint, plan.peers_mib, plan.repeats)),
        (
            "memory",
            lambda run: memory.run_memory(
                run, plan.memory_mib, plan.memory_part, plan.memory_repeats
            ),
        ),
    ]
    return steps


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    size = parser.add_mutually_exclusive_group(required=True)
    size.add_argument("--quick", action="store_const", dest="mode", const="quick")
    size.add_argument("--full", action="store_const", dest="mode", const="full")
    parser.add_argument("--only", nargs="*", help="scenario names to run (default: all)")
    parser.add_argument("--report-dir", type=Path, default=HERE / "results")
    args = parser.parse_args(argv)
    plan = QUICK if args.mode == "quick" else FULL

    from s3commit_sdk.sandbox import local_spark

    # the classic committer warns on S3 at every use; here that is the point of running it
    warnings.filterwarnings("ignore", message="the classic file committer on S3")
    logging.getLogger("s3commit_sdk").setLevel(logging.ERROR)

    run = Run(mode=args.mode)
    with Endpoint() as endpoint:
        spark = local_spark(app_name="s3commit-bench")
        try:
            for name, step in scenarios(plan, endpoint, spark):
                if args.only and not any(o in name for o in args.only):
                    continue
                print(f"== {name}", flush=True)
                started = time.monotonic()
                step(run)
                run.seconds[name] = round(time.monotonic() - started, 1)
        finally:
            spark.stop()
    run.targets = evaluate(run)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    results = HERE / "results"
    results.mkdir(parents=True, exist_ok=True)
    document = json.dumps(run.to_json(), indent=2)
    (results / f"{stamp}.json").write_text(document)
    args.report_dir.mkdir(parents=True, exist_ok=True)
    (args.report_dir / f"{stamp}.json").write_text(document)  # the report's own numbers
    text = markdown(run, charts(run, args.report_dir, stamp))
    (args.report_dir / f"{stamp}.md").write_text(text)
    print(text)
    print(f"results: {results / (stamp + '.json')}\nreport: {args.report_dir / (stamp + '.md')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
