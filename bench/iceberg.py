"""Iceberg tables: s3commit beside pyiceberg's own writes, and a job's snapshot vs plain Parquet.

Two scenarios, run on RGW and moto like the others:

- **iceberg peers**: the partitioned overwrite of ``bench/peers.py`` (its frames and its row
  check) as an Iceberg table: ``write_committed(format="iceberg", committer="partitioned",
  conflict_mode="replace")`` beside pyiceberg's ``Table.dynamic_partition_overwrite`` and
  ``Table.append`` (the same new bytes, added beside the old rows: an append, not an overwrite)
  on an equivalent table (the same Iceberg schema, identity partition on ``day``; pyiceberg's
  own file IO). Every tool has its own SQL catalog, a sqlite file in a temporary directory.
  Each writes the initial 8 days (untimed), then ``repeats`` timed writes of the 2 new days,
  then one more through the fault proxy, which counts the S3 requests of one commit by
  operation; last, the table is read back with pyiceberg and checked row by row count, so no
  number is reported for a wrong result.
- **iceberg commit**: the job commit of ``files`` small files (one row each) as one Iceberg
  snapshot against the same job as plain Parquet: same committer, same data, same threads.

    python -m bench.iceberg --endpoint moto --size-mib 8 --files 300
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from typing import Any
from unittest import mock

import pandas as pd
import pyarrow as pa

from s3commit_sdk import write_committed
from s3commit_sdk.iceberg import open_table
from s3commit_sdk.iceberg.schema import fresh_schema, identity_spec
from s3commit_sdk.testing.faultproxy import FaultProxy

from .harness import BUCKET, KINDS, Endpoint, Record, Run, aggregate
from .peers import (
    DAYS,
    MODE,
    Frames,
    WrongResult,
    _count,
    check,
    make_frames,
    timed_overwrites,
    version,
)

PEERS = "iceberg_peers"
COMMIT = "iceberg_commit"
APPEND = "append (not an overwrite)"
NAMESPACE = "bench"
OURS = "s3commit (iceberg, partitioned)"
#: where an Iceberg table keeps its metadata files (metadata.json, manifest lists, manifests)
METADATA = "/metadata/"


# -- iceberg peers -------------------------------------------------------------------------------
def rows_of(table: Any) -> tuple[list, list]:
    """Day and version of every row of the table's current snapshot, read by pyiceberg."""
    rows = table.scan(selected_fields=("day", "version")).to_arrow()
    return rows["day"].to_pylist(), rows["version"].to_pylist()


def no_pending(endpoint: Endpoint, tool: str) -> None:
    pending = endpoint.pending_uploads()
    if pending:
        raise WrongResult(f"{tool} left {pending} multipart uploads pending")


def phase_seconds(result: Any) -> dict[str, float]:
    """The job's phases (``tasks``, ``job_commit``, ``iceberg_commit``, ...) as metrics."""
    return {f"{phase}_s": seconds for phase, seconds in result.phases.items()}


def request_notes(counts: dict[str, int]) -> dict[str, Any]:
    return {"requests": counts, "requests_total": sum(counts.values())}


