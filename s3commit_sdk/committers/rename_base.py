"""What the rename-based committers (manifest, classic) share: store, sink, conflicts, _SUCCESS.

They write task output into a job directory under ``<dest>/_temporary/`` and make it visible by
renaming files, which is atomic and cheap on ``file://``, HDFS-like stores, ABFS and GCS, and a
copy plus a delete per file on S3 ("S3A Committers: Architecture and Implementation", "The
FileOutputCommitter"; "Manifest Committer Protocol").
"""

from __future__ import annotations

import threading
import time
from abc import abstractmethod
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import pyarrow as pa

from ..errors import (
    MIXED_VISIBLE,
    NOTHING_VISIBLE,
    SOME_VISIBLE,
    CommitError,
    ConcurrentCommitError,
    S3CommitError,
)
from ..formats import SUCCESS_FILES_CAP, CommittedFile
from ..interrupts import held_interrupts, interrupt_requested, interruption_point, unstoppable
from ..layout import SUCCESS_MARKER, is_hidden, marker_key, temporary_dir
from ..paths import S3Location
from ..protocol import (
    Committer,
    JobContext,
    JobOutcome,
    OutputSink,
    TaskAttemptContext,
    TaskCommit,
)
from ..store.rename import LocalStore, RenameStore, open_rename_store
from .conflict import DirectoryConflict, partition_of
from .report import build_success, success_objects


class StoreSink(OutputSink):
    """Files under a task attempt directory of a rename-capable store."""

    def __init__(self, store: RenameStore, root: str) -> None:
        self.store, self.root = store, root

    def open(self, relpath: str) -> pa.NativeFile:
        path = f"{self.root}/{relpath}"
        if isinstance(self.store, LocalStore):  # native I/O for local disks
            self.store.mkdirs(path.rsplit("/", 1)[0])
            return pa.OSFile(path, "wb")
        return pa.PythonFile(self.store.open_write(path), mode="w")


