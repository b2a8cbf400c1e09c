"""The magic committer: task output streams straight into multipart uploads left uncompleted.

Seed 000 ("The Magic Committer", "Core concept: A new/modified output stream for delayed PUT
commits"): a file written under ``__magic/.../__base/`` is uploaded to the destination path the
``__base`` rule maps it to, but its upload is not completed; a ``.pending`` file records it.
Task commit aggregates the attempt's uploads into ``<taskId>.pendingset``; job commit completes
them through the same path as the staging committers. No local copy of the data is made.
"""

from __future__ import annotations

import io
import threading
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any

import pyarrow as pa

from .. import layout
from ..formats import PendingSet, PendingUpload
from ..layout import magic_to_final
from ..options import check_part_number
from ..protocol import OutputSink, TaskAttemptContext, WrittenFile
from ..store import S3Store
from .conflict import DirectoryConflict, PartitionConflict, partition_of
from .s3_job import S3Committer, load_commits_quietly

#: parts that may wait for an upload thread; memory per task is bounded by
#: multipart.size x (upload.threads + QUEUE_DEPTH) plus one filling buffer per open file
QUEUE_DEPTH = 2


class DelayedCompletionStream(io.RawIOBase):
    """A writable stream into one multipart upload that it never completes.

    Parts of ``part_size`` bytes go to a shared pool as soon as they fill; ``slots`` bounds how
    many parts of the task may be queued or in flight, so memory does not grow with file size.
    ``close()`` waits for the parts and records their ETags; ``abort()`` aborts the upload.
    Nothing ever waits on a pool that is shut down: a part it will never run is cancelled,
    which frees its slot, and a new part is refused at once.
    """

    def __init__(
        self,
        store: S3Store,
        bucket: str,
        key: str,
        part_size: int,
        pool: ThreadPoolExecutor,
        slots: threading.BoundedSemaphore,
    ) -> None:
        super().__init__()
        self.store, self.bucket, self.key = store, bucket, key
        self.part_size, self._pool, self._slots = part_size, pool, slots
        self.upload_id = store.initiate(bucket, key)
        self.length = 0
        self.etags: list[str] = []
        self._buffer = bytearray()
        self._parts: list[Future[str]] = []
        self.aborted = False

    def writable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.length

    def write(self, data) -> int:
        size = len(memoryview(data).cast("B"))
        if self.aborted:
            return size  # discarded: a writer finishing after the abort changes nothing
        if self.closed:
            raise ValueError(f"write to a closed upload stream for {self.key!r}")
        self._buffer += data
        self.length += size
        while len(self._buffer) >= self.part_size:
            self._send(bytes(self._buffer[: self.part_size]))
            del self._buffer[: self.part_size]
        return size

    def _send(self, body: bytes) -> None:
        for done in self._parts:  # surface a failed part now, not at close
            if done.done() and done.exception() is not None:
                raise done.exception()
        number = len(self._parts) + 1
        check_part_number(self.key, number, self.part_size)
        self._slots.acquire()
        try:
            part = self._pool.submit(self._upload, number, body)
        except RuntimeError as exc:  # the pool is shut down: no worker would ever run the part
            self._slots.release()
            raise RuntimeError(
                f"the upload stream of {self.key!r} was used after its task was aborted"
            ) from exc
        part.add_done_callback(lambda _: self._slots.release())  # run, failed or cancelled
        self._parts.append(part)

    def _upload(self, number: int, body: bytes) -> str:
        return self.store.upload_part(self.bucket, self.key, self.upload_id, number, body)

    def close(self) -> None:
        """Upload what is buffered and wait for every part; the upload stays pending."""
        if self.closed:
            return
        try:
            if not self.aborted:
                if self._buffer or not self._parts:  # S3 needs one part, even an empty one
                    self._send(bytes(self._buffer))
                    self._buffer.clear()
                self.etags = [part.result() for part in self._parts]
        finally:
            super().close()

    def abort(self) -> None:
        """Drop queued parts, wait for those in flight (none may land later), abort the upload.

        The stream counts as closed even when the abort request fails.
        """
        self.aborted = True
        self._buffer.clear()
        try:
            for part in self._parts:
                part.cancel()
            wait(self._parts)
            self.store.abort(self.bucket, self.key, self.upload_id)
        finally:
            super().close()

    def __del__(self) -> None:
        """A stream dropped open uploads nothing and waits for nothing.

        Its finalizer may run on a worker of its own pool, or after that pool's workers left;
        IOBase's would call ``close()`` and wait there forever. The upload stays pending for
        the job's abort, which lists it.
        """
        if not self.closed:
            io.RawIOBase.close(self)


class StreamingSink(OutputSink):
    """One delayed-completion stream per file; the task's parts share one bounded queue."""

    def __init__(self, store: S3Store, bucket: str, part_size: int, upload_threads: int) -> None:
        self.store, self.bucket, self.part_size = store, bucket, part_size
        self.pool = ThreadPoolExecutor(upload_threads, "s3commit-stream")
        self.slots = threading.BoundedSemaphore(upload_threads + QUEUE_DEPTH)
        self.streams: dict[str, DelayedCompletionStream] = {}

    def open_stream(self, relpath: str, key: str) -> pa.NativeFile:
        stream = DelayedCompletionStream(
            self.store, self.bucket, key, self.part_size, self.pool, self.slots
        )
        self.streams[relpath] = stream
        return pa.PythonFile(stream, mode="w")

    def abort(self, relpath: str) -> None:
        self.streams[relpath].abort()


