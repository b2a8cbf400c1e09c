"""What the table formats (Delta, Iceberg) share around the S3 committers' tasks.

A table format's job takes no per-destination marker (``locks_destination``): the table's own
log or catalog serialises commits, so appends run their job commits side by side and
conflicting ones (replace, fail) are refused at the table commit. Every task records each
file's table entry (statistics from the Parquet footer its writer kept) in its pendingset; the
table's snapshot, not a listing, says which partitions hold data.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable
from typing import Any

from ..errors import NOTHING_VISIBLE, CommitError, ConflictError, InvalidArgumentError
from ..formats import PendingSet
from ..protocol import JobContext, TaskAttemptContext, WrittenFile
from .conflict import DirectoryConflict, PartitionConflict, partition_conflict


class TableConflict(DirectoryConflict):
    """``fail`` judged by the table's snapshot: files a table version removed stay in storage
    (for time travel) but hold no data, so listing cannot tell. ``replace`` deletes nothing:
    its table commit removes the replaced files from the table.

    Per partition, ``fail`` is checked as :class:`PartitionConflict` checks it: when a task
    attempt opens its first file in a partition, against the snapshot the attempt read once."""

    def __init__(
        self, mode: str, per_partition: bool, occupied: Callable[[], set[str]], kind: str
    ) -> None:
        super().__init__(mode)
        self.per_partition, self.occupied, self.kind = per_partition, occupied, kind

    def check_job(self, visible, url: str) -> None:
        if self.mode == "fail" and not self.per_partition and self.occupied():
            raise ConflictError(
                f"the {self.kind} table at {url} already holds data and conflict_mode is "
                "'fail': use conflict_mode='append' or 'replace', or a new path. Nothing "
                "changed at the destination.",
                destination=url,
                visible=NOTHING_VISIBLE,
            )

    @property
    def checks_partitions(self) -> bool:
        return self.mode == "fail" and self.per_partition

    def check_partition(self, visible, url: str, partition: str) -> None:
        if self.checks_partitions and partition in self.occupied():
            raise partition_conflict(url, partition)

    def replaced(self, visible, partitions: set[str]) -> list[str]:
        return []


class TableJob:
    """Mixed in before an S3 committer class: the table around its tasks. Subclasses read
    the table (:meth:`read_table`), name its partitions holding data (:meth:`occupied_in`)
    and make a file's entry (:meth:`file_entry`, stored under :attr:`entry_key`)."""

    locks_destination = False
    #: "Delta", "Iceberg": how errors name the table
    kind = ""
    #: PendingUpload extraData key of a file's table entry
    entry_key = ""

    def __init__(self, job: JobContext) -> None:
        self.table: Any = None  # the snapshot job setup read (driver), or a task's latest
        self.table_loaded = False
        self._task_entries: dict[str, str] = {}
        super().__init__(job)

    def make_conflict_policy(self) -> DirectoryConflict:
        per_partition = isinstance(super().make_conflict_policy(), PartitionConflict)
        return TableConflict(self.job.conflict_mode, per_partition, self._occupied, self.kind)

    @abstractmethod
    def read_table(self) -> None:
        """Read the table once into ``self.table`` (None: none yet) and set ``table_loaded``."""

    @abstractmethod
    def occupied_in(self, table: Any) -> set[str]:
        """Partition directories of ``table`` holding data (``""``: the whole table)."""

    @abstractmethod
    def file_entry(self, written: WrittenFile) -> str:
        """The table's entry for one file a task wrote (its statistics)."""

    def _occupied(self) -> set[str]:
        self.read_table()
        return self.occupied_in(self.table)

    # -- job setup: the snapshot the table commit will be based on ------------------------------
    def setup_job(self) -> None:
        """Read the table first: data that does not fit it is refused before any upload."""
        if self.job.table_schema is None:  # recovery builds jobs without one; they never set up
            raise InvalidArgumentError(
                f"a {self.kind} job needs its table schema: build it with new_job"
            )
        self.store.check_bucket(self.location.bucket)
        self.read_table()
        super().setup_job()

    # -- task side: entries from the footers the writers kept -----------------------------------
    def commit_task(self, task: TaskAttemptContext, files: list[WrittenFile]) -> dict[str, Any]:
        missing = [f.relpath for f in files if f.footer is None]
        if missing:
            raise CommitError(f"no Parquet footer for {missing[0]!r}: a {self.kind} file needs one")
        self._task_entries = {self.location.key(f.relpath): self.file_entry(f) for f in files}
        return super().commit_task(task, files)

    def save_pendingset(self, pendingset: PendingSet) -> None:
        for commit in pendingset.commits:
            commit.extraData[self.entry_key] = self._task_entries[commit.destinationKey]
        super().save_pendingset(pendingset)

    @property
    def per_partition(self) -> bool:
        return self.conflict.per_partition

    def unmeasured(self, run: Any) -> None:
        """Before the journal: every file carries its entry from its task."""
        missing = [c.destinationKey for c in run.commits if self.entry_key not in c.extraData]
        if missing:
            raise CommitError(f"{missing[0]!r} carries no {self.kind} statistics from its task")