class RenameCommitter(Committer):
    conflict_class: type[DirectoryConflict] = DirectoryConflict
    #: opens the job's store: ``(location, settings, *, threads) -> RenameStore``; tests hand
    #: in a store with faults here (``testing.faulty_store.faulty_rename_store``)
    store_factory: Callable[..., RenameStore] = staticmethod(open_rename_store)

    def __init__(self, job: JobContext) -> None:
        super().__init__(job)
        self.location = job.location
        self.store = self.store_factory(job.location, job.settings, threads=job.options.threads)
        self.conflict = self.conflict_class(job.conflict_mode)

    # -- paths ---------------------------------------------------------------------------------
    def path(self, relpath: str = "") -> str:
        return self.location.key(relpath)

    def relative(self, path: str) -> str:
        return self.location.relative(path)

    @property
    def temporary(self) -> str:
        return temporary_dir(self.location)

    @property
    def job_dir(self) -> str:
        raise NotImplementedError

    def attempt_dir(self, task: TaskAttemptContext) -> str:
        raise NotImplementedError

    def visible(self, relprefix: str) -> list[str]:
        files = self.store.list_files(self.path(relprefix))
        return [p for p, _ in files if not is_hidden(self.relative(p))]

    def parallel(self, action, items: list) -> list:
        with ThreadPoolExecutor(self.job.options.threads, "s3commit-rename") as pool:
            return list(pool.map(action, items))

    # -- job and task setup ---------------------------------------------------------------------
    def setup_job(self) -> None:
        self.refuse_an_unfinished_commit()
        self.conflict.check_job(self.visible, self.location.url())
        self.store.mkdirs(self.job_dir)

    def refuse_an_unfinished_commit(self) -> None:
        """An S3 committer's job commit that runs, or crashed unfinished, holds the destination's
        marker: ``s3commit recover`` / ``abort`` would complete or delete the files its journal
        names beside this job's, so this job does not start (the S3 committers refuse alike)."""
        if not self.store.exists(marker_key(self.location)):
            return
        url = self.location.url()
        raise ConcurrentCommitError(
            f"another job is committing into {url}, or its commit crashed unfinished (its marker "
            f"{marker_key(self.location)} exists). Wait for it, or resolve it with `s3commit "
            f"recover {url}` (finish it) or `s3commit abort {url}` (roll it back). This job "
            f"({self.job.job_id}) did not start: nothing of it is visible.",
            **self.error_fields(NOTHING_VISIBLE, "recover"),
        )

    def setup_task(self, task: TaskAttemptContext) -> OutputSink:
        root = self.attempt_dir(task)
        self.store.delete(root)  # a previous attempt's leftovers
        self.store.mkdirs(root)
        return self.conflict.guard(StoreSink(self.store, root), self.visible, self.location.url())

    def abort_task(self, task: TaskAttemptContext) -> None:
        self.store.delete(self.attempt_dir(task))

    # -- job end --------------------------------------------------------------------------------
    def commit_job(self, messages: list[TaskCommit], phases: dict[str, float]) -> JobOutcome:
        """Any failure of job commit aborts the job, so no ``_temporary`` is left behind.

        Unlike the S3 committers there is no journal to recover from: what a failed step made
        visible is undone by the step itself (``move_all``) or named in its error. A Ctrl-C is
        held (:mod:`..interrupts`) until the next stage or the end of the renames in flight,
        which are undone; once every file is renamed the commit finishes (a stop there would
        leave old and new data visible) and the interrupt is raised after it.
        """
        committed = (
            f"s3commit: job {self.job.job_id} was interrupted after its files were renamed "
            f"into place, so its commit finished: they are visible at {self.location.url()}."
        )
        with held_interrupts(committed):
            try:
                return self.commit_files(messages, phases)
            except BaseException as exc:
                self._abort_noting(messages, exc)
                raise

    @contextmanager
    def stage(self, phases: dict[str, float], name: str) -> Iterator[None]:
        """A named, timed step of job commit; a held Ctrl-C stops the commit before it."""
        interruption_point()
        with super().stage(phases, name):
            yield

    @abstractmethod
    def commit_files(self, messages: list[TaskCommit], phases: dict[str, float]) -> JobOutcome:
        """The committer's own job commit; any failure is aborted by :meth:`commit_job`."""

    def _abort_noting(self, messages: list[TaskCommit], cause: BaseException) -> None:
        """Abort while ``cause`` propagates; a failing abort goes into its notes, never raised."""
        try:
            self.abort_job(messages)
        except Exception as exc:
            cause.add_note(
                f"s3commit: aborting job {self.job.job_id} failed too ({exc}): delete "
                f"{self.location.url(self.job_dir)} and, if empty, "
                f"{self.location.url(self.temporary)}"
            )

    def replaced_files(self, relpaths: list[str]) -> list[str]:
        """Visible files of the replaced partitions, except this job's own by path (v2 merged
        them at task commit already; v1 lists before anything moves)."""
        new = {self.path(r) for r in relpaths}
        partitions = {partition_of(r) for r in relpaths}
        return [p for p in self.conflict.replaced(self.visible, partitions) if p not in new]

    def move_all(self, moves: list[tuple[str, str]]) -> None:
        """Rename files in parallel; on a failure undo, then say what a listing still shows."""
        sent: list[str] = []
        failed = threading.Event()

        interrupted = interrupt_requested()

        def move(pair: tuple[str, str]) -> None:
            if failed.is_set() or interrupted():  # stop at the first failure: make no more visible
                return
            sent.append(pair[1])  # from here on it may be visible, whatever rename answers
            try:
                self.store.rename(*pair)
            except BaseException:
                failed.set()
                raise

        try:
            self.parallel(move, moves)
            interruption_point()  # renames held back by a Ctrl-C: undo those that ran
        except S3CommitError as exc:
            visible, state = self._undo_moves(sent)
            raise CommitError(
                f"job {self.job.job_id}: a rename failed during job commit ({exc}) after "
                f"{len(sent)} of {len(moves)} renames had started; {state}",
                **self.error_fields(visible),
            ) from exc
        except KeyboardInterrupt as interrupt:  # the pool has finished the renames it started
            interrupt.add_note(
                f"s3commit: job {self.job.job_id} was interrupted during its renames; "
                f"{self._undo_moves(sent)[1]}"
            )
            raise

    def _undo_moves(self, targets: list[str]) -> tuple[str | None, str]:
        """Delete every target a rename was started for (names carry the job UUID); say what
        is visible (a key of ``errors.VISIBLE``, None when unchecked) and in words."""
        for path in targets:
            try:
                if self.store.exists(path):
                    self.store.delete(path)
            except S3CommitError:
                continue  # the listing below reports it
        url = self.location.url()
        try:
            listed = set(self.visible(""))
        except S3CommitError as exc:
            return None, f"checking what is visible at {url} failed ({exc}): files may remain"
        left = sorted(t for t in targets if t in listed)
        if not left:
            return NOTHING_VISIBLE, (
                f"the job was rolled back: nothing of it is visible at {url} (checked by "
                "listing) and the existing data is untouched"
            )
        shown = ", ".join(self.location.url(p) for p in left[:5])
        more = f" and {len(left) - 5} more" if len(left) > 5 else ""
        return SOME_VISIBLE, (
            f"rolling back failed: {len(left)} files of it are still visible at {url}: "
            f"{shown}{more}. Delete them (their names carry {self.job.job_id})."
        )

    def finish(
        self,
        entries: list[CommittedFile],
        replaced: list[str],
        phases: dict[str, float],
        started: float,
        json_success: bool = True,
        task_requests: Sequence[dict[str, int]] = (),
        task_durations: dict[str, float] | None = None,
    ) -> JobOutcome:
        """Delete replaced files, write _SUCCESS, clean the job directory.

        Requests are the driver's plus those the tasks reported. Every file is in place:
        from here on the commit runs to its end, whatever interrupts it.
        """
        unstoppable()
        with self.stage(phases, "replace_delete"):
            self._delete_replaced(replaced)
        with self.stage(phases, "cleanup"):
            self.cleanup_job_dir()
        phases["job_commit"] = time.monotonic() - started
        partitions = sorted({partition_of(self.relative(e.key)) for e in entries})
        requests = Counter(self.store.counters.snapshot())
        requests.update(self.job.setup_requests)  # the schema check's, before job setup
        for counts in task_requests:
            requests.update(counts)
        if self.job.options.mark_successful_jobs:  # _SUCCESS, and its file list past the cap
            puts = 1 + (json_success and len(entries) > SUCCESS_FILES_CAP)
            requests["PutObject" if isinstance(self.location, S3Location) else "create"] += puts
        requests = dict(sorted(requests.items()))
        success = build_success(
            self.job,
            self.name,
            entries,
            partitions,
            len(replaced),
            phases,
            requests,
            False,
            task_durations,
        )
        if self.job.options.mark_successful_jobs and json_success:
            for name, body, _ in success_objects(success, entries):
                self.store.write_bytes(self.path(name), body)
        elif self.job.options.mark_successful_jobs:
            self.store.write_bytes(self.path(SUCCESS_MARKER), b"")
        return JobOutcome(entries, success, phases, requests)

    def _delete_replaced(self, replaced: list[str]) -> None:
        """Last, once the new files are in place: a failure leaves old and new data visible."""
        try:
            for path in replaced:
                self.store.delete(path)
        except S3CommitError as exc:
            shown = ", ".join(self.location.url(p) for p in replaced[:3])
            raise CommitError(
                f"job {self.job.job_id}: its files are visible at {self.location.url()} but "
                f"deleting the {len(replaced)} files it replaces failed ({exc}): old and new "
                f"data may both be visible. Delete what remains of them (e.g. {shown}).",
                **self.error_fields(MIXED_VISIBLE),
            ) from exc

    def entry(self, path: str, rows: int, size: int, partition: dict, task: str) -> CommittedFile:
        """The committed file at store path ``path``, with its ETag where the store has one."""
        etag = self.store.etag(path) or ""
        return CommittedFile(self.location.url(path), path, size, rows, partition, etag, task)

    def cleanup_job_dir(self) -> None:
        self.store.delete(self.job_dir)
        if not self.store.list_files(self.temporary):
            self.store.delete(self.temporary)

    def abort_job(self, messages: list[TaskCommit]) -> None:
        self.cleanup_job_dir()
