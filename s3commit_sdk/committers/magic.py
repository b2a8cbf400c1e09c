"""The magic committer: task output streams straight into multipart uploads left uncompleted.

"S3A Committers: Architecture and Implementation" ("The Magic Committer", "Core concept: A
new/modified output stream for delayed PUT commits"): a file written under ``__magic/.../__base/``
is uploaded to the destination path the ``__base`` rule maps it to, but its upload is not
completed. Task commit saves the attempt's uploads as ``<taskId>.pendingset``; job commit completes
them through the same path as the staging committers. No local copy of the data is made.

Unlike the committer that document describes, no ``.pending`` file is saved per output file: the
attempt keeps its uploads in memory until task commit (as Hadoop's
``fs.s3a.committer.magic.track.commits.in.memory.enabled`` does), so a file costs 2 + parts
requests, as it does with the staging committers. An attempt that dies before its pendingset
leaves nothing to read, and needs nothing: every key it uploads to carries the job UUID, and
job end aborts the job's pending uploads by listing them (``s3_stages.remove_leftovers``).
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
from ..request_options import CONTENT_TYPES
from ..store import PartInfo, S3Store
from .conflict import DirectoryConflict, PartitionConflict
from .s3_job import S3Committer

#: parts that may wait for an upload thread; memory per task is bounded by
#: multipart.size x (upload.threads + QUEUE_DEPTH) plus one filling buffer per open file
QUEUE_DEPTH = 2


class PartQueue:
    """One task's part uploads: a bounded queue onto its upload threads, and the part buffers
    they hand back for reuse.

    Why reuse: allocating and freeing a ``part_size`` buffer per part fragments the C heap, and
    then a stream's peak RSS grew with file size (``bench/memory.py`` on RGW, 16 MiB parts:
    304 MiB for a 256 MiB file, 356 MiB for 4 GiB; flat with glibc's mmap threshold fixed).
    A full part's buffer goes back to the queue after its upload and fills the next part.
    """

    def __init__(self, part_size: int, upload_threads: int) -> None:
        self.part_size = part_size
        self.pool = ThreadPoolExecutor(upload_threads, "s3commit-stream")
        self._capacity = upload_threads + QUEUE_DEPTH
        self.slots = threading.BoundedSemaphore(self._capacity)
        self._free: list[bytearray] = []
        self._lock = threading.Lock()

    def buffer(self) -> bytearray:
        """A used full-size buffer, or a new empty one that grows as a file's first part fills
        (so a small file never costs a whole part)."""
        with self._lock:
            return self._free.pop() if self._free else bytearray()

    def recycle(self, buffer: bytearray) -> None:
        with self._lock:
            if len(buffer) == self.part_size and len(self._free) < self._capacity:
                self._free.append(buffer)

    def shutdown(self, *, cancel: bool = False) -> None:
        """Wait for the uploads (or cancel those not started) and free the buffers."""
        self.pool.shutdown(wait=True, cancel_futures=cancel)
        with self._lock:
            self._free.clear()


class DelayedCompletionStream(io.RawIOBase):
    """A writable stream into one multipart upload that it never completes.

    Parts of ``part_size`` bytes go to the task's queue as soon as they fill; its slots bound how
    many parts of the task may be queued or in flight, so memory does not grow with file size.
    ``close()`` waits for the parts and records them (ETag, checksum: :attr:`parts`);
    ``abort()`` aborts the upload.
    Nothing ever waits on a pool that is shut down: a part it will never run is cancelled,
    which frees its slot, and a new part is refused at once.
    """

    def __init__(
        self,
        store: S3Store,
        bucket: str,
        key: str,
        parts: PartQueue,
        content_type: str | None = None,
    ) -> None:
        super().__init__()
        self.store, self.bucket, self.key = store, bucket, key
        self.part_size, self._queue = parts.part_size, parts
        self.upload_id = store.initiate(bucket, key, content_type)
        self.length = 0
        #: the uploaded parts, in order, once the stream is closed
        self.parts: list[PartInfo] = []
        self._buffer: bytearray | None = None
        self._filled = 0
        self._parts: list[Future[PartInfo]] = []
        self.aborted = False

    @property
    def etags(self) -> list[str]:
        return [part.etag for part in self.parts]

    def writable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.length

    def write(self, data) -> int:
        view = memoryview(data).cast("B")
        size = len(view)
        if self.aborted:
            return size  # discarded: a writer finishing after the abort changes nothing
        if self.closed:
            raise ValueError(f"write to a closed upload stream for {self.key!r}")
        self.length += size
        while view:
            if self._buffer is None:
                self._buffer, self._filled = self._queue.buffer(), 0
            chunk = view[: self.part_size - self._filled]
            # overwrites a reused buffer in place, extends a new one
            self._buffer[self._filled : self._filled + len(chunk)] = chunk
            self._filled += len(chunk)
            view = view[len(chunk) :]
            if self._filled == self.part_size:
                self._send(self._buffer)
                self._buffer = None
        return size

    def _send(self, body: bytearray | bytes) -> None:
        for done in self._parts:  # surface a failed part now, not at close
            if done.done() and done.exception() is not None:
                raise done.exception()
        number = len(self._parts) + 1
        check_part_number(self.key, number, self.part_size)
        queue = self._queue
        queue.slots.acquire()
        try:
            part = queue.pool.submit(self._upload, number, body)
        except RuntimeError as exc:  # the pool is shut down: no worker would ever run the part
            queue.slots.release()
            raise RuntimeError(
                f"the upload stream of {self.key!r} was used after its task was aborted"
            ) from exc

        def settled(_: Future[PartInfo]) -> None:  # run, failed or cancelled
            if isinstance(body, bytearray):
                queue.recycle(body)
            queue.slots.release()

        part.add_done_callback(settled)
        self._parts.append(part)

    def _upload(self, number: int, body: bytearray | bytes) -> PartInfo:
        return self.store.upload_part(self.bucket, self.key, self.upload_id, number, body)

    def close(self) -> None:
        """Upload what is buffered and wait for every part; the upload stays pending."""
        if self.closed:
            return
        try:
            if not self.aborted:
                if self._filled or not self._parts:  # S3 needs one part, even an empty one
                    self._send(self._last_part())
                self.parts = [part.result() for part in self._parts]
        finally:
            super().close()

    def _last_part(self) -> bytes:
        """What is buffered, as bytes of its own: the buffer may be a reused, longer one."""
        buffer, self._buffer = self._buffer, None
        if buffer is None:
            return b""
        last = bytes(memoryview(buffer)[: self._filled])
        self._queue.recycle(buffer)
        return last

    def abort(self) -> None:
        """Drop queued parts, wait for those in flight (none may land later), abort the upload.

        The stream counts as closed even when the abort request fails.
        """
        self.aborted = True
        self._buffer = None
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

    def __init__(
        self,
        store: S3Store,
        bucket: str,
        part_size: int,
        upload_threads: int,
        content_type: str | None = None,
    ) -> None:
        self.store, self.bucket, self.content_type = store, bucket, content_type
        self.parts = PartQueue(part_size, upload_threads)
        self.streams: dict[str, DelayedCompletionStream] = {}

    def open_stream(self, relpath: str, key: str) -> pa.NativeFile:
        stream = DelayedCompletionStream(
            self.store, self.bucket, key, self.parts, self.content_type
        )
        self.streams[relpath] = stream
        return pa.PythonFile(stream, mode="w")

    def abort(self, relpath: str) -> None:
        self.streams[relpath].abort()


class MagicSink(StreamingSink):
    """Streams each file into its final key and keeps the upload it leaves pending."""

    def __init__(self, committer: MagicCommitter, task: TaskAttemptContext) -> None:
        options = committer.job.options
        super().__init__(
            committer.store,
            committer.location.bucket,
            options.multipart_size,
            options.upload_threads,
            CONTENT_TYPES[committer.job.format],
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
            etags=[],
            length=stream.length,
            rows=written.rows,
            partition=written.partition,
            jobId=self.committer.job.job_id,
            taskId=self.task.task_id,
        )
        commit.record_parts(stream.parts, self.store.settings.requests.checksum_algorithm)
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

    def pendingset_key(self, pendingset: PendingSet) -> str:
        return layout.magic_pendingset_key(self.location, self.job.job_id, pendingset.taskId)

    def attempt_of(self, key: str) -> str | None:
        """None: magic saves only pendingsets, named by task, and those of attempts that never
        reported are not needed, since job end lists the job's pending uploads."""
        return None

    @property
    def delete_metadata(self) -> bool:
        return self.job.options.magic_cleanup

    def setup_task(self, task: TaskAttemptContext) -> OutputSink:
        """The attempt's streams; ``fail`` per partition is checked before the first of a
        partition initiates its upload."""
        self._sink = MagicSink(self, task)
        return self.conflict.guard(self._sink, self.visible, self.location.url())

    def commit_task(self, task: TaskAttemptContext, files: list[WrittenFile]) -> dict[str, Any]:
        sink = self._sink
        assert sink is not None, "setup_task was not called"
        pendingset = PendingSet(
            jobId=self.job.job_id,
            taskId=task.task_id,
            taskAttemptId=task.attempt_id,
            commits=[sink.commits[f.relpath] for f in files],
        )
        self.save_pendingset(pendingset)
        sink.parts.shutdown()
        return pendingset.to_dict()

    def abort_task(self, task: TaskAttemptContext) -> None:
        """Abort every upload this attempt opened; the attempt saved no metadata that names them.

        One failed request stops nothing else: every stream is aborted and the pool is shut
        down whatever fails; the first error is raised at the end.
        """
        if self._sink is None:
            return
        errors: list[Exception] = []
        try:
            for stream in self._sink.streams.values():
                if not stream.aborted:
                    try:
                        stream.abort()
                    except Exception as exc:  # the others are aborted all the same
                        errors.append(exc)
        finally:
            self._sink.parts.shutdown(cancel=True)
        if errors:
            raise errors[0]
