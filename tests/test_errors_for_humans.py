"""What a notebook prints when a Spark write fails, and what a job leaves on local disk.

A task's failure reaches the driver as a Java exception whose text holds every stack trace;
chained to our typed error, a notebook printed all of it (a plain conflict: 186 lines).
"""

from __future__ import annotations

import logging
import re
import traceback

import pytest
from conftest import list_keys, pending_uploads

from s3commit_sdk import ConflictError, StoreError, TaskFailedError, write_committed
from s3commit_sdk.api import check_destination


def failing(spark, message: str = "bad row 17"):
    from pyspark.sql import functions as F

    return spark.range(0, 20, numPartitions=2).withColumn(
        "x", F.expr(f"cast(raise_error('{message}') as int)")
    )


def printed(error: BaseException) -> list[str]:
    """The lines a notebook shows for ``error`` raised by the user's cell."""
    return "".join(traceback.format_exception(error)).splitlines()


def test_a_failed_task_prints_its_cause_and_remedy_not_the_java_stack(spark, s3, dest, tmp_path):
    buffer = tmp_path / "buffer"
    with pytest.raises(TaskFailedError) as failed:
        write_committed(failing(spark), dest.url, options={"buffer.dir": str(buffer)})
    lines = printed(failed.value)
    assert "bad row 17" in str(failed.value)
    error = failed.value  # the fields a notebook or a scheduler reads instead of the text
    assert (error.destination, error.visible, error.remedy) == (dest.url, "nothing", None)
    assert error.job_id and error.job_id in str(error)
    assert not any(line.lstrip().startswith("at org.apache.spark") for line in lines), lines
    assert len(lines) < 40, "\n".join(lines)
    assert type(failed.value.engine_error).__module__.startswith(("py4j", "pyspark"))
    assert list_keys(s3, dest.dir) == [] and pending_uploads(s3, dest.dir) == []
    assert not buffer.exists() or list(buffer.iterdir()) == []  # the job removed its directory


def test_debug_logging_chains_the_spark_error_again(spark, s3, dest, caplog):
    with (
        caplog.at_level(logging.DEBUG, logger="s3commit_sdk"),
        pytest.raises(TaskFailedError) as failed,
    ):
        write_committed(failing(spark), dest.url)
    assert failed.value.__cause__ is failed.value.engine_error is not None
    assert "The above exception was the direct cause of the following exception:" in printed(
        failed.value
    )
    assert pending_uploads(s3, dest.dir) == []


def test_a_conflict_prints_a_few_lines(spark, s3, dest):
    write_committed(spark.range(3), dest.url, committer="directory", progress=False)
    before = list_keys(s3, dest.dir)
    with pytest.raises(ConflictError) as failed:
        write_committed(spark.range(3), dest.url, committer="directory", progress=False)
    lines = printed(failed.value)
    assert len(lines) < 30 and not any("py4j" in line for line in lines), "\n".join(lines)
    assert (failed.value.destination, failed.value.visible) == (dest.url, "nothing")
    assert list_keys(s3, dest.dir) == before and pending_uploads(s3, dest.dir) == []


def test_a_successful_job_leaves_no_local_directory(spark, s3, dest, tmp_path):
    buffer = tmp_path / "buffer"
    for committer in ("directory", "partitioned"):
        frame = spark.range(0, 50, numPartitions=2).selectExpr("id", "cast(id % 2 as int) as p")
        write_committed(
            frame,
            f"{dest.url}/{committer}",
            committer=committer,
            partition_by=["p"] if committer == "partitioned" else None,
            options={"buffer.dir": str(buffer)},
            progress=False,
        )
        assert list(buffer.iterdir()) == [], committer
    assert pending_uploads(s3, dest.dir) == []


def test_a_missing_bucket_is_named_without_a_doubled_word(s3):
    """It read "checking the bucket in bucket 's3commit-no-such-bucket' failed"."""
    with pytest.raises(StoreError) as failed:
        check_destination("s3://s3commit-no-such-bucket/x")
    message = str(failed.value)
    assert "s3commit-no-such-bucket" in message and "does not exist" in message
    assert not re.search(r"\b(\w+) \1\b", message), message
    assert "bucket in bucket" not in message, message
