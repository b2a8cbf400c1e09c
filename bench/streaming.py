"""Scenario 11: Structured Streaming, a stream of small micro-batches into each sink.

A local Parquet file source read one file per micro-batch (``maxFilesPerTrigger=1``, trigger
``availableNow``: the query drains the directory and stops); every file holds rows of 8 days, so
each batch writes 8 files, one per ``day`` partition. The same stream goes to:

- ``df.writeStream.format("s3commit")`` (partitioned committer, Parquet, ``partition_by=day``):
  every batch one committed job, its record (``stream_batches``) carrying its commit time;
- the same with ``.option("format", "delta")``: every batch one Delta version;
- Spark's own file sink (``writeStream.format("parquet")``) to a local temporary directory, the
  reference: this Spark has no ``s3a://`` (no hadoop-aws jars), so it cannot write to the
  endpoint; its batches are timed on local disk.

Per writer: end-to-end rows/s (source rows over the query's wall time, from ``start()`` to the
end of ``awaitTermination()``), the commit of each batch from its record (``commit_s``: from the
tasks' end to the record, the batch's job commit), and for every writer Spark's own
``durationMs["addBatch"]`` per batch (the sink's whole write of the batch: tasks and commit),
which for Spark's file sink is the nearest equivalent of a commit time (it reports none
apart). Each writer first runs one untimed single-batch query (the session's first streaming
query and the data source's first Python worker are paid there); the writers then take turns
for ``repeats`` timed queries, each with a fresh checkpoint and destination; batch figures are
pooled over the repeats. Every query is checked: its batches, rows and files at the destination,
and no multipart upload left pending.

    python -m bench.streaming --endpoint moto --batches 5 --rows 4000
"""

from __future__ import annotations

import argparse
import hashlib
import math
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .harness import BUCKET, KINDS, Endpoint, Record, Run, summarize

SCENARIO = "streaming"
OURS = "s3commit (parquet)"
DELTA = "s3commit (delta)"
SPARK = "Spark file sink (parquet, local disk)"
WRITERS = (OURS, DELTA, SPARK)
COMMITTER = "partitioned"
#: one day partition per file: each batch's single task writes one file into each
DAYS = tuple(f"2026-11-{d:02d}" for d in range(1, 9))
SCHEMA = "id long, day string, amount double, payload string"
#: where each writer's commit figure comes from
COMMIT_SOURCE = {
    OURS: "commit_s of the batch's record (stream_batches)",
    DELTA: "commit_s of the batch's record (stream_batches)",
    SPARK: "none apart: durationMs.addBatch (its whole write of the batch) is the nearest",
}


class WrongResult(AssertionError):
    """A writer's output is not the stream's rows: no figure for it."""


# -- the source -------------------------------------------------------------------------------
def write_source(folder: Path, batches: int, rows: int) -> None:
    """``batches`` Parquet files of ``rows`` rows, each over the 8 days (one file per batch)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir(parents=True, exist_ok=True)
    for n in range(batches):
        ids = range(n * rows, (n + 1) * rows)
        table = pa.table(
            {
                "id": pa.array(ids, pa.int64()),
                "day": [DAYS[i % len(DAYS)] for i in ids],
                "amount": pa.array([i * 0.25 for i in ids], pa.float64()),
                # hardly compressible, as the other scenarios' rows
                "payload": [hashlib.sha256(b"%d" % i).hexdigest() for i in ids],
            }
        )
        path = folder / f"batch-{n:05d}.parquet"
        pq.write_table(table, path)
        # the file source takes the oldest first: the batches in order, whatever the clock
        os.utime(path, (1_700_000_000 + n, 1_700_000_000 + n))


# -- one query ---------------------------------------------------------------------------------
def sink_options(endpoint: Endpoint) -> dict[str, str]:
    """The data source's endpoint and keys: its Python workers keep the environment the JVM
    started with, not the endpoint this case activated."""
    env = endpoint.server.env
    return {
        "endpoint": endpoint.endpoint,
        "access.key": env["AWS_ACCESS_KEY_ID"],
        "secret.key": env["AWS_SECRET_ACCESS_KEY"],
        "region": env.get("AWS_REGION", "us-east-1"),
    }


def start_query(spark, writer: str, source: Path, dest: str, checkpoint: Path, endpoint: Endpoint):
    stream = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).parquet(str(source))
    if writer == SPARK:
        sink = stream.writeStream.format("parquet").partitionBy("day")
    else:
        sink = (
            stream.writeStream.format("s3commit")
            .option("committer", COMMITTER)
            .option("partition_by", "day")
            .option("format", "delta" if writer == DELTA else "parquet")
        )
        for key, value in sink_options(endpoint).items():
            sink = sink.option(key, value)
    return (
        sink.outputMode("append")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start(dest)
    )


def percentile(values: list[float], q: int) -> float:
    """The ``q``-th percentile (nearest rank) of ``values``."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def per_batch(values: list[float]) -> dict[str, float]:
    """Median, p90, min, max and count of one per-batch figure."""
    return {**summarize(values), "p90": percentile(values, 90)}


