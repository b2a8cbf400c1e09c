"""The S3 committers writing an Iceberg table: one committed job is one Iceberg snapshot.

Tasks are the committers' own (staging or magic); they write Parquet carrying the table's
field ids and partition columns, and record each file's Iceberg entry (statistics from its
footer, partition values passed explicitly) in their pendingsets. Job commit completes every
upload first (files no Iceberg reader sees until a snapshot names them), then commits one
snapshot through the catalog (iceberg/table.py), then cleans up and writes ``_SUCCESS`` with the
snapshot id. A failed commit rolls the job back: completed files deleted, uploads aborted, the
table at its previous snapshot. A job that died in between is what ``s3commit recover`` /
``abort`` find by its journal (recovery.py), as for Delta.
"""

from __future__ import annotations

from typing import Any

from ..errors import NOTHING_VISIBLE, CommitError, ConcurrentCommitError
from ..iceberg.catalog import CatalogConfig
from ..iceberg.schema import TableShape, same_schema
from ..iceberg.stats import file_entry
from ..iceberg.table import (
    CATALOG_KEY,
    ENTRY_KEY,
    SHAPE_KEY,
    UNIT_KEY,
    IcebergCommit,
    IcebergLog,
    TableCommitFailed,
    TablePlan,
)
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


def prepare_table(run: CommitRun) -> None:
    """Before the journal: every file carries its entry, and the journal records the shape
    the tasks wrote against, the catalog and the unit of conflict."""
    committer = run.committer
    committer.unmeasured(run)
    run.journal_extra = {
        SHAPE_KEY: committer.job.table_schema,
        CATALOG_KEY: committer.log.journal_catalog(),
        UNIT_KEY: "partition" if committer.per_partition else "table",
    }


def commit_snapshot(run: CommitRun) -> None:
    """The one step that makes the job visible: one Iceberg snapshot adding every file (and
    deleting the replaced ones). ``s3commit recover`` runs it too; it never commits twice."""
    committer, url, job_id = run.committer, run.location.url(), run.job.job_id
    journal = run.require_journal()
    plan = TablePlan.from_journal(journal, run.location)
    log = IcebergLog.from_journal(journal, run.location, run.job.settings, run.job.options)
    try:
        snapshot = log.commit(plan)
    except TableCommitFailed as failed:
        visible, state = roll_back(run, run.commits)
        error = ConcurrentCommitError if failed.conflict else CommitError
        what = (
            "another writer's commit to the Iceberg table conflicts with it"
            if failed.conflict
            else "committing it to the Iceberg table failed"
        )
        raise error(
            f"job {job_id}: {what} ({failed}). It was rolled back: the Iceberg table "
            f"{log.name} stays at its previous snapshot. {state}",
            **rolled_back_fields(run, visible),
        ) from failed
    except CommitError as unknown:
        unknown.add_note(
            f"s3commit: job {job_id} completed its files at {url} (no Iceberg reader sees "
            "them unless the snapshot landed); they are kept. "
            f"`s3commit recover {url}` commits the snapshot if it is missing (never twice); "
            f"`s3commit abort {url}` deletes them."
        )
        unknown.remedy = f"s3commit recover {url}"
        raise
    committer.snapshot = snapshot
    run.table_fields = snapshot.fields()


#: the S3 committers' stages with the Iceberg snapshot added
ICEBERG_STAGES = add_stage(
    add_stage(
        S3_STAGES,
        Stage("prepare_table", prepare_table, None, abort_before_completion),
        before="take_marker",
    ),
    Stage("iceberg_commit", commit_snapshot, "iceberg_commit", interrupted_after_completion),
    after="delete_replaced",
)


class IcebergJob(TableJob):
    """Mixed in before an S3 committer class: the Iceberg table around its tasks, and the
    Iceberg stages of its job commit (:data:`ICEBERG_STAGES`)."""

    stages = ICEBERG_STAGES
    kind = "Iceberg"
    entry_key = ENTRY_KEY

    def __init__(self, job: JobContext) -> None:
        self.shape = TableShape.from_json(job.table_schema) if job.table_schema else None
        self.snapshot: IcebergCommit | None = None
        super().__init__(job)
        catalog = CatalogConfig.of(job.options, self.location)
        self.log = IcebergLog(self.location, job.settings, catalog)

    def read_table(self) -> None:
        """Read the table once (job setup, a task's first conflict check); a table whose
        schema changed since the job's shape was fixed is refused before any upload."""
        if self.table_loaded:
            return
        table, shape = self.log.open(), self.shape
        dropped = shape is not None and shape.exists and table is None
        altered = table is not None and shape is not None
        if dropped or (altered and not same_schema(table.schema(), shape.schema())):
            raise ConcurrentCommitError(
                f"the Iceberg table {self.log.name} changed (created, dropped or its schema "
                f"altered) since job {self.job.job_id} read it: run the write again",
                **self.error_fields(NOTHING_VISIBLE, None),
            )
        self.table, self.table_loaded = table, True

    def occupied_in(self, table: Any) -> set[str]:
        return self.log.occupied(table, self.job.partition_by)

    def file_entry(self, written: WrittenFile) -> str:
        assert self.shape is not None
        return file_entry(written.footer, written.values, self.shape)


class IcebergDirectoryCommitter(IcebergJob, DirectoryStagingCommitter):
    """The directory committer writing an Iceberg table; its unit of conflict is the table."""


class IcebergPartitionedCommitter(IcebergJob, PartitionedStagingCommitter):
    """The partitioned committer writing an Iceberg table; replace replaces partitions."""


class IcebergMagicCommitter(IcebergJob, MagicCommitter):
    """The magic committer writing an Iceberg table; per partition when partitioned."""


ICEBERG_COMMITTERS = {
    "directory": IcebergDirectoryCommitter,
    "partitioned": IcebergPartitionedCommitter,
    "magic": IcebergMagicCommitter,
}
