"""Spark Connect engine: the classic engine's tasks without an RDD, accumulators or job groups.

A Connect session (``SparkSession.builder.remote(...)``, Databricks serverless and standard
access mode) has no ``sparkContext``: the partitions are not known in advance, progress comes
from ``registerProgressHandler`` and the task results themselves, and the job is tagged
(``addTag``) so that a failure or an interrupt cancels every attempt still running
(``interruptTag``). Task results still carry the commit messages (DESIGN section 4).
"""

from __future__ import annotations

import time

import pyarrow as pa

from ..errors import UnsupportedSessionError
from ..options import parse_duration
from ..progress import ProgressTracker
from ..protocol import JobContext, TaskCommit
from ..runner import execute_task
from .spark import RESULT_SCHEMA, execute_spark_task, spark_schema_to_arrow
from .worker_python import explained_worker_failures

#: Session methods without which a Connect write cannot keep its guarantees.
_REQUIRED = ("addTag", "removeTag", "interruptTag")
#: A Python worker of a killed task is checked every 2 s and destroyed after this conf's wait.
_KILL_TIMEOUT_CONF = "spark.python.task.killTimeout"
_KILL_POLL_S = 2.0


def is_connect_dataframe(data: object) -> bool:
    return type(data).__module__.startswith("pyspark.sql.connect")


def require_connect_support(df) -> None:
    """Refuse, before anything is uploaded, a Connect session the SDK cannot drive."""
    session = df.sparkSession
    missing = [name for name in _REQUIRED if not callable(getattr(session, name, None))]
    if not callable(getattr(df, "mapInArrow", None)):
        missing.insert(0, "DataFrame.mapInArrow")
    if missing:
        raise UnsupportedSessionError(
            f"this Spark Connect session lacks {', '.join(missing)}, which write_committed "
            "needs to run and cancel its tasks: use a PySpark 4 client (or a classic "
            "session), or write with df.write.format('s3commit') after "
            "s3commit_sdk.register(spark)"
        )


def connect_conf(df) -> dict[str, str]:
    """The session's conf as the server sees it (static ``spark.hadoop.*`` keys included)."""
    return dict(df.sparkSession.conf.getAll)


def run_connect_tasks(df, job: JobContext, tracker: ProgressTracker) -> list[TaskCommit]:
    """Run one task per partition of ``df``; return one commit message per task."""
    schema = spark_schema_to_arrow(df)
    session = df.sparkSession
    tag = f"s3commit-{job.job_id}"

    def task(batches):
        commit = execute_spark_task(job, batches, schema)
        yield pa.RecordBatch.from_pydict({"message": [commit.encode()]})

    stages = _StageProgress(tracker)
    handlers = callable(getattr(session, "registerProgressHandler", None))
    if handlers:
        session.registerProgressHandler(stages)
    session.addTag(tag)
    messages: list[TaskCommit] = []
    try:
        # results stream in partition order: files and bytes grow as tasks finish
        with explained_worker_failures(session):
            for row in df.mapInArrow(task, RESULT_SCHEMA).toLocalIterator():
                messages.append(TaskCommit.decode(row.message))
                stages.result(messages[-1])
    except BaseException:
        _settle(session, tag)
        raise
    finally:
        session.removeTag(tag)
        if handlers:
            session.removeProgressHandler(stages)
    if not messages:
        # no partition at all (e.g. an empty local relation): the one task Spark runs for an
        # empty job, here, so the empty job still gets its schema file
        messages.append(execute_task(job, 0, 0, iter(()), schema))
        stages.result(messages[0])
    tracker.update(tasks_total=len(messages), tasks_done=len(messages), tasks_running=0)
    return messages


def _settle(session, tag: str) -> None:
    """Cancel the tagged job and wait until Spark has destroyed its killed attempts' workers.

    A Connect client cannot see running tasks; Spark destroys the Python worker of a killed
    task at most ``2 s + spark.python.task.killTimeout`` after the kill, so waiting that long
    keeps job abort from listing uploads while an attempt could still start one.
    """
    try:
        session.interruptTag(tag)
        timeout = parse_duration(_KILL_TIMEOUT_CONF, session.conf.get(_KILL_TIMEOUT_CONF, "2s"))
    except Exception:  # the session itself may be gone; wait the default
        timeout = 2.0
    time.sleep(attempts_settle_seconds(timeout))


def attempts_settle_seconds(kill_timeout_s: float = 2.0) -> float:
    """How long after a kill a task attempt's Python worker may still run (plus a margin)."""
    return _KILL_POLL_S + kill_timeout_s + 1.0


class _StageProgress:
    """Tasks from Connect's progress reports; files, bytes and rows from the task results.

    The job's own stage is the newest one reported (mapInArrow's result stage comes last).
    """

    def __init__(self, tracker: ProgressTracker) -> None:
        self.tracker = tracker
        self.results = self.files = self.bytes = self.rows = 0
        self.done = 0

    def __call__(self, stages=(), inflight_tasks: int = 0, operation_id=None, done=False, **_):
        if not stages:
            return
        newest = max(stages, key=lambda stage: stage.stage_id)
        self.done = max(self.done, newest.num_completed_tasks)
        self.tracker.update(
            tasks_total=newest.num_tasks,
            tasks_done=max(self.done, self.results),
            tasks_running=inflight_tasks,
        )

    def result(self, message: TaskCommit) -> None:
        self.results += 1
        self.files += message.summary.files
        self.bytes += message.summary.bytes
        self.rows += message.summary.rows
        done = max(self.done, self.results)
        self.tracker.update(tasks_done=done, files=self.files, bytes=self.bytes, rows=self.rows)