def run_query(
    spark, writer: str, source: Path, dest: str, work: Path, endpoint: Endpoint
) -> dict[str, Any]:
    """One query from an empty checkpoint to the end of the source: its timings, checked."""
    checkpoint = Path(tempfile.mkdtemp(prefix="checkpoint-", dir=work))
    started = time.monotonic()
    query = start_query(spark, writer, source, dest, checkpoint, endpoint)
    query.awaitTermination()
    wall = time.monotonic() - started
    progress = [p for p in query.recentProgress if p["numInputRows"] > 0]
    return {
        "query_id": query.id,
        "wall_s": wall,
        "rows": sum(p["numInputRows"] for p in progress),
        "batches": len(progress),
        "add_batch_ms": [float(p["durationMs"].get("addBatch", 0)) for p in progress],
        "batch_ms": [float(p["durationMs"].get("triggerExecution", 0)) for p in progress],
    }


def destination(writer: str, endpoint: Endpoint, work: Path, name: str) -> str:
    if writer == SPARK:
        return str(work / "spark-sink" / name)
    return f"{endpoint.url}/streaming/{name}"


def check_query(
    writer: str, done: dict[str, Any], dest: str, endpoint: Endpoint, batches: int, rows: int
) -> list[float]:
    """The query's output is the stream's rows, in ``batches`` batches of 8 files each; the
    commit seconds of each batch (from their records), none for Spark's sink."""
    expected_rows, expected_files = batches * rows, batches * len(DAYS)
    if (done["batches"], done["rows"]) != (batches, expected_rows):
        raise WrongResult(
            f"{writer}: {done['batches']} batches of {done['rows']} rows in all, expected "
            f"{batches} of {rows} each"
        )
    if writer == SPARK:
        import pyarrow.parquet as pq

        files = [f for f in Path(dest).rglob("*.parquet") if "_spark_metadata" not in f.parts]
        found = sum(pq.read_metadata(f).num_rows for f in files)
        if (len(files), found) != (expected_files, expected_rows):
            raise WrongResult(f"{writer}: {len(files)} files of {found} rows at {dest}")
        return []
    from s3commit_sdk.streaming import stream_batches

    records = stream_batches(dest, done["query_id"], sink_options(endpoint))
    if [r.batch_id for r in records] != list(range(batches)):
        raise WrongResult(f"{writer}: batch records {[r.batch_id for r in records]}")
    if any((r.rows, r.files) != (rows, len(DAYS)) for r in records):
        raise WrongResult(
            f"{writer}: rows per batch {sorted({r.rows for r in records})}, files per batch "
            f"{sorted({r.files for r in records})}, expected {rows} and {len(DAYS)}"
        )
    prefix = dest.removeprefix(f"s3://{BUCKET}/") + "/"
    pages = (
        endpoint.client().get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
    )
    data = [
        o["Key"]
        for page in pages
        for o in page.get("Contents", [])
        if o["Key"].endswith(".parquet") and "/_delta_log/" not in o["Key"]
    ]
    data = [k for k in data if "/__s3commit/" not in k]
    if len(data) != expected_files:
        raise WrongResult(f"{writer}: {len(data)} data files listed, expected {expected_files}")
    pending = endpoint.pending_uploads()
    if pending:
        raise WrongResult(f"{writer} left {pending} multipart uploads pending")
    return [r.commit_s for r in records]


