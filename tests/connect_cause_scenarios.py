"""A Spark Connect task failure's cause, run in a process of its own by test_untyped_errors_c.

A Connect session cannot share a process with the test session's classic one: this script
(``python connect_cause_scenarios.py '{"base": ..., "out": ...}'``) starts a local Connect
server, writes a frame whose UDF raises ``ValueError("bad row 7")`` with ``write_committed``,
and writes the error it raised (type, message, ``visible``) as JSON.
"""

from __future__ import annotations


def check_row(x):
    if x == 7:
        raise ValueError(f"bad row {x}")
    return x


def main(spec: dict) -> dict:
    from pyspark.sql import functions as F

    from s3commit_sdk import S3CommitError, write_committed
    from s3commit_sdk.testing.sandbox import local_spark

    spark = local_spark("local[2]", connect=True)
    df = spark.range(0, 20, numPartitions=2).withColumn("id", F.udf(check_row, "long")("id"))
    try:
        write_committed(df, spec["base"] + "/out", progress=False)
        outcome = {"type": None}
    except S3CommitError as exc:
        outcome = {"type": type(exc).__name__, "message": str(exc), "visible": exc.visible}
    spark.stop()
    return outcome


if __name__ == "__main__":
    from connect_scenarios import run_as_child  # beside this script

    run_as_child(main)