def run_s3commit(
    endpoint: Endpoint, frames: Frames, repeats: int, folder: str
) -> tuple[dict, dict]:
    """The partitioned committer: one ``overwrite`` snapshot replacing the 2 days' files."""
    url = f"{endpoint.url}/s3commit"
    options = {
        "iceberg.table": f"{NAMESPACE}.s3commit",
        "iceberg.catalog.uri": f"sqlite:///{folder}/s3commit.db",
    }

    def write(frame: pd.DataFrame, mode: str, s3: str | None = None) -> Any:
        return write_committed(
            frame,
            url,
            format="iceberg",
            committer="partitioned",
            partition_by=["day"],
            conflict_mode=mode,
            options={**options, **({"endpoint": s3} if s3 else {})},
            progress=False,
        )

    write(frames.initial, "fail")
    before = len(open_table(url, options).snapshots())
    results: list[Any] = []
    metrics = timed_overwrites(
        repeats,
        endpoint,
        frames,
        lambda: results.append(write(frames.update, "replace")),
        after=lambda: no_pending(endpoint, OURS),
    )
    metrics |= aggregate([phase_seconds(r) for r in results])
    with FaultProxy(endpoint.endpoint) as proxy:
        proxy.record_headers("content-type")  # any header: the proxy then keeps every path
        result = write(frames.update, "replace", proxy.endpoint)
        counts, seen = proxy.counts, proxy.requests
    no_pending(endpoint, OURS)
    table = open_table(url, options)
    check(OURS, frames, *rows_of(table))
    sdk = sum(result.requests.values())
    on_metadata = Counter(q.operation for q in seen if METADATA in q.path)
    elsewhere = Counter(q.operation for q in seen if METADATA not in q.path)
    notes = {
        "version": version("s3commit-sdk"),
        "protocol": (
            "Tasks write Parquet with Iceberg field ids and statistics and leave each file an "
            "uncompleted multipart upload; job commit completes them, then commits one "
            "overwrite snapshot (the 2 days' old files removed, the new ones added) through "
            "pyiceberg's SQL catalog, then writes _SUCCESS."
        ),
        **request_notes(counts),
        "sdk_requests": dict(sorted(result.requests.items())),
        "sdk_requests_total": sdk,
        "pyiceberg_requests_total": sum(counts.values()) - sdk,
        # of those: pyiceberg's, on the table's metadata files; the SDK's own not in the count
        "metadata_requests": dict(sorted(on_metadata.items())),
        "metadata_requests_total": on_metadata.total(),
        "sdk_uncounted": dict(sorted((elsewhere - Counter(result.requests)).items())),
        "files_per_write": len(result.files),
        "snapshots_per_write": (len(table.snapshots()) - before) / (repeats + 1),
    }
    return metrics, notes


#: pyarrow's S3 client (the AWS C++ SDK) sends UploadPart with aws-chunked trailing checksums
#: by default, which Ceph RGW 16 refuses (HTTP 411 MissingContentLength) for every file
#: pyiceberg writes; checksums only where required, as our store and boto3 here are configured,
#: is read from the environment when a filesystem is made
PYARROW_S3_ENV = {"AWS_REQUEST_CHECKSUM_CALCULATION": "when_required"}


def pyiceberg_catalog(uri: str, s3: str) -> Any:
    """A SQL catalog whose file IO (pyiceberg's default, pyarrow's S3) reaches ``s3``."""
    from pyiceberg.catalog.sql import SqlCatalog

    return SqlCatalog(
        "bench",
        uri=uri,
        **{
            "s3.endpoint": s3,
            "s3.region": os.environ.get("AWS_REGION", "us-east-1"),
            "s3.access-key-id": os.environ["AWS_ACCESS_KEY_ID"],
            "s3.secret-access-key": os.environ["AWS_SECRET_ACCESS_KEY"],
        },
    )


def arrow(frame: pd.DataFrame) -> pa.Table:
    return pa.Table.from_pandas(frame, preserve_index=False)


def peer_table(catalog: Any, name: str, location: str, data: pa.Table) -> Any:
    """A new table of the schema and identity partition s3commit's first job gives its own."""
    schema = fresh_schema(data.schema)
    catalog.create_namespace_if_not_exists(NAMESPACE)
    return catalog.create_table(
        f"{NAMESPACE}.{name}",
        schema=schema,
        location=location,
        partition_spec=identity_spec(schema, ("day",)),
    )


def appended(frames: Frames, times: int) -> Counter[tuple[str, str]]:
    """Rows per (day, version) after the initial table and ``times`` appends of the update."""
    found = _count(frames.initial["day"], frames.initial["version"])
    for _ in range(times):
        found += _count(frames.update["day"], frames.update["version"])
    return found


