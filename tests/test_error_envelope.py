"""Typed errors keep their class and fields across Spark: classic, and Spark Connect (its
scenarios run in a child process: tests/connect_envelope_scenarios.py).

Spark hands the driver a task's (or a data source worker's) Python error as text inside its own
exception. The error leaves our code with its envelope line (``s3commit-error: {json}``), and
``errors.from_spark`` restores the class, ``destination``, ``job_id``, ``visible`` and
``remedy`` from whatever Spark raised.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pyarrow as pa
import pytest
from conftest import (
    BUCKET,
    list_keys,
    marker_writer,
    pending_uploads,
    run_connect_child,
    visible_keys,
)

from s3commit_sdk import (
    CommitError,
    ConcurrentCommitError,
    ConflictError,
    StoreError,
    register,
    write_committed,
)
from s3commit_sdk.errors import ENVELOPE_PREFIX, crossing_spark, envelope, from_spark

EXISTING = "day=d1/existing.parquet"


def days(spark, n: int = 20):
    """Two partitions of rows, days d1 and d2 in each."""
    return spark.range(0, n, numPartitions=2).selectExpr(
        "id", "concat('d', cast(id % 2 + 1 as string)) as day"
    )


def save(df, url: str, s3_server, **options: str) -> None:
    """``df.write.format("s3commit")`` against the test's server (the workers' environment is
    the one Spark started with, so the endpoint goes as options)."""
    env = s3_server.env
    writer = df.write.format("s3commit").mode("append")
    for key, value in {
        "endpoint": s3_server.endpoint,
        "access.key": env["AWS_ACCESS_KEY_ID"],
        "secret.key": env["AWS_SECRET_ACCESS_KEY"],
        **options,
    }.items():
        writer = writer.option(key, value)
    writer.save(url)


# -- the envelope itself ------------------------------------------------------------------------
def test_the_envelope_is_one_line_that_restores_class_and_fields():
    error = StoreError("bucket b: access denied\nsecond line ü", code="AccessDenied")
    error.visible, error.remedy = "some", "s3commit abort s3://b/p"
    line = envelope(error)
    assert line.startswith(ENVELOPE_PREFIX) and "\n" not in line
    assert json.loads(line.removeprefix(ENVELOPE_PREFIX))["type"] == "StoreError"
    restored = from_spark(RuntimeError(f"Traceback ...\nStoreError: ...\n{line}\n\tat x"))
    assert type(restored) is StoreError and str(restored) == str(error)
    fields = ("destination", "job_id", "visible", "remedy", "code")
    assert [getattr(restored, f) for f in fields] == [getattr(error, f) for f in fields]


def test_crossing_spark_adds_one_envelope_and_leaves_the_message():
    error = CommitError("commit failed", visible="nothing")
    for _ in range(2):  # the same error through two boundaries: one envelope, fields as now
        with pytest.raises(CommitError), crossing_spark():
            raise error
        error.job_id = "job-1"
    assert str(error) == "commit failed"
    assert [n for n in error.__notes__ if n.startswith(ENVELOPE_PREFIX)] == [envelope(error)]


def test_from_spark_without_our_error_is_none_and_leaves_interrupts_alone():
    assert from_spark(RuntimeError("Job aborted: ValueError: bad row")) is None
    interrupt = KeyboardInterrupt()
    interrupt.__context__ = RuntimeError(envelope(ConflictError("x")))
    assert from_spark(interrupt) is None


# -- through real Spark ------------------------------------------------------------------------
def test_an_error_raised_in_a_spark_task_comes_back_with_its_fields(spark):
    raised = CommitError(
        "job j-1 could not commit",
        destination="s3://b/out",
        job_id="j-1",
        visible="some",
        remedy="s3commit abort s3://b/out",
    )

    def task(batches):
        for _ in batches:
            with crossing_spark():
                raise raised
        yield pa.RecordBatch.from_pydict({"id": [0]})

    with pytest.raises(Exception) as failed:
        spark.range(1, numPartitions=1).mapInArrow(task, "id long").collect()
    restored = from_spark(failed.value)
    assert type(restored) is CommitError and str(restored) == str(raised)
    fields = ("destination", "job_id", "visible", "remedy")
    assert [getattr(restored, f) for f in fields] == [getattr(raised, f) for f in fields]


def test_a_conflict_in_a_task_keeps_its_fields_through_write_committed(spark, s3, dest):
    s3.put_object(Bucket=BUCKET, Key=dest.dir + EXISTING, Body=b"x")
    with pytest.raises(ConflictError) as failed:
        write_committed(
            days(spark),
            dest.url,
            committer="partitioned",
            partition_by=["day"],
            conflict_mode="fail",
            progress=False,
        )
    error = failed.value
    assert "partition day=d1" in str(error) and ENVELOPE_PREFIX not in str(error)
    assert (error.destination, error.visible, error.remedy) == (dest.url, "nothing", None)
    assert error.job_id and error.job_id in str(error.engine_error)
    assert visible_keys(s3, dest.dir) == [dest.dir + EXISTING]


def test_a_conflict_in_a_data_source_task_comes_back_typed(spark, s3_server, s3, dest):
    register(spark)
    s3.put_object(Bucket=BUCKET, Key=dest.dir + EXISTING, Body=b"x")
    with pytest.raises(Exception) as failed:
        save(days(spark), dest.url, s3_server, partition_by="day", conflict_mode="fail")
    error = from_spark(failed.value)
    assert type(error) is ConflictError and "partition day=d1" in str(error)
    assert (error.destination, error.visible, error.remedy) == (dest.url, "nothing", None)
    assert error.job_id  # the task's job, as the data source's writer() created it
    assert visible_keys(s3, dest.dir) == [dest.dir + EXISTING]
    assert list_keys(s3, dest.dir + "__s3commit/") == []


def test_a_failed_data_source_commit_comes_back_typed(spark, s3_server, s3, dest):
    """Another job's commit marker appears while the tasks run: the data source's commit (in a
    Python worker) refuses, and the user's ``from_spark`` says so with the remedy."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType

    register(spark)
    marker = dest.dir + "__s3commit/COMMIT_IN_PROGRESS"
    other = {"jobId": "other-job", "journal": "x", "hostname": "h", "started": 0}
    grab_marker = marker_writer(s3_server, BUCKET, marker, other)
    df = days(spark).withColumn("id", F.udf(grab_marker, LongType())("id"))
    try:
        with pytest.raises(Exception) as failed:
            save(df, dest.url, s3_server, committer="directory")
        error = from_spark(failed.value)
        assert type(error) is ConcurrentCommitError and "other-job" in str(error)
        assert (error.destination, error.visible) == (dest.url, "nothing")
        assert error.remedy == f"s3commit recover {dest.url}" and error.job_id
        assert visible_keys(s3, dest.dir) == []
    finally:
        s3.delete_object(Bucket=BUCKET, Key=marker)


