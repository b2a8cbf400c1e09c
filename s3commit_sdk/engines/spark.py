"""Spark engine: each Spark task writes its partition inside ``mapInArrow``.

DESIGN section 4: the task's pendingset comes back as the task's result row, and Spark keeps
the result of exactly one successful attempt per partition, so job commit never lists the store.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Iterable, Iterator

import pyarrow as pa

from ..attempt_handle import AttemptHandle
from ..errors import InvalidArgumentError, crossing_spark
from ..progress import ProgressTracker
from ..protocol import JobContext, TaskCommit
from ..runner import execute_task
from ..sparktypes import canonical_schema
from .py4j_quiet import py4j_kept_quiet
from .task_reports import ReportInbox, ReportSender, TaskReportAddress
from .worker_heap import freeze_long_lived_heap
from .worker_python import explained_worker_failures

RESULT_SCHEMA = "message string"
_WRITABLE_SPARK_TYPE_NAMES = (
    "BooleanType",
    "ByteType",
    "ShortType",
    "IntegerType",
    "LongType",
    "FloatType",
    "DoubleType",
    "DecimalType",
    "StringType",
    "BinaryType",
    "DateType",
    "TimestampType",
    "TimestampNTZType",
    "NullType",
)


def is_spark_dataframe(data: object) -> bool:
    module = type(data).__module__
    return module.startswith("pyspark.sql") and type(data).__name__ == "DataFrame"


def spark_schema_to_arrow(df) -> pa.Schema:
    """The canonical Arrow schema of ``df``'s batches; zoned in the session time zone.

    Spark hands ``mapInArrow`` its timestamps in ``spark.sql.session.timeZone``, which is the
    zone Spark renders partition values, JSON and CSV timestamps in.
    """
    zone = df.sparkSession.conf.get("spark.sql.session.timeZone")
    return struct_to_arrow(df.schema, zone)


def struct_to_arrow(schema, zone: str | None) -> pa.Schema:
    """The canonical Arrow schema of a Spark ``StructType`` whose timestamps are in ``zone``."""
    from pyspark.sql.pandas.types import to_arrow_schema

    _refuse_unwritable(schema, "")
    return canonical_schema(to_arrow_schema(schema, timezone=zone))


def _refuse_unwritable(data_type, where: str) -> None:
    """Spark types whose files we cannot write as Spark writes them, refused by name.

    Spark writes intervals and variants with its own type metadata in the file, which pyarrow
    cannot add; user-defined types read back as their SQL type; TIME Spark refuses itself.
    """
    from pyspark.sql import types as T

    if isinstance(data_type, T.StructType):
        for field in data_type.fields:
            _refuse_unwritable(field.dataType, f"{where}.{field.name}" if where else field.name)
    elif isinstance(data_type, T.ArrayType):
        _refuse_unwritable(data_type.elementType, f"{where}[]")
    elif isinstance(data_type, T.MapType):
        _refuse_unwritable(data_type.keyType, f"{where}.key")
        _refuse_unwritable(data_type.valueType, f"{where}.value")
    elif type(data_type).__name__ not in _WRITABLE_SPARK_TYPE_NAMES:
        raise InvalidArgumentError(
            f"cannot write column {where!r} of Spark type {data_type.simpleString()}: only "
            "numbers, strings, binary, booleans, dates, timestamps, arrays, structs and maps "
            "are written (cast intervals to strings or numbers first)"
        )


def spark_conf(df) -> dict[str, str]:
    """The session's conf, static (``spark.hadoop.*``) and runtime."""
    session = df.sparkSession
    found: dict[str, str] = {}
    context = getattr(session, "sparkContext", None)
    if context is not None:
        found.update(context.getConf().getAll())
    found.update(session.conf.getAll)
    return found


def execute_spark_task(
    job: JobContext,
    batches: Iterable[pa.RecordBatch],
    schema: pa.Schema,
    reports: TaskReportAddress | None = None,
) -> TaskCommit:
    """The attempt of the Spark task this runs in (classic, Connect, the data source's writer).

    Its ids come from Spark's ``TaskContext``, its progress goes to the driver's ``reports``
    inbox when there is one, and a typed error leaves it in its envelope
    (:func:`~s3commit_sdk.errors.crossing_spark`), so the driver gets its class and fields back.
    """
    from pyspark import TaskContext

    ctx = TaskContext.get()
    partition, attempt = ctx.partitionId(), ctx.attemptNumber()
    sender = ReportSender(reports, partition, attempt)
    try:
        with crossing_spark():
            return execute_task(
                job, partition, attempt, batches, schema, handle=AttemptHandle(sender)
            )
    finally:
        sender.close()
        freeze_long_lived_heap()