# -- the scenario ------------------------------------------------------------------------------
def run_streaming(
    run: Run, endpoint: Endpoint, spark, batches: int, rows: int, repeats: int
) -> None:
    """One record per writer: rows/s of ``repeats`` queries of ``batches`` batches of ``rows``
    rows, and per batch the commit (ours) and Spark's addBatch, pooled over the queries."""
    import s3commit_sdk

    s3commit_sdk.register(spark)
    with tempfile.TemporaryDirectory(prefix="s3commit-bench-streaming-") as folder:
        work = Path(folder)
        source, warmup = work / "source", work / "warmup-source"
        write_source(source, batches, rows)
        write_source(warmup, 1, min(rows, 1000))
        for writer in WRITERS:  # untimed: a first query pays for starting what it needs
            dest = destination(writer, endpoint, work, f"warmup-{WRITERS.index(writer)}")
            run_query(spark, writer, warmup, dest, work, endpoint)
        endpoint.reset()
        shutil.rmtree(work / "spark-sink", ignore_errors=True)
        queries: dict[str, list[dict[str, Any]]] = {w: [] for w in WRITERS}
        commits: dict[str, list[float]] = {w: [] for w in WRITERS}
        for repeat in range(repeats):  # the writers take turns: the machine's load is shared
            for writer in WRITERS:
                dest = destination(writer, endpoint, work, f"{WRITERS.index(writer)}-{repeat}")
                done = run_query(spark, writer, source, dest, work, endpoint)
                commits[writer] += check_query(writer, done, dest, endpoint, batches, rows)
                queries[writer].append(done)
        for writer in WRITERS:
            done = queries[writer]
            metrics = {
                "seconds": summarize([q["wall_s"] for q in done]),
                "rows_per_s": summarize([q["rows"] / q["wall_s"] for q in done]),
                "add_batch_ms": per_batch([ms for q in done for ms in q["add_batch_ms"]]),
                "batch_ms": per_batch([ms for q in done for ms in q["batch_ms"]]),
            }
            if commits[writer]:
                metrics["commit_ms"] = per_batch([s * 1000 for s in commits[writer]])
            notes = {
                "committer": COMMITTER if writer != SPARK else "Spark's file sink",
                "destination": (
                    "a local temporary directory (this Spark has no s3a://: no hadoop-aws jars)"
                    if writer == SPARK
                    else f"{endpoint.kind}: {endpoint.url}/streaming/"
                ),
                "commit_measured_by": COMMIT_SOURCE[writer],
                "files_per_batch": len(DAYS),
                "rows_per_query": batches * rows,
                "queries": repeats,
            }
            run.add(
                Record(
                    SCENARIO,
                    {
                        "endpoint": endpoint.kind,
                        "writer": writer,
                        "batches": batches,
                        "rows_per_batch": rows,
                    },
                    metrics,
                    notes,
                )
            )
    endpoint.reset()


# -- report cells ------------------------------------------------------------------------------
def ms_cell(metric: str) -> Callable[[Record], str]:
    """Median / p90 / max of a per-batch figure in ms."""

    def cell(record: Record) -> str:
        found = record.metrics.get(metric)
        if not found:
            return "-"
        return f"{found['median']:.0f} / {found['p90']:.0f} / {found['max']:.0f}"

    return cell


def commit_summary(record: Record) -> str:
    """A writer's commit per batch (ours) or Spark's addBatch (its nearest), median and p90."""
    if "commit_ms" in record.metrics:
        found, what = record.metrics["commit_ms"], "commit"
    elif "add_batch_ms" in record.metrics:
        found, what = record.metrics["add_batch_ms"], "addBatch"
    else:
        return ""
    return (
        f"{record.labels['writer']}: {what} {found['median']:.0f} ms (p90 {found['p90']:.0f}), "
        f"{record.median('rows_per_s'):,.0f} rows/s"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--endpoint", choices=KINDS, default=KINDS[0])
    parser.add_argument("--batches", type=int, default=5)
    parser.add_argument("--rows", type=int, default=4000, help="rows per batch")
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args(argv)
    from s3commit_sdk.testing.sandbox import DUMMY_ENV, local_spark

    os.environ.update(DUMMY_ENV)
    run = Run(mode="streaming", endpoints=[args.endpoint])
    spark = local_spark(app_name="s3commit-bench")
    try:
        with Endpoint(args.endpoint) as endpoint:
            endpoint.activate()
            endpoint.reset()
            run_streaming(run, endpoint, spark, args.batches, args.rows, args.repeats)
    finally:
        spark.stop()
    for record in run.of(SCENARIO):
        print(commit_summary(record))
    return 0


if __name__ == "__main__":
    sys.exit(main())
