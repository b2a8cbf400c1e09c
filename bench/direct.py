"""The unsafe lower bound: the same Spark tasks writing straight to the final keys.

No job setup, no pendingsets, no job commit: each file's multipart upload is completed as soon
as its writer closes it, so a failed, retried or speculative task leaves its files visible.
It lives in bench/ only, to show what the commit protocol costs on top of writing the bytes.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from s3commit_sdk.committers.magic import StreamingSink
from s3commit_sdk.engines.spark import spark_schema_to_arrow
from s3commit_sdk.protocol import JobContext, TaskAttemptContext, WrittenFile
from s3commit_sdk.store import open_store


class DirectSink(StreamingSink):
    """Completes every upload the moment its file is closed: visible at once, no way back."""

    def __init__(self, job: JobContext) -> None:
        options = job.options
        store = open_store(job.settings, threads=options.upload_threads)
        super().__init__(store, job.location.bucket, options.multipart_size, options.upload_threads)
        self.location = job.location

    def open(self, relpath: str) -> pa.NativeFile:
        return self.open_stream(relpath, self.location.key(relpath))

    def finish(self, written: WrittenFile) -> None:
        stream = self.streams[written.relpath]
        self.store.complete(self.bucket, stream.key, stream.upload_id, stream.etags)


def direct_write(
    df: Any, url: str, partition_by: Sequence[str] = (), options: dict | None = None
) -> dict[str, float]:
    """Write ``df`` under ``url`` with no commit protocol; wall seconds, files and bytes."""
    from pyspark import TaskContext

    from s3commit_sdk.writers import write_task_output

    job = JobContext.on_s3(url, "direct", options, partition_by=tuple(partition_by))
    schema = spark_schema_to_arrow(df)

    def task(batches):
        context = TaskContext.get()
        attempt = TaskAttemptContext(job, context.partitionId(), context.attemptNumber())
        sink = DirectSink(job)
        try:
            files = write_task_output(job, attempt, batches, sink, schema)
        finally:
            sink.parts.shutdown()
        yield pa.RecordBatch.from_pydict(
            {"files": [len(files)], "bytes": [sum(f.size for f in files)]}
        )

    started = time.monotonic()
    rows = df.mapInArrow(task, "files long, bytes long").collect()
    return {
        "seconds": time.monotonic() - started,
        "files": sum(r.files for r in rows),
        "bytes": sum(r.bytes for r in rows),
    }
