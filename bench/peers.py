"""Python peers on the same data: a partitioned overwrite by s3commit, awswrangler and deltalake.

Every tool gets the same pandas frames and the same local S3 endpoint (RGW or moto). Each
writes an initial table of 8 day partitions (untimed), then overwrites 2 of them ``repeats``
times (timed). After the last overwrite the table is read back and checked row by row count, so
no number is reported for a wrong result. A peer that cannot run here gets a record with its
error instead of numbers.

    python -m bench.peers --size-mib 64 --repeats 2 --endpoint rgw
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from typing import Any

import numpy as np
import pandas as pd

from s3commit_sdk import write_committed

from .harness import KINDS, MIB, Endpoint, Record, Run, Sample, measure, timed

SCENARIO = "peers"
MODE = "overwrite partitions"
DAYS = [f"2026-01-{day:02d}" for day in range(1, 9)]
OVERWRITTEN = DAYS[-2:]
ROW_BYTES = 1024  # random payload per row: incompressible, so every tool moves the same bytes


class WrongResult(RuntimeError):
    """A tool's table does not hold what the writes put in it: its timings must not count."""


@dataclass(frozen=True)
class Frames:
    """The input every tool gets, generated once so all tools write identical bytes."""

    initial: pd.DataFrame  # all 8 days, version "initial"
    update: pd.DataFrame  # the 2 overwritten days, version "update"
    update_mib: float  # payload of ``update``: what MiB/s is computed from

    def expected(self) -> Counter[tuple[str, str]]:
        """Rows per (day, version) once the overwrite is done: old untouched days, new others."""
        kept = self.initial[~self.initial["day"].isin(OVERWRITTEN)]
        return _count(kept["day"], kept["version"]) + _count(
            self.update["day"], self.update["version"]
        )


def _count(days: Any, versions: Any) -> Counter[tuple[str, str]]:
    return Counter(zip((str(d) for d in days), (str(v) for v in versions), strict=True))


