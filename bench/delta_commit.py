"""Job commit of ``format="delta"`` next to ``format="parquet"``: same data, committer and files.

Each run appends the same 32 files (8 tasks x 4 partitions) once as plain Parquet and once as a
Delta version, alternating, and records the job-commit phase (marker or not, journal,
completions, the Delta transaction, clean-up, ``_SUCCESS``) and job setup (where a Delta job
reads the table's snapshot). It also times what reading the files' Parquet footers back at job
commit would cost, the alternative to carrying statistics in the tasks' commit messages.

    python -m bench.delta_commit --server moto --runs 5
    python -m bench.delta_commit --server rgw --runs 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from concurrent.futures import ThreadPoolExecutor

import pandas as pd

from s3commit_sdk import write_committed
from s3commit_sdk.testing.rgw import RGWServer
from s3commit_sdk.testing.sandbox import S3Sandbox

BUCKET = "bench-delta"
TASKS, DAYS, ROWS = 8, 4, 80_000


def data() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "id": range(ROWS),
            "payload": [os.urandom(8).hex() for _ in range(ROWS)],
            "day": [f"2026-11-{20 + i % DAYS}" for i in range(ROWS)],
        }
    )


def footer_seconds(server, keys: list[str]) -> float:
    """Read every file's footer (its last 64 KiB) in parallel, as job commit would have to."""
    client = server.client()
    started = time.monotonic()
    with ThreadPoolExecutor(32) as pool:
        list(
            pool.map(
                lambda k: client.get_object(Bucket=BUCKET, Key=k, Range="bytes=-65536")[
                    "Body"
                ].read(),
                keys,
            )
        )
    return time.monotonic() - started


def measure(server, committer: str, runs: int) -> dict:
    frame = data()
    found: dict[str, list[float]] = {"parquet": [], "delta": [], "delta_tx": [], "footers": []}
    for fmt in ("parquet", "delta"):  # the first job creates the table: not measured
        write_committed(
            frame,
            f"s3://{BUCKET}/{committer}-{fmt}",
            format=fmt,
            progress=False,
            committer=committer,
            partition_by=["day"],
            options={"tasks": TASKS},
        )
    for _ in range(runs):
        for fmt in ("parquet", "delta"):
            result = write_committed(
                frame,
                f"s3://{BUCKET}/{committer}-{fmt}",
                format=fmt,
                committer=committer,
                partition_by=["day"],
                conflict_mode="append",
                options={"tasks": TASKS},
                progress=False,
            )
            assert len(result.files) == TASKS * DAYS
            found[fmt].append(result.phases["job_commit"])
            for phase in ("job_setup", "complete_uploads", "cleanup"):
                found.setdefault(f"{fmt}_{phase}", []).append(result.phases[phase])
            if fmt == "delta":
                found["delta_tx"].append(result.phases["delta_commit"])
                found["footers"].append(footer_seconds(server, [f.key for f in result.files]))
    return {name: round(statistics.median(values), 4) for name, values in found.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", choices=("moto", "rgw"), default="moto")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--committers", default="partitioned,magic")
    args = parser.parse_args()
    server = (
        S3Sandbox(bucket=BUCKET, server_module="bench.s3_server")
        if args.server == "moto"
        else RGWServer(bucket=BUCKET)
    )
    with server:
        for committer in args.committers.split(","):
            medians = measure(server, committer, args.runs)
            print(
                json.dumps(
                    {
                        "server": args.server,
                        "committer": committer,
                        "files": TASKS * DAYS,
                        "runs": args.runs,
                        **medians,
                    }
                )
            )


if __name__ == "__main__":
    main()
