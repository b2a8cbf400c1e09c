"""Progress events come from the driver: phases, tasks done, files and bytes."""

from __future__ import annotations

import io
import itertools
import re
import time

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from s3commit_sdk import InvalidArgumentError, TaskFailedError, write_committed
from s3commit_sdk.listeners import PROGRESS_ENV, make_listener
from s3commit_sdk.progress import ProgressTracker, TextProgress, job_seconds


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


# -- progress inside running tasks ----------------------------------------------------------------
def test_a_tasks_first_report_is_shown_at_once_and_later_ones_at_most_per_interval():
    """A task that starts is seen starting, however fast it writes; then the interval holds."""
    events = []
    tracker = ProgressTracker(events.append, interval=3600)
    tracker.update(phase="writing")
    tracker.task_running(0, 10, 100)
    tracker.task_running(0, 20, 200)  # within the interval: kept, not published
    tracker.task_running(1, 5, 50)
    assert [(e.tasks_running, e.rows, e.bytes) for e in events[1:]] == [(1, 10, 100), (2, 25, 250)]


def test_one_large_local_task_moves_before_it_ends(dest):
    """One task of many batches: rows and bytes grow while it runs, against a known total."""
    events = []
    data = pa.table({"id": np.arange(3_000_000), "v": np.arange(3_000_000) * 0.5})
    write_committed(data, dest.url, options={"tasks": 1}, progress=events.append)
    running = [e for e in events if e.phase == "writing" and e.tasks_running == 1]
    assert running and all(e.tasks_done == 0 and e.rows_total == 3_000_000 for e in running)
    rows = [e.rows for e in running]
    assert rows == sorted(rows) and 0 < rows[0] < 3_000_000  # part of the one task
    assert any(e.bytes > 0 for e in running)
    assert events[-1].rows == 3_000_000 and events[-1].tasks_running == 0


def test_one_large_spark_task_reports_rows_while_it_runs(spark, dest):
    """The task reports what it has written over the driver's report socket (an accumulator
    would reach the driver only when the task ends)."""
    from pyspark.sql import functions as F

    @F.udf("long")
    def slow(x):
        time.sleep(0.0002)
        return x

    events = []
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "500")
    try:
        df = spark.range(0, 20_000, numPartitions=1).withColumn("y", slow("id"))
        result = write_committed(df, dest.url, progress=events.append)
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    during = [e for e in events if e.phase == "writing" and e.tasks_done == 0 and e.rows > 0]
    assert during, [(e.phase, e.tasks_done, e.rows) for e in events]
    assert all(e.rows < 20_000 or e.tasks_running == 1 for e in during)
    assert events[-1].rows == result.rows == 20_000


def test_task_counts_are_those_of_the_stage_that_writes(spark, dest):
    """limit() runs an upstream stage of 8 tasks and one writing task: "1 / 1", not "9 / 1"."""
    events = []
    df = spark.range(0, 10_000, numPartitions=8).limit(1000)
    write_committed(df, dest.url, progress=events.append)
    assert [(e.tasks_done, e.tasks_total) for e in events if e.phase == "done"] == [(1, 1)]
    assert all(e.tasks_done <= (e.tasks_total or 1) for e in events)


def test_an_aggregation_runs_once(spark, dest):
    """The engine asks Spark nothing that runs the input's stages outside the write's job group
    (``df.rdd.getNumPartitions()`` did, with adaptive execution: the input computed twice)."""
    from pyspark.sql import functions as F

    status = spark.sparkContext.statusTracker()
    ungrouped = set(status.getJobIdsForGroup(None))
    df = spark.range(0, 10_000, numPartitions=4).groupBy((F.col("id") % 7).alias("k")).count()
    result = write_committed(df, dest.url, progress=False)
    assert result.rows == 7
    assert set(status.getJobIdsForGroup(None)) == ungrouped