def make_frames(size_mib: int, seed: int = 0) -> Frames:
    """``size_mib`` MiB of new rows over the 2 overwritten days; the initial table as large.

    The initial table spreads the same volume over all 8 days, so the overwritten days hold
    fewer old rows than new ones and a left-over old row changes the count.
    """
    rng = np.random.default_rng(seed)

    def frame(days: list[str], rows_per_day: int, version: str, first_id: int) -> pd.DataFrame:
        rows = rows_per_day * len(days)
        blob = rng.bytes(rows * ROW_BYTES)
        return pd.DataFrame(
            {
                "id": np.arange(first_id, first_id + rows, dtype=np.int64),
                "day": np.repeat(days, rows_per_day),
                "version": version,
                "payload": [blob[i * ROW_BYTES : (i + 1) * ROW_BYTES] for i in range(rows)],
            }
        )

    update_rows = max(1, size_mib * MIB // ROW_BYTES // len(OVERWRITTEN))
    initial_rows = max(1, size_mib * MIB // ROW_BYTES // len(DAYS))
    initial = frame(DAYS, initial_rows, "initial", 0)
    update = frame(OVERWRITTEN, update_rows, "update", len(initial))
    return Frames(initial, update, len(update) * ROW_BYTES / MIB)


def check(tool: str, frames: Frames, days: Any, versions: Any) -> None:
    """Raise :class:`WrongResult` unless the table holds exactly the expected rows per day."""
    found = _count(days, versions)
    expected = frames.expected()
    if found != expected:
        raise WrongResult(
            f"{tool}: rows per (day, version) are {dict(sorted(found.items()))}, expected "
            f"{dict(sorted(expected.items()))}"
        )


def read_hive(endpoint: Endpoint, prefix: str) -> tuple[Any, Any]:
    """Day and version of every visible row, read with pyarrow, not with the tool that wrote."""
    import pyarrow as pa
    import pyarrow.dataset as ds

    partitioning = ds.partitioning(pa.schema([("day", pa.string())]), flavor="hive")
    dataset = ds.dataset(
        f"{endpoint.url.removeprefix('s3://')}/{prefix}",
        filesystem=endpoint.server.arrow_fs(),
        format="parquet",
        partitioning=partitioning,
    )
    table = dataset.to_table(columns=["day", "version"])
    return table["day"].to_pylist(), table["version"].to_pylist()


def version(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "unknown"


def timed_overwrites(
    repeats: int, frames: Frames, write: Callable[[], Any], after: Callable[[], None] | None = None
) -> dict[str, dict[str, float]]:
    """Time ``write`` ``repeats`` times; ``after`` runs untimed after each (checks)."""

    def once(_: int) -> Sample:
        seconds, _result = timed(write)
        if after is not None:
            after()
        return {"seconds": seconds, "mib_per_s": frames.update_mib / seconds}

    return measure(repeats, once)


def run_s3commit(endpoint: Endpoint, frames: Frames, repeats: int) -> tuple[dict, dict]:
    """The partitioned committer, in-process engine: conflict_mode="replace" per partition."""
    url = f"{endpoint.url}/s3commit"

    def write(frame: pd.DataFrame, mode: str) -> Any:
        return write_committed(
            frame,
            url,
            committer="partitioned",
            partition_by=["day"],
            conflict_mode=mode,
            progress=False,
        )

    def no_pending() -> None:
        pending = endpoint.pending_uploads()
        if pending:
            raise WrongResult(f"s3commit left {pending} multipart uploads pending")

    write(frames.initial, "fail")
    no_pending()
    metrics = timed_overwrites(
        repeats, frames, lambda: write(frames.update, "replace"), after=no_pending
    )
    check("s3commit", frames, *read_hive(endpoint, "s3commit"))
    notes = {
        "version": version("s3commit-sdk"),
        "protocol": (
            "Tasks write files to local disk and upload each as a multipart upload left "
            "uncompleted; the job commit completes them, then deletes the old objects of the "
            "partitions that received data (no copy, no rename) and writes _SUCCESS."
        ),
    }
    return metrics, notes


def run_awswrangler(endpoint: Endpoint, frames: Frames, repeats: int) -> tuple[dict, dict]:
    """``wr.s3.to_parquet(mode="overwrite_partitions")`` through the default boto3 session.

    With the client settings our store uses on a custom endpoint (checksums only where
    required: Ceph RGW 16 refuses boto3's default trailing checksums).
    """
    import awswrangler as wr
    import boto3
    from botocore.config import Config

    url = f"{endpoint.url}/awswrangler/"
    session = boto3.Session()  # credentials and region from the environment the sandbox exports
    previous = wr.config.s3_endpoint_url, wr.config.botocore_config
    wr.config.s3_endpoint_url = endpoint.endpoint
    wr.config.botocore_config = Config(
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
    )

    def write(frame: pd.DataFrame, mode: str) -> Any:
        return wr.s3.to_parquet(
            frame,
            url,
            dataset=True,
            mode=mode,
            partition_cols=["day"],
            boto3_session=session,
        )

    try:
        write(frames.initial, "overwrite")
        metrics = timed_overwrites(
            repeats, frames, lambda: write(frames.update, "overwrite_partitions")
        )
        check("awswrangler", frames, *read_hive(endpoint, "awswrangler"))
    finally:
        wr.config.s3_endpoint_url, wr.config.botocore_config = previous
    notes = {
        "version": version("awswrangler"),
        "protocol": (
            "For each partition in the data it deletes the partition's objects, then puts the "
            "new Parquet files directly: readers can see a partition empty or half written, "
            "and a failure in between loses the old data (not atomic)."
        ),
    }
    return metrics, notes


def delta_options(endpoint: Endpoint) -> dict[str, str]:
    """delta-rs object_store settings: plain http to the local endpoint, env credentials."""
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
    return {
        "AWS_ENDPOINT_URL": endpoint.endpoint,
        "AWS_ALLOW_HTTP": "true",
        "AWS_REGION": region,
        "AWS_ACCESS_KEY_ID": os.environ["AWS_ACCESS_KEY_ID"],
        "AWS_SECRET_ACCESS_KEY": os.environ["AWS_SECRET_ACCESS_KEY"],
    }


def run_deltalake(endpoint: Endpoint, frames: Frames, repeats: int) -> tuple[dict, dict]:
    """``write_deltalake(mode="overwrite", predicate=...)``: replaces only the 2 days' files."""
    from deltalake import DeltaTable, write_deltalake

    url = f"{endpoint.url}/deltalake"
    storage = delta_options(endpoint)
    days = ", ".join(f"'{day}'" for day in OVERWRITTEN)

    def write(frame: pd.DataFrame, **kwargs: Any) -> None:
        write_deltalake(url, frame, partition_by=["day"], storage_options=storage, **kwargs)

    write(frames.initial, mode="error")
    metrics = timed_overwrites(
        repeats,
        frames,
        lambda: write(frames.update, mode="overwrite", predicate=f"day in ({days})"),
    )
    table = DeltaTable(url, storage_options=storage)
    rows = table.to_pyarrow_table(columns=["day", "version"])
    check("deltalake", frames, rows["day"].to_pylist(), rows["version"].to_pylist())
    notes = {
        "version": version("deltalake"),
        "protocol": (
            "Writes new Parquet files, then commits one JSON log entry (remove the 2 days' "
            "files, add the new ones) with a conditional put (If-None-Match: *); old files "
            "stay in the bucket until vacuum."
        ),
        "table_version": table.version(),
    }
    return metrics, notes


TOOLS: dict[str, Callable[[Endpoint, Frames, int], tuple[dict, dict]]] = {
    "s3commit (partitioned)": run_s3commit,
    "awswrangler": run_awswrangler,
    "deltalake": run_deltalake,
}
OURS = "s3commit (partitioned)"


def run_peers(run: Run, endpoint: Endpoint, size_mib: int, repeats: int) -> None:
    """One record per tool: seconds and MiB/s of ``repeats`` overwrites of 2 of 8 partitions.

    A peer's error becomes a record without metrics; an error of ours, or a wrong result from
    anyone, is raised: the numbers of a broken run must not be reported.
    """
    frames = make_frames(size_mib)
    for tool, runner in TOOLS.items():
        labels = {"endpoint": endpoint.kind, "tool": tool, "size_mib": size_mib, "mode": MODE}
        endpoint.reset()
        started = time.monotonic()
        try:
            metrics, notes = runner(endpoint, frames, repeats)
        except WrongResult:
            raise
        except Exception as exc:
            if tool == OURS:
                raise
            notes = {"error": f"{type(exc).__name__}: {exc}"[:2000]}
            run.add(Record(SCENARIO, labels, {}, notes))
            continue
        notes["wall_s"] = round(time.monotonic() - started, 2)  # with the untimed setup
        notes["rows_overwritten"] = len(frames.update)
        notes["overwrite_mib"] = round(frames.update_mib, 2)
        run.add(Record(SCENARIO, labels, metrics, notes))
    endpoint.reset()  # leave moto's memory free for the next scenario


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mib", type=int, default=64, help="new data per overwrite")
    parser.add_argument("--repeats", type=int, default=2, help="timed overwrites per tool")
    parser.add_argument("--endpoint", choices=KINDS, default=KINDS[0])
    args = parser.parse_args(argv)
    run = Run(mode="peers")
    started = time.monotonic()
    with Endpoint(args.endpoint) as endpoint:
        run_peers(run, endpoint, args.size_mib, args.repeats)
    run.seconds[SCENARIO] = time.monotonic() - started
    print(f"\n{SCENARIO}: {args.size_mib} MiB x {args.repeats}, {run.seconds[SCENARIO]:.1f} s")
    for record in run.records:
        print(f"- {record.labels['tool']}")
        for name, summary in record.metrics.items():
            print(
                f"    {name}: median {summary['median']:.3f} "
                f"(min {summary['min']:.3f}, max {summary['max']:.3f}, n={summary['n']:.0f})"
            )
        for name, value in record.notes.items():
            print(f"    {name}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
