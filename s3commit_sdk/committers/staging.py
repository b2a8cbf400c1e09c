"""The staging committers: "directory" and "partitioned" (Netflix's "s3committer README").

"S3A Committers: Architecture and Implementation" ("The Netflix Staging committer"): tasks write
to a local directory; each file becomes a multipart upload that the task never completes, and
task commit returns the list of pending uploads (the pendingset); job commit completes them.

Unlike that design, a file's upload starts as soon as the writer closes it (rolled by
``max_records_per_file``, or a partition's file closed) while the task writes the next one
(:class:`StagedUploads`); task commit uploads what is left and waits for the rest. Until job
commit every one of those uploads is only pending, and task abort aborts them all.
"""

from __future__ import annotations

import glob
import hashlib
import os
import shutil
import tempfile
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pyarrow as pa

from .. import layout
from ..errors import InvalidOptionError
from ..formats import PendingSet, PendingUpload
from ..options import part_size_for
from ..protocol import OutputSink, TaskAttemptContext, WrittenFile
from ..request_options import CONTENT_TYPES
from ..store import PartInfo, S3Store
from .conflict import PartitionConflict
from .s3_job import S3Committer


def private_dir(path: str) -> None:
    """Create ``path`` with mode 0700, or check that it is ours and closed to others.

    Staged files are the job's data: a buffer directory another user created (in a shared
    ``/tmp``) or can read is refused, not used.
    """
    os.makedirs(path, mode=0o700, exist_ok=True)
    info = os.stat(path)
    if hasattr(os, "getuid") and info.st_uid != os.getuid():
        raise InvalidOptionError(
            f"buffer.dir {path} belongs to another user (uid {info.st_uid}): choose a directory "
            "of your own with the option buffer.dir",
            option="buffer.dir",
        )
    if info.st_mode & 0o077:
        os.chmod(path, 0o700)


def usable_buffer_dir(path: str) -> None:
    """Make sure files can be staged in ``path`` (``buffer.dir``): created if missing (mode
    0700), ours, and writable, checked by creating a file there. Else the typed option error,
    naming the reason, instead of an ``OSError`` inside a task."""
    try:
        private_dir(path)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as exc:
        reason = (
            "it is not a directory"
            if os.path.exists(path) and not os.path.isdir(path)
            else exc.strerror or str(exc)
        )
        raise InvalidOptionError(
            f"option 'buffer.dir' is {path!r}, where no file can be staged ({reason}): give a "
            "local directory this user can create and write, or leave the option out (the "
            "default is $TMPDIR/s3commit-<uid>). Nothing was uploaded.",
            option="buffer.dir",
        ) from exc


#: the longest file name the common local file systems take (ext4, XFS, APFS, NTFS), in bytes
NAME_MAX = 255
#: hex digits of the hash that ends a shortened name
_DIGEST = 32


def local_path(root: str, relpath: str) -> str:
    """Where the staged file of ``relpath`` lives under ``root``.

    S3 keys take partition values of hundreds of bytes that a local file name cannot: a path
    segment longer than :data:`NAME_MAX` bytes is shortened to its start and a hash of the
    whole segment here, while the upload's key keeps ``relpath``.
    """
    return os.path.join(root, *(_local_name(segment) for segment in relpath.split("/")))


def _local_name(segment: str) -> str:
    encoded = os.fsencode(segment)
    if len(encoded) <= NAME_MAX:
        return segment
    digest = hashlib.sha256(encoded).hexdigest()[:_DIGEST]
    head = encoded[: NAME_MAX - _DIGEST - 1].decode("utf-8", errors="ignore")  # whole chars
    return f"{head}-{digest}"


class StagedUploads:
    """One attempt's uploads of its staged files, each started as its file closes.

    Every part goes through the attempt's one pool of ``upload.threads`` threads, in the order
    the files closed: the pool bounds the parts (and so the files) in flight and the memory,
    one part per thread, read from disk as it is sent; the local files stay until task commit
    or abort, as before. The first part that fails is raised at the next file the writer opens
    or closes, so the attempt stops early; :meth:`stop` leaves no part in flight.
    """

    def __init__(self, committer: DirectoryStagingCommitter, task: TaskAttemptContext) -> None:
        self.committer, self.task = committer, task
        self.root = committer.attempt_dir(task)
        self.pool = ThreadPoolExecutor(committer.job.options.upload_threads, "s3commit-upload")
        #: relpath -> the file's upload, from its initiation on, and its parts as they are sent
        self.started: dict[str, tuple[PendingUpload, list[Future[PartInfo]]]] = {}
        self._failure: BaseException | None = None

    @property
    def store(self) -> S3Store:
        return self.committer.store

    def start(self, written: WrittenFile) -> None:
        """Initiate the file's upload (never completed here) and queue its parts."""
        self.raise_failed()
        job, location = self.committer.job, self.committer.location
        key = location.key(written.relpath)
        length = os.path.getsize(local_path(self.root, written.relpath))
        upload_id = self.store.initiate(location.bucket, key, CONTENT_TYPES[job.format])
        commit = PendingUpload(
            uri=location.url(key),
            bucket=location.bucket,
            destinationKey=key,
            uploadId=upload_id,
            etags=[],
            length=length,
            rows=written.rows,
            partition=written.partition,
            jobId=job.job_id,
            taskId=self.task.task_id,
        )
        parts: list[Future[PartInfo]] = []
        self.started[written.relpath] = (commit, parts)  # known to the abort from here on
        parts += self._send_parts(written.relpath, commit)

    def _send_parts(self, relpath: str, commit: PendingUpload) -> list[Future[PartInfo]]:
        path = local_path(self.root, relpath)
        part_size = part_size_for(commit.length, self.committer.job.options.multipart_size)
        offsets = range(0, commit.length, part_size) if commit.length else [0]

        def send(number: int, offset: int) -> PartInfo:
            with open(path, "rb") as handle:
                handle.seek(offset)
                body = handle.read(part_size)
            return self.store.upload_part(
                commit.bucket, commit.destinationKey, commit.uploadId, number, body
            )

        parts = [self.pool.submit(send, i + 1, off) for i, off in enumerate(offsets)]
        for part in parts:
            part.add_done_callback(self._note_failure)
        return parts

    def _note_failure(self, part: Future[PartInfo]) -> None:
        if not part.cancelled() and part.exception() is not None and self._failure is None:
            self._failure = part.exception()

    def raise_failed(self) -> None:
        """The error of the first part that failed, if one did."""
        if self._failure is not None:
            raise self._failure

    def all_sent(self, files: list[WrittenFile]) -> list[PendingUpload]:
        """Start the files not started yet and wait for every part: the uploads, in file
        order, with their parts (ETags, and checksums if the job asks for them)."""
        for written in files:
            if written.relpath not in self.started:
                self.start(written)
        algorithm = self.store.settings.requests.checksum_algorithm
        commits = []
        for written in files:
            commit, parts = self.started[written.relpath]
            commit.record_parts([part.result() for part in parts], algorithm)
            commits.append(commit)
        self.pool.shutdown()
        return commits

    def stop(self) -> list[PendingUpload]:
        """Drop the queued parts and wait for those in flight (so none lands after its upload
        is aborted); every upload initiated, for the caller to abort."""
        self.pool.shutdown(wait=True, cancel_futures=True)
        return [commit for commit, _ in self.started.values()]


