"""Run the benchmark suite: ``python -m bench.run --quick`` (CI smoke) or ``--full``.

Every scenario runs against Ceph RGW (the reference: a production S3 server) and against moto,
one after the other, each on an emptied bucket; the same data goes to both. Writes
``bench/results/<timestamp>.json`` and, beside it, a markdown report with PNG charts
(``--report-dir`` puts the report elsewhere, e.g. ``bench/reports/``), and prints the report.
The quick run checks that every scenario works end to end; it asserts nothing about speed.

    python -m bench.run --quick --only "commit scaling" --endpoints rgw   # one scenario, RGW
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
import traceback
import warnings
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path

from s3commit_sdk.testing.faultproxy import bandwidth, delay

from . import (
    commit_scaling,
    end_to_end,
    fanout,
    frontends,
    iceberg,
    memory,
    peers,
    profile,
    store_limit,
    streaming,
)
from .data import tasks_for
from .harness import KINDS, Endpoint, Run
from .report import charts, evaluate, markdown

HERE = Path(__file__).parent
#: "A Zero-Rename Committer" ("Results"): S3 copies at about 10 MB/s; a typical S3 request takes
#: tens of ms
LATENCY_RULES = [
    delay(30),
    bandwidth(10 * 10**6, "CopyObject"),
    bandwidth(10 * 10**6, "UploadPartCopy"),
]
#: small files at scale: job commit costs per file, and 100,000 uploads of 64 KiB would hold
#: 6 GiB in the servers' RAM
AT_SCALE_FILE_BYTES = 1024
ALL_WRITERS = None  # every writer of end_to_end.WRITERS that fits the layout
ZERO_RENAME_AND_DIRECT = ("direct (unsafe)", "directory", "partitioned", "magic")


@dataclass(frozen=True)
class Plan:
    """How big and how often each scenario runs."""

    e2e: tuple[tuple[int, bool, tuple[str, ...] | None], ...]  # (MiB, partitioned, writers)
    repeats: int
    requests_mib: int
    scaling: tuple[tuple[str, int, tuple[int, ...]], ...]  # (committer, files, threads)
    scaling_repeats: int
    #: job commit uninterrupted, then the same killed after its journal and recovered
    recovery: tuple[tuple[str, int, tuple[int, ...]], ...]
    #: job commit, raw completions and recovery at the largest file count (issue 30: 100,000)
    at_scale: tuple[tuple[str, int, tuple[int, ...]], ...]
    bytes_files: int
    bytes_totals_mib: tuple[int, ...]
    memory_mib: tuple[int, ...]
    memory_part: str
    memory_repeats: int
    peers_mib: int
    latency_mib: int
    latency_writers: tuple[str, ...] | None
    frontends_mib: int
    #: the one flat magic write profiled with py-spy
    profile_mib: int
    #: files of the job committed as Iceberg and as plain Parquet, and how often
    iceberg_commit: tuple[int, int]
    #: micro-batches of the stream, rows per batch (8 files each), timed queries per writer
    streaming: tuple[int, int, int]
    #: completions per case of the fanned-out job commit, simulated; its cases:
    #: (emulated ms per completion, worker processes, threads per process)
    fanout_files: int
    fanout: tuple[tuple[float, tuple[int, ...], tuple[int, ...]], ...]


QUICK = Plan(
    e2e=((32, True, ZERO_RENAME_AND_DIRECT),),
    repeats=1,
    requests_mib=16,
    latency_writers=("partitioned", "classic v1"),
    scaling=(
        ("directory", 100, (8, 32)),
        (commit_scaling.RAW, 100, (32,)),
        ("directory", 300, (32,)),
        (commit_scaling.RAW, 300, (32,)),
    ),
    scaling_repeats=1,
    recovery=(("directory", 300, (32,)), (commit_scaling.RECOVERED, 300, (32,))),
    at_scale=tuple(
        (c, 1200, (32,)) for c in ("directory", commit_scaling.RAW, commit_scaling.RECOVERED)
    ),
    bytes_files=20,
    bytes_totals_mib=(16, 64),
    memory_mib=(32, 64),
    memory_part="8M",
    memory_repeats=1,
    peers_mib=8,
    latency_mib=16,
    frontends_mib=16,
    profile_mib=64,
    iceberg_commit=(300, 1),
    streaming=(5, 4000, 1),
    fanout_files=200,
    fanout=((50, (1, 2), (8, 32)), (0, (1, 2), (32,))),
)
FULL = Plan(
    e2e=(
        (1024, False, ALL_WRITERS),
        (1024, True, ZERO_RENAME_AND_DIRECT),
        (4096, False, ZERO_RENAME_AND_DIRECT),
        (4096, True, ZERO_RENAME_AND_DIRECT),
    ),
    repeats=3,
    requests_mib=64,
    latency_writers=ALL_WRITERS,
    scaling=(
        ("directory", 100, (8, 32, 64)),
        (commit_scaling.RAW, 100, (32,)),
        ("directory", 1000, (8, 32, 64)),
        ("partitioned", 1000, (32,)),
        ("magic", 1000, (32,)),
        (commit_scaling.RAW, 1000, (8, 32, 64)),
        ("directory", 10_000, (32,)),
        (commit_scaling.RAW, 10_000, (32,)),
    ),
    scaling_repeats=2,
    recovery=(("directory", 2000, (32,)), (commit_scaling.RECOVERED, 2000, (32,))),
    at_scale=tuple(
        (c, 100_000, (32,)) for c in ("directory", commit_scaling.RAW, commit_scaling.RECOVERED)
    ),
    bytes_files=100,
    bytes_totals_mib=(1024, 4096),
    memory_mib=(256, 4096),
    memory_part="16M",
    memory_repeats=2,
    peers_mib=256,
    latency_mib=64,
    frontends_mib=1024,
    profile_mib=1024,
    iceberg_commit=(10_000, 2),
    streaming=(30, 50_000, 3),
    fanout_files=2000,
    fanout=((50, (1, 2, 4), (8, 32, 64)), (0, (1, 2, 4), (32,))),
)


Step = Callable[[Run, Endpoint], None]


def scenarios(plan: Plan, spark, stem: Path) -> list[tuple[str, Step]]:
    """Each scenario as a step the run repeats on every endpoint; files a scenario keeps
    beside the report are named ``<stem>-...``."""
    top = max(size for size, _, _ in plan.e2e)
    steps: list[tuple[str, Step]] = [
        (
            f"end to end {size} MiB{' partitioned' if partitioned else ''}",
            lambda run, endpoint, s=size, p=partitioned, w=writers: end_to_end.run_end_to_end(
                run, endpoint, spark, s, p, plan.repeats, w
            ),
        )
        for size, partitioned, writers in plan.e2e
    ]
    steps += [
        (
            profile.SCENARIO,
            lambda run, endpoint: profile.run_profile(
                run,
                endpoint,
                spark,
                plan.profile_mib,
                stem.with_name(f"{stem.name}-{profile.SCENARIO}-{endpoint.kind}.txt"),
            ),
        ),
        (
            "store limit",
            lambda run, endpoint: store_limit.run_store_limit(
                run, endpoint, top, tasks_for(top), 2, plan.repeats
            ),
        ),
        (
            "requests and copies",
            lambda run, endpoint: end_to_end.run_requests(
                run, endpoint, spark, plan.requests_mib, [], "requests", plan.repeats
            ),
        ),
        (
            "emulated latency",
            lambda run, endpoint: end_to_end.run_requests(
                run,
                endpoint,
                spark,
                plan.latency_mib,
                LATENCY_RULES,
                "latency",
                plan.repeats,
                plan.latency_writers,
            ),
        ),
        (
            "commit scaling",
            lambda run, endpoint: commit_scaling.run_scaling(
                run, endpoint, plan.scaling, plan.scaling_repeats
            ),
        ),
        (
            "recovery",
            lambda run, endpoint: commit_scaling.run_scaling(
                run, endpoint, plan.recovery, plan.scaling_repeats
            ),
        ),
        (
            "commit at scale",
            lambda run, endpoint: commit_scaling.run_scaling(
                run, endpoint, plan.at_scale, plan.scaling_repeats, AT_SCALE_FILE_BYTES
            ),
        ),
        (
            "fanout",
            lambda run, endpoint: fanout.run_fanout(run, endpoint, plan.fanout_files, plan.fanout),
        ),
        (
            "commit bytes",
            lambda run, endpoint: commit_scaling.run_bytes(
                run,
                endpoint,
                "directory",
                plan.bytes_files,
                plan.bytes_totals_mib,
                32,
                plan.repeats,
            ),
        ),
        (
            "peers",
            lambda run, endpoint: peers.run_peers(run, endpoint, plan.peers_mib, plan.repeats),
        ),
        (
            "iceberg peers",
            lambda run, endpoint: iceberg.run_peers(run, endpoint, plan.peers_mib, plan.repeats),
        ),
        (
            "iceberg commit",
            lambda run, endpoint: iceberg.run_commit(run, endpoint, *plan.iceberg_commit),
        ),
        (
            "front ends",
            lambda run, endpoint: frontends.run_frontends(
                run, endpoint, spark, plan.frontends_mib, plan.repeats
            ),
        ),
        (
            "streaming",
            lambda run, endpoint: streaming.run_streaming(run, endpoint, spark, *plan.streaming),
        ),
        (
            "memory",
            lambda run, endpoint: memory.run_memory(
                run, endpoint, plan.memory_mib, plan.memory_part, plan.memory_repeats
            ),
        ),
    ]
    return steps


def run_case(run: Run, name: str, step: Step, endpoint: Endpoint) -> None:
    """One scenario on one endpoint, between two resets. A failure is recorded in the run, not
    raised: one failed case must not lose a two-hour run."""
    case = f"{name} on {endpoint.kind}"
    print(f"== {case}", flush=True)
    begun = time.monotonic()
    endpoint.activate()
    try:
        endpoint.reset()
        step(run, endpoint)
        endpoint.reset()  # the other endpoint's turn: this one's data leaves the RAM
    except KeyboardInterrupt:  # stopped: the partial JSON says so, with the cases it finished
        run.failures[case] = "stopped (SIGINT) before its end: its records are its finished cases"
        raise
    except Exception as error:
        traceback.print_exc()
        run.failures[case] = f"{type(error).__name__}: {error}"
    finally:
        run.seconds[case] = round(time.monotonic() - begun, 1)
        run.save_partial()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    size = parser.add_mutually_exclusive_group(required=True)
    size.add_argument("--quick", action="store_const", dest="mode", const="quick")
    size.add_argument("--full", action="store_const", dest="mode", const="full")
    parser.add_argument("--only", nargs="*", help="scenario names to run (default: all)")
    parser.add_argument(
        "--endpoints", nargs="+", choices=KINDS, default=list(KINDS), help="default: all"
    )
    parser.add_argument("--report-dir", type=Path, default=HERE / "results")
    parser.add_argument(
        "--rounds",
        type=int,
        help="rounds of the end-to-end and job-commit scenarios, instead of the plan's "
        "(the report's medians then hold that many)",
    )
    args = parser.parse_args(argv)
    plan = QUICK if args.mode == "quick" else FULL
    if args.rounds:
        plan = replace(plan, repeats=args.rounds, scaling_repeats=args.rounds)

    from s3commit_sdk.testing.sandbox import DUMMY_ENV, local_spark

    # the classic committer warns on S3 at every use; here that is the point of running it
    warnings.filterwarnings("ignore", message="the classic file committer on S3")
    logging.getLogger("s3commit_sdk").setLevel(logging.ERROR)
    # both endpoints take the same dummy keys; Spark's JVM and the Python workers it starts
    # keep the environment they were started with (each job carries its endpoint URL)
    os.environ.update(DUMMY_ENV)

    run = Run(mode=args.mode, endpoints=list(args.endpoints))
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    results = HERE / "results"
    results.mkdir(parents=True, exist_ok=True)
    partial = results / f"{stamp}.partial.json"  # rebuild a report: python -m bench.report
    run.partial = partial
    started = time.monotonic()
    with ExitStack() as servers:
        spark = local_spark(app_name="s3commit-bench")
        servers.callback(spark.stop)
        every = scenarios(plan, spark, args.report_dir / stamp)
        chosen = [(n, s) for n, s in every if not args.only or any(o in n for o in args.only)]
        if not chosen:
            parser.error(f"--only {args.only} matches none of: {', '.join(n for n, _ in every)}")
        endpoints = [servers.enter_context(Endpoint(kind)) for kind in args.endpoints]
        for name, step in chosen:
            for endpoint in endpoints:
                run_case(run, name, step, endpoint)
    run.seconds["total"] = round(time.monotonic() - started, 1)
    run.targets = evaluate(run)
    partial.unlink()
    document = json.dumps(run.to_json(), indent=2)
    (results / f"{stamp}.json").write_text(document)
    args.report_dir.mkdir(parents=True, exist_ok=True)
    (args.report_dir / f"{stamp}.json").write_text(document)  # the report's own numbers
    text = markdown(run, charts(run, args.report_dir, stamp))
    (args.report_dir / f"{stamp}.md").write_text(text)
    print(text)
    print(f"results: {results / (stamp + '.json')}\nreport: {args.report_dir / (stamp + '.md')}")
    return 1 if run.failures else 0


if __name__ == "__main__":
    sys.exit(main())