def pyiceberg_runner(append: bool) -> Callable[[Endpoint, Frames, int, str], tuple[dict, dict]]:
    """pyiceberg writing the new days itself: ``dynamic_partition_overwrite`` or ``append``."""

    def run_pyiceberg(
        endpoint: Endpoint, frames: Frames, repeats: int, folder: str
    ) -> tuple[dict, dict]:
        with mock.patch.dict(os.environ, PYARROW_S3_ENV):
            return write_and_check(endpoint, frames, repeats, folder)

    def write_and_check(endpoint: Endpoint, frames: Frames, repeats: int, folder: str):
        name = "pyiceberg_append" if append else "pyiceberg_overwrite"
        tool = f"pyiceberg {'append' if append else 'dynamic_partition_overwrite'}"
        uri = f"sqlite:///{folder}/{name}.db"
        initial, update = arrow(frames.initial), arrow(frames.update)
        table = peer_table(
            pyiceberg_catalog(uri, endpoint.endpoint), name, f"{endpoint.url}/{name}", initial
        )
        table.append(initial)
        before = len(table.snapshots())

        def write(target: Any) -> None:
            if append:
                target.append(update)
            else:
                target.dynamic_partition_overwrite(update)

        metrics = timed_overwrites(repeats, endpoint, frames, lambda: write(table))
        with FaultProxy(endpoint.endpoint) as proxy:
            write(pyiceberg_catalog(uri, proxy.endpoint).load_table(f"{NAMESPACE}.{name}"))
            counts = proxy.counts
        no_pending(endpoint, tool)
        table.refresh()
        days, versions = rows_of(table)
        if append:
            found, expected = _count(days, versions), appended(frames, repeats + 1)
            if found != expected:
                raise WrongResult(
                    f"{tool}: rows per (day, version) are {dict(found)}, not {dict(expected)}"
                )
        else:
            check(tool, frames, days, versions)
        summary = table.current_snapshot().summary
        notes = {
            "version": version("pyiceberg"),
            "protocol": (
                "Appends the new rows as new files: nothing is replaced, the table grows by "
                "the 2 days at every write (not an overwrite; the same bytes written)."
                if append
                else "Writes the new files, then, in one catalog commit, a delete snapshot "
                "removing the 2 days' files and an append snapshot adding the new ones: time "
                "travel sees the snapshot between, without the 2 days."
            ),
            "client": f"pyarrow S3 with {PYARROW_S3_ENV}",
            **request_notes(counts),
            "files_per_write": int(summary.additional_properties.get("added-data-files", 0)),
            "snapshots_per_write": (len(table.snapshots()) - before) / (repeats + 1),
        }
        return metrics, notes

    return run_pyiceberg


TOOLS: dict[str, Callable[[Endpoint, Frames, int, str], tuple[dict, dict]]] = {
    OURS: run_s3commit,
    "pyiceberg dynamic_partition_overwrite": pyiceberg_runner(append=False),
    "pyiceberg append": pyiceberg_runner(append=True),
}


def run_peers(run: Run, endpoint: Endpoint, size_mib: int, repeats: int) -> None:
    """One record per tool: seconds and MiB/s of ``repeats`` writes of the 2 new days, and
    the S3 requests of one more. A peer's error becomes a record without metrics; an error of
    ours, or a wrong result from anyone, is raised."""
    frames = make_frames(size_mib)
    with tempfile.TemporaryDirectory(prefix="s3commit-bench-iceberg-") as folder:
        for tool, runner in TOOLS.items():
            mode = APPEND if tool.endswith("append") else MODE
            labels = {"endpoint": endpoint.kind, "tool": tool, "size_mib": size_mib, "mode": mode}
            endpoint.reset()
            started = time.monotonic()
            try:
                metrics, notes = runner(endpoint, frames, repeats, folder)
            except WrongResult:
                raise
            except Exception as exc:
                if tool == OURS:
                    raise
                notes = {"error": f"{type(exc).__name__}: {exc}"[:2000]}
                run.add(Record(PEERS, labels, {}, notes))
                continue
            notes["wall_s"] = round(time.monotonic() - started, 2)  # with the untimed setup
            notes["rows_written"] = len(frames.update)
            notes["written_mib"] = round(frames.update_mib, 2)
            run.add(Record(PEERS, labels, metrics, notes))
    endpoint.reset()


# -- iceberg commit ------------------------------------------------------------------------------
FORMATS = ("parquet", "iceberg")


def commit_frame(rows: int) -> pd.DataFrame:
    """``rows`` small rows over the 8 days: one file each at ``max_records_per_file=1``."""
    return pd.DataFrame(
        {
            "id": range(rows),
            "day": [DAYS[i % len(DAYS)] for i in range(rows)],
            "payload": [f"{i:016x}" for i in range(rows)],
        }
    )


def visible_files(endpoint: Endpoint, fmt: str, url: str, options: dict[str, Any]) -> int:
    """Data files a reader of the format sees: the table's current files, or the listing."""
    if fmt == "iceberg":
        return len(list(open_table(url, options).scan().plan_files()))
    prefix = url.removeprefix(f"s3://{BUCKET}/") + "/"
    pages = (
        endpoint.client().get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
    )
    return sum(
        1 for page in pages for o in page.get("Contents", []) if o["Key"].endswith(".parquet")
    )