class StagingSink(OutputSink):
    """Files under the task attempt's private buffer directory (mode 0700), each uploaded from
    the moment the writer closes it."""

    def __init__(self, uploads: StagedUploads) -> None:
        self.uploads = uploads

    def open(self, relpath: str) -> pa.NativeFile:
        self.uploads.raise_failed()
        path = local_path(self.uploads.root, relpath)
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        return pa.OSFile(path, "wb")

    def finish(self, written: WrittenFile) -> None:
        self.uploads.start(written)


class DirectoryStagingCommitter(S3Committer):
    name = "directory"

    def __init__(self, job) -> None:
        super().__init__(job)
        self._uploads: StagedUploads | None = None

    @property
    def metadata_prefix(self) -> str:
        return layout.job_prefix(self.location, self.job.job_id)

    def pendingset_key(self, pendingset: PendingSet) -> str:
        job_id, attempt_id = self.job.job_id, pendingset.taskAttemptId
        return layout.staging_pendingset_key(self.location, job_id, attempt_id)

    def attempt_of(self, key: str) -> str | None:
        name = key.rsplit("/", 1)[-1]
        return name.removesuffix(".pendingset") if name.endswith(".pendingset") else None

    def attempt_dir(self, task: TaskAttemptContext) -> str:
        """Directly in the buffer directory, which no attempt removes: attempts of one job on one
        host never race over a shared job directory."""
        return os.path.join(self.job.options.buffer_dir, f"{self.job.job_id}_{task.attempt_id}")

    def setup_task(self, task: TaskAttemptContext) -> OutputSink:
        root = self.attempt_dir(task)
        shutil.rmtree(root, ignore_errors=True)  # a previous attempt on this host may have left it
        usable_buffer_dir(self.job.options.buffer_dir)  # where the driver could not check it
        os.mkdir(root, mode=0o700)
        self._uploads = StagedUploads(self, task)
        return self.conflict.guard(StagingSink(self._uploads), self.visible, self.location.url())

    def _drop_local(self, task: TaskAttemptContext) -> None:
        shutil.rmtree(self.attempt_dir(task), ignore_errors=True)

    def commit_task(self, task: TaskAttemptContext, files: list[WrittenFile]) -> dict[str, Any]:
        """Upload the files not started yet and wait for every upload, each left pending
        (``fail`` was checked per partition when the attempt opened its first file there:
        :meth:`setup_task`)."""
        assert self._uploads is not None, "setup_task was not called"
        pendingset = PendingSet(
            jobId=self.job.job_id,
            taskId=task.task_id,
            taskAttemptId=task.attempt_id,
            commits=self._uploads.all_sent(files),
        )
        self.save_pendingset(pendingset)  # checks that the job is alive
        self._drop_local(task)
        return pendingset.to_dict()

    def drop_local_buffers(self) -> None:
        """What attempts killed mid-write left in this host's buffer directory; job end runs it
        even when the S3 cleanup fails."""
        pattern = os.path.join(glob.escape(self.job.options.buffer_dir), f"{self.job.job_id}_*")
        for attempt_dir in glob.glob(pattern):
            shutil.rmtree(attempt_dir, ignore_errors=True)

    def abort_task(self, task: TaskAttemptContext) -> None:
        """Stop the uploads in flight, delete the local data and abort every upload this
        attempt initiated: one failed abort stops none of the others; the first is raised."""
        initiated = self._uploads.stop() if self._uploads is not None else []
        self._drop_local(task)
        errors: list[Exception] = []
        for upload in initiated:
            try:
                self.store.abort(upload.bucket, upload.destinationKey, upload.uploadId)
            except Exception as exc:  # the others are aborted all the same
                errors.append(exc)
        if errors:
            raise errors[0]


class PartitionedStagingCommitter(DirectoryStagingCommitter):
    name = "partitioned"
    conflict_class = PartitionConflict
