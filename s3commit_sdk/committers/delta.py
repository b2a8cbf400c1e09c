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
from ..errors import NOTHING_VISIBLE, CommitError, ConcurrentCommitError, DeltaTableError
from ..protocol import JobContext, WrittenFile
from ..stages import Stage, add_stage
from .commit_run import CommitRun
from .magic import MagicCommitter
from .s3_rollback import (
    abort_before_completion,
    interrupted_after_completion,
    roll_back,
    rolled_back_fields,
)
from .s3_stages import S3_STAGES
from .staging import DirectoryStagingCommitter, PartitionedStagingCommitter
from .table_job import TableJob


# -- the Delta stages of job commit ------------------------------------------------------------
def prepare_table(run: CommitRun) -> None:
    """Before the journal: every file carries its statistics, and the journal records what the
    transaction needs (schema, the version it is based on, the unit of conflict)."""
    committer = run.committer
    committer.unmeasured(run)
    committer.read_table()
    run.journal_extra = {
        SCHEMA_KEY: committer.commit_schema,
        READ_VERSION_KEY: committer.read_version,
        UNIT_KEY: "partition" if committer.per_partition else "table",
    }


def commit_table(run: CommitRun) -> None:
    """The one step that makes the job visible: one Delta transaction adding every file (and
    removing the replaced ones). ``s3commit recover`` runs it too; it never commits twice."""
    committer, url, job_id = run.committer, run.location.url(), run.job.job_id
    plan = TablePlan.from_journal(run.require_journal(), run.location)
    try:
        delta = committer.log.commit(plan, committer.table)
    except TableCommitFailed as failed:
        visible, state = roll_back(run, run.commits)
        if isinstance(failed.__cause__, DeltaTableError):  # the log could not be read
            raise DeltaTableError(
                f"job {job_id}: {failed} The job was rolled back: nothing of it is in the "
                f"Delta table. {state}",
                entry=failed.__cause__.entry,
                **rolled_back_fields(run, visible),
            ) from failed.__cause__
        error = ConcurrentCommitError if failed.conflict else CommitError
        what = (
            "another writer's commit to the Delta table conflicts with it"
            if failed.conflict
            else "committing it to the Delta table failed"
        )
        raise error(
            f"job {job_id}: {what} ({failed}). It was rolled back: the Delta "
            f"table at {url} stays at its previous version. {state}",
            **rolled_back_fields(run, visible),
        ) from failed
    except CommitError as unknown:
        unknown.add_note(
            f"s3commit: job {job_id} completed its files at {url} (no Delta reader sees them "
            "unless the transaction landed); they are kept. "
            f"`s3commit recover {url}` commits the transaction if it is "
            f"missing (never twice); `s3commit abort {url}` deletes them."
        )
        unknown.remedy = f"s3commit recover {url}"
        raise
    committer.delta = delta
    run.table_fields = {"deltaVersion": delta.version, "deltaRemovedFiles": delta.removed}


#: the S3 committers' stages with the Delta transaction added
DELTA_STAGES = add_stage(
    add_stage(
        S3_STAGES,
        Stage("prepare_table", prepare_table, None, abort_before_completion),
        before="take_marker",
    ),
    Stage("delta_commit", commit_table, "delta_commit", interrupted_after_completion),
    after="delete_replaced",
)


class DeltaJob(TableJob):
    """Mixed in before an S3 committer class: the Delta table around its tasks, and the Delta
    stages of its job commit (:data:`DELTA_STAGES`)."""

    stages = DELTA_STAGES
    kind = "Delta"
    entry_key = STATS_KEY

    def __init__(self, job: JobContext) -> None:
        self.commit_schema = job.table_schema
        self.delta: DeltaCommit | None = None
        super().__init__(job)
        self.log = DeltaLog(self.location, job.settings, self.store)

    def read_table(self) -> None:
        """Read the table once: at job setup (the snapshot the transaction is based on), at a
        task's first conflict check, or at job commit if setup ran in another process (Spark's
        data source API sets up in one Python worker and commits in another)."""
        if self.table_loaded:
            return
        try:
            table = self.log.open()
        except DeltaTableError as unreadable:  # before the transaction: nothing committed
            raise DeltaTableError(
                f"{unreadable} Nothing of job {self.job.job_id} was committed: the Delta table "
                "is unchanged.",
                entry=unreadable.entry,
                **self.error_fields(NOTHING_VISIBLE, None),
            ) from unreadable.__cause__
        if table is not None:
            self.log.check_fits(table, self.job.table_schema, self.job.partition_by)
            self.commit_schema = table.schema().to_json()  # the table's own, byte for byte
        self.table, self.table_loaded = table, True

    def occupied_in(self, table) -> set[str]:
        return self.log.occupied(table)

    @property
    def read_version(self) -> int | None:
        return self.table.version() if self.table is not None else None

    def file_entry(self, written: WrittenFile) -> str:
        return file_stats(written.footer)


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