def run_commit(run: Run, endpoint: Endpoint, files: int, repeats: int) -> None:
    """Per format, the job commit of ``files`` one-row files appended ``repeats`` times
    (the formats alternating), after an untimed one-row job that creates the table."""
    frame = commit_frame(files)
    samples: dict[str, list[dict[str, float]]] = {fmt: [] for fmt in FORMATS}
    with tempfile.TemporaryDirectory(prefix="s3commit-bench-iceberg-") as folder:
        jobs = {
            fmt: (
                f"{endpoint.url}/commit-{fmt}",
                {"max_records_per_file": 1}
                | (
                    {
                        "iceberg.table": f"{NAMESPACE}.commit",
                        "iceberg.catalog.uri": f"sqlite:///{folder}/commit.db",
                    }
                    if fmt == "iceberg"
                    else {}
                ),
            )
            for fmt in FORMATS
        }

        def write(fmt: str, data: pd.DataFrame) -> Any:
            url, options = jobs[fmt]
            return write_committed(
                data,
                url,
                format=fmt,
                committer="partitioned",
                partition_by=["day"],
                conflict_mode="append",
                options=options,
                progress=False,
            )

        for fmt in FORMATS:
            write(fmt, frame.head(1))
        for _ in range(repeats):
            for fmt in FORMATS:
                result = write(fmt, frame)
                if len(result.files) != files:
                    raise WrongResult(f"{fmt}: {len(result.files)} files committed, not {files}")
                no_pending(endpoint, fmt)
                samples[fmt].append(phase_seconds(result))
        for fmt in FORMATS:
            url, options = jobs[fmt]
            seen, expected = visible_files(endpoint, fmt, url, options), 1 + repeats * files
            if seen != expected:
                raise WrongResult(f"{fmt}: a reader sees {seen} files, expected {expected}")
            run.add(
                Record(
                    COMMIT,
                    {"endpoint": endpoint.kind, "format": fmt, "files": files},
                    aggregate(samples[fmt]),
                    {"committer": "partitioned", "visible_files": seen},
                )
            )
    endpoint.reset()


# -- report cells -------------------------------------------------------------------------------
def requests_cell(record: Record) -> str:
    """S3 requests of one commit; for s3commit, those its result counts and the others."""
    notes = record.notes
    if "requests_total" not in notes:
        return "-"
    if "sdk_requests_total" not in notes:
        return str(notes["requests_total"])
    on_metadata = notes.get("metadata_requests_total")
    return (
        f"{notes['requests_total']}: {notes['sdk_requests_total']} in result.requests, "
        f"{notes['pyiceberg_requests_total']} outside it"
        + (f" ({on_metadata} on the table's metadata by pyiceberg)" if on_metadata else "")
    )


def operations_cell(record: Record) -> str:
    return ", ".join(f"{op} {n}" for op, n in record.notes.get("requests", {}).items())


def shape_cell(record: Record) -> str:
    """Files and snapshots one write adds."""
    notes = record.notes
    if "files_per_write" not in notes:
        return "-"
    return f"{notes['files_per_write']} / {notes['snapshots_per_write']:g}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--endpoint", choices=KINDS, default=KINDS[0])
    parser.add_argument("--size-mib", type=int, default=64, help="new data per overwrite")
    parser.add_argument("--repeats", type=int, default=2, help="timed writes per tool")
    parser.add_argument("--files", type=int, default=1000, help="files of the committed job")
    parser.add_argument("--commit-repeats", type=int, default=1)
    args = parser.parse_args(argv)
    from s3commit_sdk.testing.sandbox import DUMMY_ENV

    os.environ.update(DUMMY_ENV)
    run = Run(mode="iceberg", endpoints=[args.endpoint])
    with Endpoint(args.endpoint) as endpoint:
        endpoint.activate()
        endpoint.reset()
        run_peers(run, endpoint, args.size_mib, args.repeats)
        run_commit(run, endpoint, args.files, args.commit_repeats)
    from .report import SECTIONS, side_by_side, table

    for title, scenario, columns in SECTIONS:
        records = side_by_side(run.of(scenario))
        if scenario in (PEERS, COMMIT) and records:
            labels = list(records[0].labels)
            rows = [
                [str(r.labels[k]) for k in labels] + [f(r) for _, f in columns] for r in records
            ]
            print(
                "\n".join([f"## {title}", "", *table(labels + [c for c, _ in columns], rows), ""])
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
