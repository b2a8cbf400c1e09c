"""A streaming query run as a child process (``crash.run_stream`` / ``crash.crash_stream``),
so a test or a demo can SIGKILL its driver in the middle of a micro-batch's commit.

python -m s3commit_sdk.testing.stream_driver '{"mode": "classic"|"connect", "sink":
  "datasource"|"foreach", "source": DIR, "checkpoint": DIR, "dest": URL, "endpoint": URL,
  "format": ..., "out": FILE}'

The query reads the source directory one file per micro-batch (a replayable source: the same
batch id reads the same file after a restart) and writes every batch through the s3commit sink
or ``foreachBatch(exactly_once(...))``, until the directory is drained (``availableNow``).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

SCHEMA = "id long, amount double, day string"


def poisoned(row_id: int, flag: str):
    """A UDF passing ids through, raising on ``row_id`` while the file ``flag`` exists."""
    from pyspark.sql import functions as F

    def check(value: int) -> int:
        if value == row_id and os.path.exists(flag):
            raise ValueError(f"row {row_id} is poisoned while {flag} exists")
        return value

    return F.udf(check, "long")


def main(spec: dict) -> dict:
    import s3commit_sdk
    from s3commit_sdk.streaming import exactly_once
    from s3commit_sdk.testing.sandbox import local_spark

    spark = local_spark("local[2]", connect=spec["mode"] == "connect")
    s3commit_sdk.register(spark)
    source = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).parquet(spec["source"])
    if spec.get("fail_while"):  # a task fails on one row while the flag file exists
        source = source.withColumn("id", poisoned(spec["fail_on_id"], spec["fail_while"])("id"))
    options = {"endpoint": spec["endpoint"], **spec.get("options", {})}
    if spec["sink"] == "foreach":
        writer = source.writeStream.foreachBatch(
            exactly_once(
                spec["dest"],
                spec.get("stream", "orders"),
                partition_by=["day"],
                format=spec.get("format", "parquet"),
                options=options,
            )
        )
    else:
        writer = source.writeStream.format("s3commit").option("partition_by", "day")
        writer = writer.option("format", spec.get("format", "parquet"))
        for key, value in options.items():
            writer = writer.option(key, value)
    query = (
        writer.option("checkpointLocation", spec["checkpoint"])
        .trigger(availableNow=True)
        .start(None if spec["sink"] == "foreach" else spec["dest"])
    )
    query.awaitTermination()
    found = {"query_id": query.id, "batches": query.lastProgress and query.lastProgress["batchId"]}
    spark.stop()
    return found


if __name__ == "__main__":
    spec = json.loads(sys.argv[1])
    Path(spec["out"]).write_text(json.dumps(main(spec)))
