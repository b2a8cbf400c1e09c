"""Spark Connect scenarios, run in a process of their own by tests/test_connect.py.

A Connect session and a classic one do not mix in one process, so the test launches this
script (``python connect_scenarios.py '{"base": ..., "out": ...}'``), which starts one local
Connect server, runs every scenario, and writes what each produced (or raised) as JSON. The S3
endpoint comes from the environment (``AWS_ENDPOINT_URL``), as for any boto3 client. The
checks of the S3 state are the test's own.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import os
import sys
import time
import traceback

from worker_heap_probe import frozen_per_worker

SCHEMA = "id int, city string, day date, amount double"
COMMITTERS = ("directory", "partitioned", "magic")
FILTER = "day = date'2026-11-02' AND city IN ('x/y', 'a=b')"


def sample_rows(n: int = 60, day0: int = 1) -> list[tuple]:
    cities = ["Zürich", "a=b", "x/y", None]
    return [(i, cities[i % 4], dt.date(2026, 11, day0 + i % 3), i * 0.5) for i in range(n)]


def as_text(row: dict) -> tuple:
    """A row as test_connect compares it: sorted columns, values as text."""
    return tuple("<null>" if row[c] is None else str(row[c]) for c in sorted(row))


def main(spec: dict) -> dict:
    from pyspark.sql import functions as F
    from pyspark.sql.types import IntegerType

    import s3commit_sdk
    from s3commit_sdk import read_result, write_committed
    from s3commit_sdk.testing.sandbox import local_spark

    base = spec["base"]
    # the JVM's output (start-up warnings, failed tasks' stack traces) goes to its log file
    spark = local_spark("local[2]", connect=True)
    results: dict[str, dict] = {}

    def scenario(name: str, action) -> None:
        started = time.monotonic()
        try:
            results[name] = {"ok": True, **(action() or {})}
        except Exception as exc:
            results[name] = {
                "ok": False,
                "error_type": type(exc).__name__,
                "error": str(exc)[:4000],
                "traceback": traceback.format_exc()[-4000:],
            }
        results[name]["seconds"] = round(time.monotonic() - started, 2)

    def frame(n: int = 60, day0: int = 1):
        return spark.createDataFrame(sample_rows(n, day0), SCHEMA).repartition(3)

    def fail_in_partition_2(value):
        from pyspark import TaskContext

        if TaskContext.get().partitionId() == 2:
            time.sleep(1.0)  # the other tasks have uploaded by then
            raise RuntimeError("injected failure")
        return value

    def failing_frame():
        return frame().withColumn("id", F.udf(fail_in_partition_2, IntegerType())("id"))

    def save(df, url: str, mode: str = "append", **options: str) -> None:
        writer = df.write.format("s3commit").mode(mode)
        for key, value in options.items():
            writer = writer.option(key, value)
        writer.save(url)

    def with_events(committer: str):
        events = []
        result = write_committed(
            frame(),
            f"{base}/wc-{committer}",
            committer=committer,
            partition_by=["day"],
            progress=events.append,
        )
        return {
            "rows": result.rows,
            "files": len(result.files),
            "bytes": result.bytes,
            "events": [[e.phase, e.tasks_done, e.tasks_total, e.files, e.bytes] for e in events],
        }

    for committer in COMMITTERS:
        scenario(f"wc-{committer}", lambda c=committer: with_events(c))

    def with_every_view():
        """Rows in the events, the text log (a line per change) and the panel's summary."""
        from s3commit_sdk.progress import TextProgress
        from s3commit_sdk.widgets import CommitProgress

        stream, events, panel = io.StringIO(), [], CommitProgress()
        text = TextProgress("connect", stream, interval=0)

        def every_view(event):
            events.append(event)
            text(event)
            panel(event)

        result = write_committed(frame(), f"{base}/wc-views", progress=every_view)
        return {
            "rows": result.rows,
            "files": len(result.files),
            "events": [
                [e.phase, e.tasks_done, e.tasks_total, e.tasks_running, e.rows] for e in events
            ],
            "text": stream.getvalue().splitlines(),
            "panel": panel.message.value,
        }

    scenario("wc-views", with_every_view)

    def data_source(committer: str):
        save(frame(), f"{base}/ds-{committer}", committer=committer, partition_by="day")
        result = read_result(f"{base}/ds-{committer}")
        return {"rows": result.rows, "committer": result.committer, "files": len(result.files)}

    # the first data source write runs unregistered: Spark finds pyspark_s3commit by itself
    scenario("ds-directory", lambda: data_source("directory"))
    scenario("register", lambda: s3commit_sdk.register(spark))
    for committer in COMMITTERS[1:]:
        scenario(f"ds-{committer}", lambda c=committer: data_source(c))

    # the production S3 options of the spec (encryption, checksums), through both APIs
    production = spec["production"]
    scenario(
        "wc-production",
        lambda: {
            "rows": write_committed(
                frame(), f"{base}/wc-production", committer="magic", options=production
            ).rows
        },
    )

    def data_source_production():
        save(frame(), f"{base}/ds-production", committer="directory", **production)
        return {"rows": read_result(f"{base}/ds-production", production).rows}

    scenario("ds-production", data_source_production)

    scenario(
        "wc-fail",
        lambda: write_committed(
            failing_frame(),
            f"{base}/wc-fail",
            committer="magic",
            partition_by=["day"],
            conflict_mode="replace",
        ),
    )
    scenario(
        "ds-fail",
        lambda: save(failing_frame(), f"{base}/ds-fail", "overwrite", partition_by="day"),
    )
    scenario(
        "wc-conflict",
        lambda: write_committed(frame(6), f"{base}/wc-partitioned", partition_by=["day"]),
    )

    def overwrite_one_partition():
        day1 = frame(9).filter("day = date'2026-11-01'")
        save(day1, f"{base}/ds-partitioned", "overwrite", partition_by="day")

    scenario("ds-overwrite", overwrite_one_partition)

    # Iceberg: write_committed commits in this client, the data source in the server's worker;
    # both through the spec's sqlite catalog
    catalog = {"iceberg.catalog.uri": spec["iceberg_catalog"]}
    scenario(
        "wc-iceberg",
        lambda: {
            "snapshot": write_committed(
                frame(),
                f"{base}/wc-iceberg",
                format="iceberg",
                partition_by=["day"],
                options={**catalog, "iceberg.table": "connect.wc"},
            ).success["icebergSnapshotId"]
        },
    )

    def data_source_iceberg():
        url, options = f"{base}/ds-iceberg", {**catalog, "iceberg.table": "connect.ds"}
        save(frame(), url, "append", partition_by="day", format="iceberg", **options)
        first = read_result(url).success["icebergSnapshotId"]
        day1 = frame(9).filter("day = date'2026-11-01'")
        save(day1, url, "overwrite", partition_by="day", format="iceberg", **options)

        def count(**more: str) -> int:
            reader = spark.read.format("s3commit").option("format", "iceberg")
            for key, value in {**options, **more}.items():
                reader = reader.option(key, value)
            return reader.load(url).count()

        return {"first": first, "now": count(), "then": count(snapshotId=str(first))}

    scenario("ds-iceberg", data_source_iceberg)

    def read(pushdown: str):
        spark.conf.set("spark.sql.python.filterPushdown.enabled", pushdown)
        table = spark.read.format("s3commit").load(f"{base}/wc-partitioned")
        return {
            "schema": table.schema.simpleString(),
            "rows": [as_text(r.asDict()) for r in table.collect()],
            "filtered": [as_text(r.asDict()) for r in table.filter(FILTER).collect()],
        }

    scenario("read", lambda: read("false"))
    scenario("read-pushdown", lambda: read("true"))

    # asked after the writes above: the server's workers that ran them
    scenario("worker-heap", lambda: {"frozen": frozen_per_worker(spark)})
    spark.stop()
    return results


def run_as_child(scenarios) -> None:
    """Run ``scenarios(spec)`` with the spec given on the command line; write its JSON."""
    spec = json.loads(sys.argv[1])
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    with open(spec["out"], "w") as out:
        json.dump(scenarios(spec), out)


if __name__ == "__main__":
    run_as_child(main)
