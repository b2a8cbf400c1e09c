"""The staging committers: "directory" and "partitioned" (Netflix's "s3committer README").

"S3A Committers: Architecture and Implementation" ("The Netflix Staging committer"): tasks write
to a local directory; task commit uploads each file as a multipart upload that it does not
complete and returns the list of pending uploads (the pendingset); job commit completes them.
"""

from __future__ import annotations

import glob
import hashlib
import os
import shutil
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pyarrow as pa

from .. import layout
from ..errors import InvalidOptionError
from ..formats import PendingSet, PendingUpload
from ..options import part_size_for
from ..protocol import OutputSink, TaskAttemptContext, WrittenFile
from ..request_options import CONTENT_TYPES
from ..store import PartInfo
from ..store.file_range import FileRange
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


class LocalDirSink(OutputSink):
    """Files under the task attempt's private buffer directory (mode 0700)."""

    def __init__(self, root: str) -> None:
        self.root = root

    def open(self, relpath: str) -> pa.NativeFile:
        path = local_path(self.root, relpath)
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        return pa.OSFile(path, "wb")


class DirectoryStagingCommitter(S3Committer):
    name = "directory"

    def __init__(self, job) -> None:
        super().__init__(job)
        self._lock = threading.Lock()
        self._initiated: list[tuple[str, str]] = []

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
        return self.conflict.guard(LocalDirSink(root), self.visible, self.location.url())

    def _drop_local(self, task: TaskAttemptContext) -> None:
        shutil.rmtree(self.attempt_dir(task), ignore_errors=True)

    def commit_task(self, task: TaskAttemptContext, files: list[WrittenFile]) -> dict[str, Any]:
        """Upload every file as a multipart upload left pending (``fail`` was checked per
        partition when the attempt opened its first file there: :meth:`setup_task`)."""
        root = self.attempt_dir(task)
        commits = [self._initiate(task, f) for f in files]  # save_pendingset checks job alive
        with ThreadPoolExecutor(self.job.options.upload_threads, "s3commit-upload") as pool:
            parts = [
                self._send_parts(pool, root, f, c) for f, c in zip(files, commits, strict=True)
            ]
            algorithm = self.store.settings.requests.checksum_algorithm
            for commit, futures in zip(commits, parts, strict=True):
                commit.record_parts([future.result() for future in futures], algorithm)
        pendingset = PendingSet(
            jobId=self.job.job_id,
            taskId=task.task_id,
            taskAttemptId=task.attempt_id,
            commits=commits,
        )
        self.save_pendingset(pendingset)
        self._drop_local(task)
        return pendingset.to_dict()

    def _initiate(self, task: TaskAttemptContext, written: WrittenFile) -> PendingUpload:
        """Start one upload; it is never completed here."""
        key = self.location.key(written.relpath)
        upload_id = self.store.initiate(self.location.bucket, key, CONTENT_TYPES[self.job.format])
        with self._lock:
            self._initiated.append((key, upload_id))
        return PendingUpload(
            uri=self.location.url(key),
            bucket=self.location.bucket,
            destinationKey=key,
            uploadId=upload_id,
            etags=[],
            length=os.path.getsize(local_path(self.attempt_dir(task), written.relpath)),
            rows=written.rows,
            partition=written.partition,
            jobId=self.job.job_id,
            taskId=task.task_id,
        )

    def _send_parts(self, pool, root: str, written: WrittenFile, commit: PendingUpload):
        """Queue the file's parts, each sent from its range of the file (:class:`FileRange`):
        no part is held in memory."""
        path = local_path(root, written.relpath)
        part_size = part_size_for(commit.length, self.job.options.multipart_size)
        offsets = range(0, commit.length, part_size) if commit.length else [0]

        def send(number: int, offset: int) -> PartInfo:
            size = min(part_size, commit.length - offset)
            with FileRange(path, offset, size) as body:
                return self.store.upload_part(
                    commit.bucket, commit.destinationKey, commit.uploadId, number, body
                )

        return [pool.submit(send, i + 1, off) for i, off in enumerate(offsets)]

    def drop_local_buffers(self) -> None:
        """What attempts killed mid-write left in this host's buffer directory; job end runs it
        even when the S3 cleanup fails."""
        pattern = os.path.join(glob.escape(self.job.options.buffer_dir), f"{self.job.job_id}_*")
        for attempt_dir in glob.glob(pattern):
            shutil.rmtree(attempt_dir, ignore_errors=True)

    def abort_task(self, task: TaskAttemptContext) -> None:
        """Delete the local data and abort every upload this attempt initiated."""
        self._drop_local(task)
        with self._lock:
            initiated, self._initiated = self._initiated, []
        for key, upload_id in initiated:
            self.store.abort(self.location.bucket, key, upload_id)


class PartitionedStagingCommitter(DirectoryStagingCommitter):
    name = "partitioned"
    conflict_class = PartitionConflict
