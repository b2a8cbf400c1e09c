"""Python peers on the same data: a partitioned overwrite by s3commit, awswrangler and deltalake.

Ours twice: the ``partitioned`` committer (write_committed's default: files on local disk,
uploaded at task commit) and ``magic`` (parts uploaded while the file is encoded).

Every tool gets the same pandas frames and the same local S3 endpoint (RGW or moto). Each
writes an initial table of 8 day partitions (untimed), then overwrites 2 of them ``repeats``
times (timed), in interleaved rounds: every round times each tool once, in an order that
rotates, so load from other work on a shared machine falls on all tools alike and the ratios
of one run compare. After the last overwrite the table is read back and checked row by row
count, so no number is reported for a wrong result. A peer that cannot run here gets a record
with its error instead of numbers.

    python -m bench.peers --size-mib 64 --repeats 2 --endpoint rgw
    python -m bench.peers --size-mib 256 --repeats 5 --endpoint rgw --option multipart.size=16M
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from importlib import metadata
from typing import Any

import numpy as np
import pandas as pd

from s3commit_sdk import write_committed

from .harness import KINDS, MIB, Endpoint, Record, Run, Sample, aggregate, cpu_of, measure, timed

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


def hive_checked(
    endpoint: Endpoint,
    frames: Frames,
    tool: str,
    distribution: str,
    protocol: str,
    prefix: str | None = None,
) -> dict[str, Any]:
    """A Hive-layout tool's table (under ``prefix``, else under the tool's name) checked row by
    row; its version and protocol for the notes."""
    check(tool, frames, *read_hive(endpoint, prefix or tool))
    return {"version": version(distribution), "protocol": protocol}


def version(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "unknown"


def timed_overwrites(
    repeats: int,
    endpoint: Endpoint,
    frames: Frames,
    write: Callable[[], Any],
    after: Callable[[], None] | None = None,
) -> dict[str, dict[str, float]]:
    """Time ``write`` ``repeats`` times; ``after`` runs untimed after each (checks)."""
    return measure(repeats, lambda _: overwrite_sample(endpoint, frames, write, after))


def overwrite_sample(
    endpoint: Endpoint,
    frames: Frames,
    write: Callable[[], Any],
    after: Callable[[], None] | None = None,
) -> Sample:
    """One timed overwrite: seconds, MiB/s, and the CPU it took of the client (this process:
    an in-process tool's threads, Rust's too) and of the server; ``after`` runs untimed
    (checks)."""
    used, (seconds, _result) = cpu_of(endpoint, partial(timed, write))
    if after is not None:
        after()
    return {"seconds": seconds, "mib_per_s": frames.update_mib / seconds, **used}


@dataclass
class Peer:
    """One tool with its initial table written (untimed): ``overwrite`` is what a round times,
    ``after`` checks each overwrite untimed, ``finish`` reads the table back (raising
    :class:`WrongResult`) and returns the record's notes; ``close`` undoes what the tool's
    setup changed in this process."""

    overwrite: Callable[[], Any]
    finish: Callable[[], dict[str, Any]]
    after: Callable[[], None] | None = None
    close: Callable[[], None] = lambda: None


#: what our job commit does, whichever committer's uploads it completes
_JOB_COMMIT = (
    "left uncompleted; the job commit completes them, then deletes the old objects of the "
    "partitions that received data (no copy, no rename) and writes _SUCCESS."
)
#: what each of our committers does, for the notes
PROTOCOLS = {
    "partitioned": "Tasks write files to local disk and upload each as a multipart upload "
    + _JOB_COMMIT,
    "magic": "Tasks stream each file's parts into a multipart upload as they encode it, "
    + _JOB_COMMIT,
}


def start_s3commit(
    endpoint: Endpoint, frames: Frames, options: dict[str, str], committer: str
) -> Peer:
    """One of our committers, in-process engine: conflict_mode="replace" per partition.
    ``options``: write options of ours (``--option``), recorded in the notes."""
    tool, prefix = ours(committer), f"s3commit-{committer}"
    url = f"{endpoint.url}/{prefix}"

    def write(frame: pd.DataFrame, mode: str) -> Any:
        return write_committed(
            frame,
            url,
            committer=committer,
            partition_by=["day"],
            conflict_mode=mode,
            options=options,
            progress=False,
        )

    def no_pending() -> None:
        pending = endpoint.pending_uploads()
        if pending:
            raise WrongResult(f"{tool} left {pending} multipart uploads pending")

    def finish() -> dict[str, Any]:
        notes = hive_checked(endpoint, frames, tool, "s3commit-sdk", PROTOCOLS[committer], prefix)
        return {**notes, **({"options": options} if options else {})}

    write(frames.initial, "fail")
    no_pending()
    return Peer(lambda: write(frames.update, "replace"), finish, after=no_pending)


def start_awswrangler(endpoint: Endpoint, frames: Frames) -> Peer:
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

    def close() -> None:
        wr.config.s3_endpoint_url, wr.config.botocore_config = previous

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

    def finish() -> dict[str, Any]:
        return hive_checked(
            endpoint,
            frames,
            "awswrangler",
            "awswrangler",
            "For each partition in the data it deletes the partition's objects, then puts "
            "the new Parquet files directly: readers can see a partition empty or half "
            "written, and a failure in between loses the old data (not atomic).",
        )

    try:
        write(frames.initial, "overwrite")
    except BaseException:
        close()
        raise
    return Peer(lambda: write(frames.update, "overwrite_partitions"), finish, close=close)


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


def start_deltalake(endpoint: Endpoint, frames: Frames) -> Peer:
    """``write_deltalake(mode="overwrite", predicate=...)``: replaces only the 2 days' files."""
    from deltalake import DeltaTable, write_deltalake

    url = f"{endpoint.url}/deltalake"
    storage = delta_options(endpoint)
    days = ", ".join(f"'{day}'" for day in OVERWRITTEN)

    def write(frame: pd.DataFrame, **kwargs: Any) -> None:
        write_deltalake(url, frame, partition_by=["day"], storage_options=storage, **kwargs)

    def finish() -> dict[str, Any]:
        table = DeltaTable(url, storage_options=storage)
        rows = table.to_pyarrow_table(columns=["day", "version"])
        check("deltalake", frames, rows["day"].to_pylist(), rows["version"].to_pylist())
        return {
            "version": version("deltalake"),
            "protocol": (
                "Writes new Parquet files, then commits one JSON log entry (remove the 2 days' "
                "files, add the new ones) with a conditional put (If-None-Match: *); old files "
                "stay in the bucket until vacuum."
            ),
            "table_version": table.version(),
        }

    write(frames.initial, mode="error")
    return Peer(
        lambda: write(frames.update, mode="overwrite", predicate=f"day in ({days})"), finish
    )