# -- text for runs nobody watches ---------------------------------------------------------------
def test_text_progress_lines_and_a_final_summary(dest, capsys):
    data = pd.DataFrame({"id": range(100), "day": ["a", "b"] * 50})
    write_committed(data, dest.url, partition_by=["day"], options={"tasks": 2}, progress="text")
    lines = capsys.readouterr().err.strip().splitlines()
    title = f"s3commit write to {dest.url}: "
    assert all(line.startswith(title) for line in lines)
    assert [line[len(title) :].split(",")[0] for line in lines[:2]] == ["setup", "writing"]
    assert "job commit, 2/2 tasks done" in lines[-2]
    assert lines[-1].startswith(title + "done in ")
    assert "committed 4 file(s), 100 rows" in lines[-1]


def test_text_progress_of_an_interrupt_says_what_is_left(dest, capsys):
    schema = pa.schema([("id", pa.int64())])

    def batches():
        yield pa.record_batch({"id": [1, 2, 3]}, schema=schema)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_committed(
            pa.RecordBatchReader.from_batches(schema, batches()), dest.url, progress="text"
        )
    err = capsys.readouterr().err
    assert ": INTERRUPTED after " in err
    assert "  Interrupted during tasks write + commit." in err
    assert "was aborted: nothing of it is visible" in err
    assert "Checked after the failure: no upload of this job is pending" in err


def test_auto_progress_without_a_terminal_or_front_end_is_text(monkeypatch):
    monkeypatch.delenv(PROGRESS_ENV, raising=False)
    assert isinstance(make_listener("auto"), TextProgress)  # pytest's stderr is no terminal
    monkeypatch.setenv(PROGRESS_ENV, "off")
    assert make_listener("auto") is None
    monkeypatch.setenv(PROGRESS_ENV, "fancy")
    with pytest.raises(InvalidArgumentError, match=PROGRESS_ENV):
        make_listener("auto")


@pytest.mark.parametrize("committer", ["manifest", "file"])
def test_rename_committers_report_files_and_bytes(tmp_path, committer):
    """Progress counts come from what every committer's task-commit message carries."""
    events = []
    data = pd.DataFrame({"id": range(100), "day": ["a", "b"] * 50})
    root = tmp_path / "out"
    result = write_committed(
        data,
        f"file://{root}",
        committer=committer,
        partition_by=["day"],
        options={"tasks": 3},
        progress=events.append,
    )
    on_disk = list(root.rglob("*.parquet"))
    assert len(on_disk) == len(result.files) > 0
    last = events[-1]
    assert last.phase == "done" and (last.files, last.rows) == (len(on_disk), 100)
    assert last.bytes == sum(p.stat().st_size for p in on_disk) == result.bytes


# -- counts that stay consistent ------------------------------------------------------------------
def test_no_more_tasks_run_than_are_left_to_finish():
    """Spark's status store may still count a finished task active: "2 / 4 tasks, 3 running"."""
    events = []
    tracker = ProgressTracker(events.append)
    tracker.sync({0: (1, 10, 5), 1: (1, 10, 5)}, {}, tasks_total=4, tasks_running=3)
    assert (events[-1].tasks_done, events[-1].tasks_running) == (2, 2)
    tracker.sync({p: (1, 10, 5) for p in range(4)}, {}, tasks_total=4, tasks_running=1)
    assert (events[-1].tasks_done, events[-1].tasks_running) == (4, 0)


def test_spark_running_tasks_fit_the_slots(spark, dest):
    """Six slow tasks on the session's local[2]: never more than 2 running, nor more than are
    left. Each task lasts over a second, so the poller sees tasks end and start."""
    from pyspark.sql import functions as F

    @F.udf("long")
    def slow(x):
        time.sleep(0.003)
        return x

    assert spark.sparkContext.defaultParallelism == 2
    events = []
    df = spark.range(0, 2400, numPartitions=6).withColumn("y", slow("id"))
    write_committed(df, dest.url, progress=events.append)
    writing = [e for e in events if e.phase == "writing" and e.tasks_total]
    assert any(0 < e.tasks_done < 6 for e in writing), "no event between the first and last task"
    assert all(e.tasks_running <= 2 for e in events), [e.tasks_running for e in events]
    assert all(e.tasks_done + e.tasks_running <= (e.tasks_total or 6) for e in events)


