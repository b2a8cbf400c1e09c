"""``df.writeStream.format("s3commit")``: the data source's stream writer, one job per batch.

PySpark (4.x) calls ``streamWriter()`` in a Python worker on the driver (under Connect, on the
server) when the query starts and again for every commit, ``write()`` once per task of every
micro-batch on the executors, and ``commit(messages, batchId)`` / ``abort(messages, batchId)``
in a worker on the driver; no state survives between those calls but what the writer pickles
and what is on the store. So ``streamWriter()`` checks every option and the destination once;
a task learns its batch from Spark's local properties (``sql.streaming.queryId`` is the id
kept in the checkpoint, the same after a restart; ``streaming.sql.batchId``), opens the batch's
job and writes as that committer's tasks do; ``commit`` is the batch's idempotent job commit
(:mod:`.commit`). The stream id comes from the tasks' messages, or from the checkpoint's
``metadata`` file where the checkpoint is readable here (a batch whose every task was killed
leaves no message, yet its uploads must be found).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamArrowWriter, WriterCommitMessage

from ..api import stream_job_fields
from ..committers import make_committer
from ..engines.connect import attempts_settle_seconds
from ..engines.spark import execute_spark_task
from ..errors import InvalidArgumentError, S3CommitError, crossing_spark
from ..protocol import JobContext, decode_messages
from ..runner import commit_job, driving
from ..store import open_store
from .batch import StreamBatch
from .commit import abort_batch, open_batch

#: Spark's local properties of a streaming task
QUERY_PROPERTY = "sql.streaming.queryId"
BATCH_PROPERTY = "streaming.sql.batchId"
#: the stream options Spark adds (lower-cased), not the committers'
SPARK_STREAM_OPTIONS = ("checkpointlocation", "queryname")


@dataclass
class BatchCommitMessage(WriterCommitMessage):
    """One task attempt's commit message (an encoded TaskCommit) and its stream."""

    message: str
    query_id: str


def stream_options(options: Mapping[str, str], overwrite: bool) -> tuple[dict[str, str], str]:
    """The committers' options and the checkpoint location; complete mode is refused."""
    if overwrite:
        raise InvalidArgumentError(
            "the s3commit sink appends each micro-batch: use outputMode('append') (complete "
            "mode would replace the destination at every batch)"
        )
    given = dict(options)
    checkpoint = given.pop("checkpointlocation", "")
    for name in SPARK_STREAM_OPTIONS:
        given.pop(name, None)
    return given, checkpoint


def checkpoint_query_id(checkpoint: str, job: JobContext) -> str | None:
    """The query id in the checkpoint's ``metadata`` file, where it is readable from here: a
    local path, ``file:`` or ``s3://`` (with the job's credentials); else None."""
    try:
        if checkpoint.startswith(("s3://", "s3a://")):
            bucket, _, key = checkpoint.split("://", 1)[1].partition("/")
            body = open_store(job.settings, threads=1).get(bucket, key.rstrip("/") + "/metadata")
        elif checkpoint and "://" not in checkpoint.replace("file://", "", 1):
            local = checkpoint.removeprefix("file://").removeprefix("file:")
            body = (Path(local) / "metadata").read_bytes()
        else:
            return None
        found = json.loads(body).get("id")
    except (OSError, ValueError, S3CommitError):  # unreadable here: the messages name it
        return None
    return found if isinstance(found, str) else None


class S3CommitStreamWriter(DataSourceStreamArrowWriter):
    """Pickled to every task and to the worker that commits or aborts each batch."""

    def __init__(self, job: JobContext, schema: pa.Schema, checkpoint: str) -> None:
        self.job, self.schema, self.checkpoint = job, schema, checkpoint

    def write(self, iterator: Iterator[pa.RecordBatch]) -> BatchCommitMessage:
        """One task attempt of one micro-batch."""
        from pyspark import TaskContext

        context = TaskContext.get()
        with crossing_spark():
            stream = StreamBatch(
                context.getLocalProperty(QUERY_PROPERTY),
                int(context.getLocalProperty(BATCH_PROPERTY)),
            )
            job = self.batch_job(stream)
            open_batch(job)
        commit = execute_spark_task(job, iterator, self.schema)
        return BatchCommitMessage(commit.encode(), stream.query_id)

    def commit(self, messages: list[BatchCommitMessage | None], batchId: int) -> None:
        job = self.job_of(messages, batchId)
        if job is None:  # no task wrote, and the checkpoint is not readable: nothing to commit
            return
        with crossing_spark():
            commit_job(job, decode_messages(messages), {})

    def abort(self, messages: list[BatchCommitMessage | None], batchId: int) -> None:
        """Once Spark has destroyed the killed attempts: an earlier attempt's unfinished
        commit rolled forward, then this attempt's uploads found by the batch's job id."""
        time.sleep(attempts_settle_seconds())
        job = self.job_of(messages, batchId)
        if job is None:
            return
        with crossing_spark(), driving(job):
            abort_batch(make_committer(job), decode_messages(messages, strict=False))

    def batch_job(self, stream: StreamBatch) -> JobContext:
        return replace(self.job, **stream_job_fields(stream))

    def job_of(self, messages: list[BatchCommitMessage | None], batch_id: int) -> JobContext | None:
        named = {m.query_id for m in messages if m is not None}
        query_id = checkpoint_query_id(self.checkpoint, self.job) or next(iter(named), None)
        if query_id is None:
            return None
        return self.batch_job(StreamBatch(query_id, int(batch_id)))
