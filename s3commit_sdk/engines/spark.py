"""Spark engine: each Spark task writes its partition inside ``mapInArrow``.

DESIGN section 4: the task's pendingset comes back as the task's result row, and Spark keeps
the result of exactly one successful attempt per partition, so job commit never lists the store.
"""

from __future__ import annotations

import threading
import time

import pyarrow as pa

from ..formats import commit_totals
from ..progress import ProgressTracker
from ..protocol import JobContext, execute_task

RESULT_SCHEMA = "message string"


def is_spark_dataframe(data: object) -> bool:
    module = type(data).__module__
    return module.startswith("pyspark.sql") and type(data).__name__ == "DataFrame"


def spark_schema_to_arrow(df) -> pa.Schema:
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(df.schema)


def spark_conf(df) -> dict[str, str]:
    """The session's conf, static (``spark.hadoop.*``) and runtime."""
    session = df.sparkSession
    found: dict[str, str] = {}
    context = getattr(session, "sparkContext", None)
    if context is not None:
        found.update(context.getConf().getAll())
    found.update(session.conf.getAll)
    return found


def run_spark_tasks(df, job: JobContext, tracker: ProgressTracker) -> list[str]:
    from pyspark import TaskContext

    schema = spark_schema_to_arrow(df)
    partitions = df.rdd.getNumPartitions()
    if partitions == 0:
        df, partitions = df.repartition(1), 1  # one task still runs: an empty job's schema file
    context = df.sparkSession.sparkContext
    files, size = context.accumulator(0), context.accumulator(0)

    def task(batches):
        ctx = TaskContext.get()
        message = execute_task(job, ctx.partitionId(), ctx.attemptNumber(), batches, schema)
        counted = commit_totals(message)
        files.add(counted[0])
        size.add(counted[1])
        yield pa.RecordBatch.from_pydict({"message": [message]})

    tracker.update(tasks_total=partitions)
    context.setJobGroup(job.job_id, f"s3commit write to {job.location.url()}")
    poller = _StatusPoller(context, job.job_id, tracker, files, size)
    poller.start()
    try:
        return [row.message for row in df.mapInArrow(task, RESULT_SCHEMA).collect()]
    except BaseException:
        _settle(context, job.job_id)
        raise
    finally:
        poller.stop()
        context.setLocalProperty("spark.jobGroup.id", None)
        context.setLocalProperty("spark.job.description", None)


def _settle(context, group: str, timeout: float = 60.0) -> None:
    """Cancel the job and wait until none of its task attempts still runs.

    A failed Spark job returns while sibling attempts are still being killed; if the driver's
    job abort ran now, an attempt could write upload metadata after the abort listed it.
    """
    context.cancelJobGroup(group)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not any(stage.numActiveTasks for stage in _stages(context, group)):
            return
        time.sleep(0.2)


def _stages(context, group: str):
    """Spark's current info on every stage of the job group's jobs (driver state only)."""
    status = context.statusTracker()
    for job_id in status.getJobIdsForGroup(group):
        info = status.getJobInfo(job_id)
        for stage_id in info.stageIds if info else ():
            stage = status.getStageInfo(stage_id)
            if stage is not None:
                yield stage


class _StatusPoller(threading.Thread):
    """Tasks done from Spark's status tracker, files and bytes from accumulators, twice a second.

    Reads driver state only; it never lists the destination and does not slow the tasks.
    """

    def __init__(self, context, group: str, tracker: ProgressTracker, files, size) -> None:
        super().__init__(name="s3commit-progress", daemon=True)
        self.context, self.group, self.tracker = context, group, tracker
        self.files, self.size = files, size
        self._halt = threading.Event()

    def poll(self) -> None:
        done = sum(stage.numCompletedTasks for stage in _stages(self.context, self.group))
        self.tracker.update(tasks_done=done, files=self.files.value, bytes=self.size.value)

    def run(self) -> None:
        while not self._halt.wait(0.5):
            self.poll()

    def stop(self) -> None:
        self._halt.set()
        self.join()
        self.poll()