def test_pandas_conversion_is_timed_as_its_own_phase(dest):
    frame = pd.DataFrame({"id": range(50_000), "name": [f"n{i}" for i in range(50_000)]})
    result = write_committed(frame, dest.url, progress=False)
    assert result.phases["prepare_input"] > 0
    assert result.success.durations["prepare_input"] == pytest.approx(
        result.phases["prepare_input"], abs=1e-5
    )  # in _SUCCESS too: the SuccessReport's chart of phases shows it
    assert result.duration_s == pytest.approx(job_seconds(result.phases))
    assert result.duration_s > sum(result.phases[p] for p in ("job_setup", "tasks", "job_commit"))


# -- text lines while a phase runs ---------------------------------------------------------------
def text_lines(stream: io.StringIO, title: str) -> list[str]:
    return [line[len(title) + 2 :] for line in stream.getvalue().splitlines()]


def test_text_progress_writes_while_rows_grow_and_never_repeats_itself(dest):
    """interval=0: a line for every change of the counts, none for an event that changes
    nothing (the tracker publishes a running task's reports whatever they say)."""
    stream = io.StringIO()
    data = pa.table({"id": np.arange(1_000_000)})
    title = "big"
    write_committed(
        data, dest.url, options={"tasks": 1}, progress=TextProgress(title, stream, interval=0)
    )
    lines = text_lines(stream, title)
    writing = [line for line in lines if line.startswith("writing")]
    rows = [int(re.search(r"running, ([\d,]+)", line)[1].replace(",", "")) for line in writing]
    assert len(writing) > 2 and 0 < max(rows[:-1]) < 1_000_000, lines
    assert rows == sorted(rows)
    counts = [re.sub(r", [\d.]+ (ms|s)$", "", line) for line in lines]
    assert all(a != b for a, b in itertools.pairwise(counts)), lines
    assert "committed 1 file(s), 1,000,000 rows" in lines[-1]


def test_text_progress_at_most_one_line_per_interval(dest):
    """A long interval: one line per phase, however many events the task's reports made."""
    stream, title = io.StringIO(), "t"
    events = []

    def both(event):
        events.append(event)
        listener(event)

    listener = TextProgress(title, stream, interval=3600)
    data = pa.table({"id": np.arange(1_000_000)})
    write_committed(data, dest.url, options={"tasks": 1}, progress=both)
    assert len([e for e in events if e.phase == "writing"]) > 2
    written = [line.split(",")[0].split(" in ")[0] for line in text_lines(stream, title)]
    assert written == ["setup", "writing", "job commit", "done"], written


def test_text_progress_of_one_spark_task_moves_while_it_runs(spark, dest):
    """The task's reports over the report socket reach the text log before the task ends."""
    from pyspark.sql import functions as F

    @F.udf("long")
    def slow(x):
        time.sleep(0.0002)
        return x

    stream, title = io.StringIO(), "spark"
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "500")
    try:
        df = spark.range(0, 20_000, numPartitions=1).withColumn("y", slow("id"))
        write_committed(df, dest.url, progress=TextProgress(title, stream, interval=0))
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    lines = text_lines(stream, title)
    during = [
        line
        for line in lines
        # the total and the running count come from Spark's status store, which may lag the
        # task's own reports: what matters is rows moving while no task is done
        if re.match(r"writing, 0/(1|\?) tasks done, [01] running", line)
        and not line.split(" running, ")[1].startswith("0 rows")
    ]
    assert during, lines
    assert "committed 1 file(s), 20,000 rows" in lines[-1]