# -- Spark Connect ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def connect_outcomes(s3_server, s3, tmp_path_factory):
    """What ``from_spark`` restored in each scenario of a child process with its own Connect
    server (one server for every Connect error test: each costs a JVM start)."""
    prefix = f"t/envelope-connect-{s3_server.kind}-{uuid.uuid4().hex[:8]}"
    for name in ("wc-conflict", "ds-conflict"):
        s3.put_object(Bucket=BUCKET, Key=f"{prefix}/{name}/{EXISTING}", Body=b"x")
    work = tmp_path_factory.mktemp("envelope-connect")
    a_file = work / "a-file"
    a_file.write_text("x")
    spec = {
        "base": f"s3://{BUCKET}/{prefix}",
        "out": str(work / "outcomes.json"),
        "buffer": str(a_file),
    }
    script = Path(__file__).with_name("connect_envelope_scenarios.py")
    yield prefix, run_connect_child(script, spec, s3_server, work, timeout=600)
    s3.delete_object(Bucket=BUCKET, Key=f"{prefix}/ds-commit/__s3commit/COMMIT_IN_PROGRESS")
    assert pending_uploads(s3, prefix + "/") == []


@pytest.mark.cluster
@pytest.mark.spark
def test_typed_errors_keep_their_fields_across_spark_connect(connect_outcomes, s3):
    prefix, outcomes = connect_outcomes
    url = f"s3://{BUCKET}/{prefix}"
    task = outcomes["task"]
    assert (task["type"], task["message"]) == ("CommitError", "job j-1 could not commit")
    assert [task[f] for f in ("destination", "job_id", "visible", "remedy")] == [
        "s3://b/out",
        "j-1",
        "some",
        "s3commit abort s3://b/out",
    ]
    for name in ("wc-conflict", "ds-conflict"):
        conflict = outcomes[name]
        assert conflict["type"] == "ConflictError", conflict
        assert "partition day=d1" in conflict["message"] and conflict["job_id"]
        fields = (conflict["destination"], conflict["visible"], conflict["remedy"])
        assert fields == (f"{url}/{name}", "nothing", None), name
        directory = f"{prefix}/{name}/"
        assert visible_keys(s3, directory) == [directory + EXISTING]
    commit = outcomes["ds-commit"]
    assert commit["type"] == "ConcurrentCommitError" and "other-job" in commit["message"]
    assert (commit["destination"], commit["visible"]) == (f"{url}/ds-commit", "nothing")
    assert commit["remedy"] == f"s3commit recover {url}/ds-commit" and commit["job_id"]


@pytest.mark.cluster
@pytest.mark.spark
def test_a_spark_connect_task_failure_names_the_exception_as_its_cause(connect_outcomes, s3):
    """The cause is the exception line of the worker's traceback, not its last source line."""
    prefix, outcomes = connect_outcomes
    outcome = outcomes["cause"]
    assert outcome["type"] == "TaskFailedError", outcome
    assert "Cause: ValueError: bad row 7." in outcome["message"], outcome["message"]
    assert "raise ValueError" not in outcome["message"]
    assert outcome["visible"] == "nothing"
    assert list_keys(s3, f"{prefix}/cause/") == []


@pytest.mark.cluster
@pytest.mark.spark
def test_a_bad_buffer_dir_on_connect(connect_outcomes, s3):
    """The data source's writer runs on the Connect server, Spark's driver: it refuses the
    option there. ``write_committed``'s client is not the tasks' host: the tasks refuse it,
    with the same typed error. Nothing is written either way (a listing says so)."""
    prefix, outcomes = connect_outcomes
    for name in ("buffer-ds", "buffer-wc"):  # the tasks' typed error, restored on the client
        refused = outcomes[name]
        assert (refused["type"], refused["option"]) == ("InvalidOptionError", "buffer.dir")
        assert "not a directory" in refused["message"], refused
        assert list_keys(s3, f"{prefix}/{name}/") == []
