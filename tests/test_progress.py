"""Progress events come from the driver: phases, tasks done, files and bytes."""

from __future__ import annotations

import pandas as pd
import pytest

from s3commit_sdk import TaskFailedError, write_committed


def phases(events) -> list[str]:
    seen = []
    for event in events:
        if not seen or seen[-1] != event.phase:
            seen.append(event.phase)
    return seen


def test_local_engine_reports_every_task(dest):
    events = []
    data = pd.DataFrame({"id": range(100), "day": ["a", "b"] * 50})
    result = write_committed(
        data, dest.url, partition_by=["day"], options={"tasks": 4}, progress=events.append
    )
    assert phases(events) == ["setup", "writing", "job commit", "done"]
    last = events[-1]
    assert (last.tasks_done, last.tasks_total) == (4, 4)
    assert (last.files, last.bytes) == (len(result.files), result.bytes)
    assert [e.tasks_done for e in events] == sorted(e.tasks_done for e in events)


def test_spark_engine_reports_tasks_files_and_bytes(spark, dest):
    events = []
    df = spark.range(0, 400, numPartitions=4)
    result = write_committed(df, dest.url, committer="magic", progress=events.append)
    last = events[-1]
    assert last.phase == "done" and (last.tasks_done, last.tasks_total) == (4, 4)
    writing = [e for e in events if e.phase in ("writing", "job commit")]
    assert writing[-1].files == len(result.files) == 4 and writing[-1].bytes == result.bytes
    # the job group is cleared again: later jobs of the session are not counted as ours
    assert spark.sparkContext.getLocalProperty("spark.jobGroup.id") is None


def test_failure_is_reported(spark, dest):
    from pyspark.sql import functions as F

    events = []
    df = spark.range(0, 10, numPartitions=1).withColumn(
        "x", F.expr("cast(raise_error('boom') as int)")
    )
    with pytest.raises(TaskFailedError):
        write_committed(df, dest.url, progress=events.append)
    assert events[-1].phase == "failed" and "boom" in events[-1].message


def test_a_listener_that_raises_never_fails_the_job(dest):
    def broken(event):
        raise RuntimeError("listener bug")

    result = write_committed(pd.DataFrame({"id": [1, 2]}), dest.url, progress=broken)
    assert result.rows == 2


def test_bad_progress_argument(dest):
    with pytest.raises(ValueError, match="progress"):
        write_committed(pd.DataFrame({"id": [1]}), dest.url, progress="fancy")
