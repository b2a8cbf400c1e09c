"""Typed errors across Spark Connect, run in a process of its own by tests/test_error_envelope.py.

A Connect session cannot share a process with the test session's classic one, and each Connect
server costs a JVM start: this script (``python connect_envelope_scenarios.py '{"base": ...,
"out": ..., "buffer": ...}'``) starts one local Connect server and fails every write of the
Connect error tests on it: a task, the data source's task and the data source's commit raising
typed errors, a UDF raising ``ValueError("bad row 7")``, and a ``buffer.dir`` that is a file,
through ``write_committed`` and the data source. It writes, as JSON, what each raised and what
``errors.from_spark`` restored from it. The S3 endpoint comes from the environment, as for any
boto3 client.
"""

from __future__ import annotations

import json

FIELDS = ("destination", "job_id", "visible", "remedy", "option")


def main(spec: dict) -> dict:
    import pyarrow as pa
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType

    import s3commit_sdk
    from s3commit_sdk import CommitError, S3CommitError, write_committed
    from s3commit_sdk.errors import crossing_spark, from_spark
    from s3commit_sdk.testing.sandbox import local_spark

    base = spec["base"]
    bucket, prefix = base.removeprefix("s3://").split("/", 1)
    spark = local_spark("local[2]", connect=True)
    s3commit_sdk.register(spark)
    outcomes: dict[str, dict] = {}

    def outcome(name: str, action) -> None:
        try:
            action()
            outcomes[name] = {"raised": None}
        except Exception as exc:
            typed = exc if isinstance(exc, S3CommitError) else from_spark(exc)
            outcomes[name] = {
                "raised": type(exc).__name__,
                "type": type(typed).__name__ if typed else None,
                "message": str(typed) if typed else str(exc)[:2000],
                **{f: getattr(typed, f, None) for f in FIELDS},
            }

    def days(n: int = 20):
        return spark.range(0, n, numPartitions=2).selectExpr(
            "id", "concat('d', cast(id % 2 + 1 as string)) as day"
        )

    def save(df, url: str, **options: str) -> None:
        writer = df.write.format("s3commit").mode("append")
        for key, value in options.items():
            writer = writer.option(key, value)
        writer.save(url)

    def task(batches):
        for _ in batches:
            with crossing_spark():
                raise CommitError(
                    "job j-1 could not commit",
                    destination="s3://b/out",
                    job_id="j-1",
                    visible="some",
                    remedy="s3commit abort s3://b/out",
                )
        yield pa.RecordBatch.from_pydict({"id": [0]})

    outcome("task", lambda: spark.range(1, numPartitions=1).mapInArrow(task, "id long").collect())
    outcome(
        "wc-conflict",
        lambda: write_committed(
            days(),
            f"{base}/wc-conflict",
            committer="partitioned",
            partition_by=["day"],
            conflict_mode="fail",
            progress=False,
        ),
    )
    outcome(
        "ds-conflict",
        lambda: save(days(), f"{base}/ds-conflict", partition_by="day", conflict_mode="fail"),
    )

    marker = f"{prefix}/ds-commit/__s3commit/COMMIT_IN_PROGRESS"
    other = {"jobId": "other-job", "journal": "x", "hostname": "h", "started": 0}

    def grab_marker(value):  # runs inside the tasks, after the writer's job setup
        import boto3

        boto3.client("s3").put_object(Bucket=bucket, Key=marker, Body=json.dumps(other).encode())
        return value

    grabbing = days().withColumn("id", F.udf(grab_marker, LongType())("id"))
    outcome("ds-commit", lambda: save(grabbing, f"{base}/ds-commit", committer="directory"))

    def check_row(x):
        if x == 7:
            raise ValueError(f"bad row {x}")
        return x

    failing = spark.range(0, 20, numPartitions=2).withColumn("id", F.udf(check_row, "long")("id"))
    outcome("cause", lambda: write_committed(failing, f"{base}/cause", progress=False))

    buffer = {"buffer.dir": spec["buffer"]}  # a file: no file can be staged in it
    outcome(
        "buffer-wc",
        lambda: write_committed(
            days(6), f"{base}/buffer-wc", partition_by=["day"], options=buffer, progress=False
        ),
    )
    outcome("buffer-ds", lambda: save(days(6), f"{base}/buffer-ds", partition_by="day", **buffer))
    spark.stop()
    return outcomes


if __name__ == "__main__":
    from connect_scenarios import run_as_child  # beside this script

    run_as_child(main)
