"""The S3 committers writing a Delta table: one committed job is one Delta transaction.

Tasks are the committers' own (staging or magic); each records its files' Delta statistics from
their Parquet footers in its commit message. Job commit completes every upload first (files no
Delta reader sees), then commits one log entry that adds them all, and only then cleans up and
writes ``_SUCCESS``. A failed Delta commit rolls the job back: completed files deleted, uploads
aborted, the table at its previous version.

No per-destination marker is taken (``locks_destination``): the Delta log serialises commits
itself (a conditional PUT per version), so appends run their job commits side by side and
conflicting ones (replace, fail) are refused by delta-rs. The journal of a job that died
before its log entry is what ``s3commit recover`` / ``abort`` find (recovery.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..delta.stats import file_stats
from ..delta.table import (
    READ_VERSION_KEY,
    SCHEMA_KEY,
    STATS_KEY,
    UNIT_KEY,
    DeltaCommit,
    DeltaLog,
    TableCommitFailed,
    TablePlan,
)
from ..errors import (
    NOTHING_VISIBLE,
    CommitError,
    ConcurrentCommitError,
    ConflictError,
    InvalidArgumentError,
)
from ..formats import Journal, PendingSet, PendingUpload
from ..protocol import JobContext, JobOutcome, TaskAttemptContext, WrittenFile
from .conflict import DirectoryConflict, PartitionConflict
from .magic import MagicCommitter
from .staging import DirectoryStagingCommitter, PartitionedStagingCommitter


class TableConflict(DirectoryConflict):
    """``fail`` judged by the table's snapshot: files a Delta version removed stay in storage
    (for time travel) but hold no data, so listing cannot tell. ``replace`` deletes nothing:
    its Delta transaction removes the replaced files from the table."""

    def __init__(self, mode: str, per_partition: bool, occupied: Callable[[], set[str]]) -> None:
        super().__init__(mode)
        self.per_partition, self.occupied = per_partition, occupied

    def check_job(self, visible, url: str) -> None:
        if self.mode == "fail" and not self.per_partition and self.occupied():
            raise ConflictError(
                f"the Delta table at {url} already holds data and conflict_mode is 'fail': use "
                "conflict_mode='append' or 'replace', or a new path",
                destination=url,
                visible=NOTHING_VISIBLE,
            )

    def check_task(self, visible, url: str, partitions: set[str]) -> None:
        if self.mode != "fail" or not self.per_partition:
            return
        taken = sorted(partitions & self.occupied())
        if taken:
            where = taken[0] or "the table root"
            raise ConflictError(
                f"partition {where} of the Delta table at {url} already holds data and "
                "conflict_mode is 'fail': use 'append' or 'replace' (which replaces only the "
                "partitions that receive data)",
                destination=url,
            )

    def replaced(self, visible, partitions: set[str]) -> list[str]:
        return []


class DeltaJob:
    """Mixed in before an S3 committer class: the Delta steps around its job protocol."""

    locks_destination = False

    def __init__(self, job: JobContext) -> None:
        self._table = None  # the snapshot job setup read (driver), or a task's latest
        self._table_loaded = False
        self._commit_schema = job.table_schema
        self._task_stats: dict[str, str] = {}
        self.delta: DeltaCommit | None = None
        super().__init__(job)
        self.log = DeltaLog(self.location, job.settings, self.store)

    def make_conflict_policy(self) -> DirectoryConflict:
        per_partition = isinstance(super().make_conflict_policy(), PartitionConflict)
        return TableConflict(self.job.conflict_mode, per_partition, self._occupied)

    def _read(self) -> None:
        """Read the table once: at job setup (the snapshot the transaction is based on), at a
        task's first conflict check, or at job commit if setup ran in another process (Spark's
        data source API sets up in one Python worker and commits in another)."""
        if self._table_loaded:
            return
        table = self.log.open()
        if table is not None:
            self.log.check_fits(table, self.job.table_schema, self.job.partition_by)
            self._commit_schema = table.schema().to_json()  # the table's own, byte for byte
        self._table, self._table_loaded = table, True

    def _occupied(self) -> set[str]:
        self._read()
        return self.log.occupied(self._table)

    # -- job setup: the snapshot the transaction will be based on -------------------------------
    def setup_job(self) -> None:
        """Read the table first: data that does not fit it is refused before any upload."""
        if self.job.table_schema is None:  # recovery builds jobs without one; they never set up
            raise InvalidArgumentError("a Delta job needs its table schema: build it with new_job")
        self.store.check_bucket(self.location.bucket)
        self._read()
        super().setup_job()

    @property
    def read_version(self) -> int | None:
        return self._table.version() if self._table is not None else None

    # -- task side: statistics from the footers the writers kept ---------------------------------
    def commit_task(self, task: TaskAttemptContext, files: list[WrittenFile]) -> dict[str, Any]:
        missing = [f.relpath for f in files if f.footer is None]
        if missing:
            raise CommitError(f"no Parquet footer for {missing[0]!r}: a Delta file needs one")
        self._task_stats = {self.location.key(f.relpath): file_stats(f.footer) for f in files}
        return super().commit_task(task, files)

    def save_pendingset(self, pendingset: PendingSet) -> None:
        for commit in pendingset.commits:
            commit.extraData[STATS_KEY] = self._task_stats[commit.destinationKey]
        super().save_pendingset(pendingset)

    # -- job commit -----------------------------------------------------------------------------
    def journal_extra(self) -> dict[str, Any]:
        return {
            SCHEMA_KEY: self._commit_schema,
            READ_VERSION_KEY: self.read_version,
            UNIT_KEY: "partition" if self.conflict.per_partition else "table",
        }

    def _begin_commit(self, commits: list[PendingUpload], phases: dict[str, float]) -> Journal:
        unmeasured = [c.destinationKey for c in commits if STATS_KEY not in c.extraData]
        if unmeasured:
            raise CommitError(f"{unmeasured[0]!r} carries no Delta statistics from its task")
        self._read()
        return super()._begin_commit(commits, phases)

    def finish_commit(
        self,
        journal: Journal,
        etags: dict[str, str],
        pendingsets: list[PendingSet],
        durations: dict[str, float],
        phases: dict[str, float],
        started: float,
    ) -> JobOutcome:
        """The Delta transaction first (the one step that makes the job visible), then the
        committer's clean-up, ``_SUCCESS`` and release. ``s3commit recover`` comes here too."""
        with self.stage(phases, "delta_commit"):
            plan = TablePlan.from_journal(journal, self.location)
            try:
                self.delta = self.log.commit(plan, self._table)
            except TableCommitFailed as failed:
                visible, state = self._roll_back(journal.commits, pendingsets)
                error = ConcurrentCommitError if failed.conflict else CommitError
                what = (
                    "another writer's commit to the Delta table conflicts with it"
                    if failed.conflict
                    else "committing it to the Delta table failed"
                )
                raise error(
                    f"job {self.job.job_id}: {what} ({failed}). It was rolled back: the Delta "
                    f"table at {self.location.url()} stays at its previous version. {state}",
                    **self.rolled_back_fields(visible),
                ) from failed
            except CommitError as unknown:
                unknown.add_note(
                    f"s3commit: job {self.job.job_id} completed its files at {self.location.url()} "
                    "(no Delta reader sees them unless the transaction landed); they are kept. "
                    f"`s3commit recover {self.location.url()}` commits the transaction if it is "
                    f"missing (never twice); `s3commit abort {self.location.url()}` deletes them."
                )
                unknown.remedy = f"s3commit recover {self.location.url()}"
                raise
        return super().finish_commit(journal, etags, pendingsets, durations, phases, started)

    def success_fields(self) -> dict[str, Any]:
        if self.delta is None:
            return {}
        return {"deltaVersion": self.delta.version, "deltaRemovedFiles": self.delta.removed}


class DeltaDirectoryCommitter(DeltaJob, DirectoryStagingCommitter):
    """The directory committer writing a Delta table; its unit of conflict is the table."""


class DeltaPartitionedCommitter(DeltaJob, PartitionedStagingCommitter):
    """The partitioned committer writing a Delta table; replace replaces partitions."""


class DeltaMagicCommitter(DeltaJob, MagicCommitter):
    """The magic committer writing a Delta table; per partition when partitioned."""


DELTA_COMMITTERS = {
    "directory": DeltaDirectoryCommitter,
    "partitioned": DeltaPartitionedCommitter,
    "magic": DeltaMagicCommitter,
}