def run_spark_tasks(df, job: JobContext, tracker: ProgressTracker) -> list[TaskCommit]:
    """One Spark task per partition of ``df``; one commit message per task.

    Progress comes from what Spark ran: the tasks of the job's last stage (the upstream stages
    of a ``limit`` or an aggregation are not ours), what running tasks report they have
    written (``task_reports``) and each finished task's files (an accumulator). Ctrl-C cancels
    the job's tasks and is raised as ``KeyboardInterrupt``, whatever py4j made of it (and
    whatever py4j logs meanwhile is kept out of the cell: :mod:`.py4j_quiet`).
    """
    from pyspark import TaskContext

    schema = spark_schema_to_arrow(df)
    context = df.sparkSession.sparkContext
    finished = context.accumulator({}, _MergedDict())
    conf = context.getConf()
    inbox = None
    if tracker.active:
        inbox = ReportInbox.open(
            conf.get("spark.driver.host"), conf.get("spark.driver.bindAddress")
        )
    address = inbox.address if inbox else None

    def run_task(batches) -> str:
        commit = execute_spark_task(job, batches, schema, address)
        done = commit.summary
        finished.add({TaskContext.get().partitionId(): (done.files, done.bytes, done.rows)})
        return commit.encode()

    def task(batches):
        yield pa.RecordBatch.from_pydict({"message": [run_task(batches)]})

    context.setJobGroup(job.job_id, f"s3commit write to {job.location.url()}")
    poller = _StatusPoller(context, job.job_id, tracker, finished, inbox)
    with py4j_kept_quiet():
        poller.start()
        try:
            with _watching_sigint() as interrupted, explained_worker_failures(df.sparkSession):
                messages = [row.message for row in df.mapInArrow(task, RESULT_SCHEMA).collect()]
                if not messages:  # no partition at all: the one task Spark runs for an empty job
                    empty = context.parallelize([0], 1).map(lambda _: run_task(iter(())))
                    messages = empty.collect()
            return [TaskCommit.decode(m) for m in messages]
        except BaseException as exc:
            _settle(context, job.job_id)
            if not (interrupted or isinstance(exc, KeyboardInterrupt)):
                raise
            interrupt = exc if isinstance(exc, KeyboardInterrupt) else KeyboardInterrupt()
            interrupt.add_note("s3commit: Spark cancelled the job's running tasks.")
            if interrupt is exc:
                raise
            raise interrupt from None  # py4j's error for the interrupted call says nothing more
        finally:
            poller.stop()
            if inbox is not None:
                inbox.close()
            context.setLocalProperty("spark.jobGroup.id", None)
            context.setLocalProperty("spark.job.description", None)


@contextlib.contextmanager
def _watching_sigint() -> Iterator[list[bool]]:
    """Whether SIGINT (Ctrl-C, Kernel > Interrupt) arrived while the job ran.

    An interrupt that lands inside a py4j call surfaces as py4j's own error ("Answer from Java
    side is empty"), so the exception's type cannot tell; the signal can. The handler that was
    installed still runs (it raises KeyboardInterrupt; PySpark's also cancels every job).
    """
    seen: list[bool] = []
    if threading.current_thread() is not threading.main_thread():
        yield seen
        return
    previous = signal.getsignal(signal.SIGINT)

    def noted(signum, frame) -> None:
        seen.append(True)
        if callable(previous):
            previous(signum, frame)
        elif previous != signal.SIG_IGN:
            raise KeyboardInterrupt

    signal.signal(signal.SIGINT, noted)
    try:
        yield seen
    finally:
        signal.signal(signal.SIGINT, previous)


class _MergedDict:
    """Accumulates ``{partition: (files, bytes, rows)}`` of the tasks that committed (Spark's
    AccumulatorParam interface)."""

    def zero(self, value: dict) -> dict:
        return {}

    def addInPlace(self, value1: dict, value2: dict) -> dict:  # PySpark names it
        value1.update(value2)
        return value1


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
    """Twice a second: the job's last stage from Spark's status tracker, finished tasks from the
    accumulator, running tasks' reports from the inbox.

    Reads driver state only; it never lists the destination and does not slow the tasks.
    """

    def __init__(
        self, context, group: str, tracker: ProgressTracker, finished, inbox: ReportInbox | None
    ) -> None:
        super().__init__(name="s3commit-progress", daemon=True)
        self.context, self.group, self.tracker = context, group, tracker
        self.finished, self.inbox = finished, inbox
        self._halt = threading.Event()
        conf = context.getConf()
        #: cores per task, when the default parallelism counts the cores (no conf sets it)
        self._task_cpus = (
            None
            if conf.contains("spark.default.parallelism")
            else int(conf.get("spark.task.cpus", "1"))
        )

    def slots(self) -> int | None:
        """How many tasks can run at once (the default parallelism follows executors as they
        come and go), or None when unknown."""
        if self._task_cpus is None:
            return None
        return max(self.context.defaultParallelism // self._task_cpus, 1)

    def poll(self) -> None:
        if not self.tracker.active:
            return
        last = max(_stages(self.context, self.group), key=lambda s: s.stageId, default=None)
        finished = dict(self.finished.value)
        counts = {}
        if last is not None:
            # Spark's status store hears of a task's end after its accumulator update reached
            # the driver, and sometimes after the next task's start: those tasks are finished
            # here, not running, and no more run than there are slots
            ended_unheard = max(len(finished) - last.numCompletedTasks, 0)
            active = max(last.numActiveTasks - ended_unheard, 0)
            slots = self.slots()
            counts["tasks_total"] = last.numTasks
            counts["tasks_running"] = active if slots is None else min(active, slots)
        tasks = last.numTasks if last is not None else None  # reports of other partitions: dropped
        running = self.inbox.drain(tasks) if self.inbox is not None else {}
        self.tracker.sync(finished, running, **counts)

    def run(self) -> None:
        while not self._halt.wait(0.5):
            self.poll()

    def stop(self) -> None:
        self._halt.set()
        self.join()
        self.poll()