class MagicSink(StreamingSink):
    """Streams each file into its final key and records a ``.pending`` for it."""

    def __init__(self, committer: MagicCommitter, task: TaskAttemptContext) -> None:
        options = committer.job.options
        super().__init__(
            committer.store,
            committer.location.bucket,
            options.multipart_size,
            options.upload_threads,
        )
        self.committer, self.task = committer, task
        self.commits: dict[str, PendingUpload] = {}

    def magic_key(self, relpath: str) -> str:
        job = self.committer.job
        return layout.magic_file_key(job.location, job.job_id, self.task.attempt_id, relpath)

    def open(self, relpath: str) -> pa.NativeFile:
        return self.open_stream(
            relpath, magic_to_final(self.committer.location, self.magic_key(relpath))
        )

    def finish(self, written: WrittenFile) -> None:
        stream = self.streams[written.relpath]
        commit = PendingUpload(
            uri=self.committer.location.url(stream.key),
            bucket=stream.bucket,
            destinationKey=stream.key,
            uploadId=stream.upload_id,
            etags=stream.etags,
            length=stream.length,
            rows=written.rows,
            partition=written.partition,
            jobId=self.committer.job.job_id,
            taskId=self.task.task_id,
        )
        self.committer.store.put(
            stream.bucket, self.magic_key(written.relpath) + ".pending", commit.to_json().encode()
        )
        # no job-alive check here: the one after the task's pendingset follows every .pending
        # of the attempt, and a failed check aborts the attempt, which removes them
        self.commits[written.relpath] = commit


class MagicCommitter(S3Committer):
    name = "magic"

    def __init__(self, job) -> None:
        super().__init__(job)
        self._sink: MagicSink | None = None

    def make_conflict_policy(self) -> DirectoryConflict:
        """Directory semantics, or per-partition semantics when the output is partitioned."""
        policy = PartitionConflict if self.job.partition_by else DirectoryConflict
        return policy(self.job.conflict_mode)

    @property
    def metadata_prefix(self) -> str:
        return layout.magic_job_prefix(self.location, self.job.job_id)

    def attempt_prefix(self, task: TaskAttemptContext) -> str:
        return layout.magic_attempt_prefix(self.location, self.job.job_id, task.attempt_id)

    def pendingset_key(self, pendingset: PendingSet) -> str:
        return layout.magic_pendingset_key(self.location, self.job.job_id, pendingset.taskId)

    def attempt_of(self, key: str) -> str | None:
        if not layout.is_magic_pending(key):
            return None
        return key[len(self.metadata_prefix) :].split("/", 1)[0]

    @property
    def delete_metadata(self) -> bool:
        return self.job.options.magic_cleanup

    def setup_task(self, task: TaskAttemptContext) -> OutputSink:
        self._sink = MagicSink(self, task)
        return self._sink

    def commit_task(self, task: TaskAttemptContext, files: list[WrittenFile]) -> dict[str, Any]:
        sink = self._sink
        assert sink is not None, "setup_task was not called"
        partitions = {partition_of(f.relpath) for f in files}
        self.conflict.check_task(self.visible, self.location.url(), partitions)
        pendingset = PendingSet(
            jobId=self.job.job_id,
            taskId=task.task_id,
            taskAttemptId=task.attempt_id,
            commits=[sink.commits[f.relpath] for f in files],
        )
        self.save_pendingset(pendingset)
        sink.pool.shutdown(wait=True)
        return pendingset.to_dict()

    def abort_task(self, task: TaskAttemptContext) -> None:
        """Abort every upload of this attempt: the ones it opened and any its .pending name.

        One failed request stops nothing else: every stream is aborted and the pool is shut
        down whatever fails; the first error is raised at the end.
        """
        errors: list[Exception] = []
        aborted = set()
        if self._sink is not None:
            try:
                for stream in self._sink.streams.values():
                    if not stream.aborted:
                        _collect(errors, stream.abort)
                    aborted.add(stream.upload_id)
            finally:
                self._sink.pool.shutdown(wait=True, cancel_futures=True)
        bucket = self.location.bucket
        prefix = self.attempt_prefix(task)
        metadata = _collect(errors, lambda: list(self.store.list_objects(bucket, prefix))) or []
        for info in metadata:
            body = _collect(errors, self.store.get, bucket, info.key)
            for commit in load_commits_quietly(body) if body is not None else []:
                if commit.uploadId not in aborted:
                    _collect(
                        errors, self.store.abort, bucket, commit.destinationKey, commit.uploadId
                    )
        if self.delete_metadata and metadata:
            _collect(errors, self.store.delete_keys, bucket, [info.key for info in metadata])
        if errors:
            raise errors[0]


def _collect(errors: list[Exception], action, *args):
    """``action(*args)``, its failure appended to ``errors`` instead of raised; None then."""
    try:
        return action(*args)
    except Exception as exc:
        errors.append(exc)
        return None