def ours(committer: str) -> str:
    """The tool name of one of our committers."""
    return f"s3commit ({committer})"


#: the write_committed default first, then the committer that streams while it encodes
OUR_TOOLS = tuple(ours(committer) for committer in PROTOCOLS)
OURS = OUR_TOOLS[0]
PEERS: dict[str, Callable[[Endpoint, Frames], Peer]] = {
    "awswrangler": start_awswrangler,
    "deltalake": start_deltalake,
}


def rotated(tools: list[str], round_number: int) -> list[str]:
    """The order of one round: each tool goes first in turn."""
    shift = round_number % len(tools) if tools else 0
    return tools[shift:] + tools[:shift]


def round_ratios(samples: dict[str, list[Sample]], tool: str) -> dict[str, float]:
    """Per peer, the median over rounds of ``tool``'s seconds over the peer's in the same round:
    steadier on a shared machine than a ratio of medians."""
    mine = samples.get(tool, [])

    def ratio(theirs: list[Sample]) -> float:
        # a peer that failed in a later round has only the first rounds' samples
        pairs = zip(mine, theirs, strict=False)
        return round(statistics.median(o["seconds"] / t["seconds"] for o, t in pairs), 3)

    return {
        peer: ratio(theirs)
        for peer, theirs in samples.items()
        if peer not in OUR_TOOLS and theirs and mine
    }


def run_peers(
    run: Run, endpoint: Endpoint, size_mib: int, repeats: int, options: dict[str, str] | None = None
) -> None:
    """One record per tool: seconds and MiB/s of ``repeats`` overwrites of 2 of 8 partitions,
    in interleaved rounds. ``options``: write options of ours.

    A peer's error becomes a record without metrics; an error of ours, or a wrong result from
    anyone, is raised: the numbers of a broken run must not be reported.
    """
    frames = make_frames(size_mib)
    starts = {
        ours(committer): partial(start_s3commit, options=dict(options or {}), committer=committer)
        for committer in PROTOCOLS
    }
    starts.update(PEERS)
    peers: dict[str, Peer] = {}
    setup_s: dict[str, float] = {}
    samples: dict[str, list[Sample]] = {}

    def labels(tool: str) -> dict[str, Any]:
        return {"endpoint": endpoint.kind, "tool": tool, "size_mib": size_mib, "mode": MODE}

    def failed(tool: str, exc: Exception) -> None:
        """A peer that cannot run here: its error is its record; ours is raised."""
        if tool in OUR_TOOLS or isinstance(exc, WrongResult):
            raise exc
        peer = peers.pop(tool, None)
        if peer is not None:
            peer.close()
        notes = {"error": f"{type(exc).__name__}: {exc}"[:2000]}
        run.add(Record(SCENARIO, labels(tool), {}, notes))

    endpoint.reset()
    try:
        for tool, start in starts.items():
            try:
                setup_s[tool], peers[tool] = timed(lambda start=start: start(endpoint, frames))
            except Exception as exc:
                failed(tool, exc)
        for round_number in range(repeats):
            for tool in rotated(list(peers), round_number):
                peer = peers[tool]
                try:
                    sample = overwrite_sample(endpoint, frames, peer.overwrite, peer.after)
                except Exception as exc:
                    failed(tool, exc)
                    continue
                samples.setdefault(tool, []).append(sample)
            endpoint.collect_garbage()  # untimed: each round replaces about 1 GiB on RGW
        for tool, peer in peers.items():
            notes = peer.finish()
            if tool in OUR_TOOLS:
                notes["round_ratios"] = round_ratios(samples, tool)
            notes["setup_s"] = round(setup_s[tool], 2)  # the initial table, untimed
            notes["rows_overwritten"] = len(frames.update)
            notes["overwrite_mib"] = round(frames.update_mib, 2)
            run.add(Record(SCENARIO, labels(tool), aggregate(samples[tool]), notes))
    finally:
        for peer in peers.values():
            peer.close()
    endpoint.reset()  # leave moto's memory free for the next scenario


def option(text: str) -> tuple[str, str]:
    """``--option name=value``."""
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"{text!r} is not name=value")
    return name, value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mib", type=int, default=64, help="new data per overwrite")
    parser.add_argument("--repeats", type=int, default=2, help="rounds of timed overwrites")
    parser.add_argument("--endpoint", choices=KINDS, default=KINDS[0])
    parser.add_argument(
        "--option", type=option, action="append", default=[], help="name=value, ours only"
    )
    args = parser.parse_args(argv)
    run = Run(mode="peers")
    started = time.monotonic()
    with Endpoint(args.endpoint) as endpoint:
        endpoint.activate()
        run_peers(run, endpoint, args.size_mib, args.repeats, dict(args.option))
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
