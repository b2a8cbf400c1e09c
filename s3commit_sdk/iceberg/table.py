"""One job as one Iceberg snapshot, through pyiceberg, on files already completed.

The snapshot is made from the DataFiles the tasks described (statistics and partition values
from their own footers: nothing is read back), in one transaction and one catalog commit:

- ``append``: a fast append (appends never conflict; pyiceberg retries one that lost the race);
- ``replace``: one ``overwrite`` snapshot deleting the files of exactly the partitions written
  (the whole table without ``partition_by`` or with the directory committer) and adding the new
  ones; never an intermediate empty snapshot, as ``dynamic_partition_overwrite`` would leave;
- ``fail``: the same producer deleting nothing, so Iceberg's validation refuses it if files
  landed in its partitions meanwhile.

A replace or fail also checks every snapshot since the one the job read (at job setup) for
files added to its partitions: pyiceberg validates only since the snapshot its transaction
starts from (the paper "A Zero-Rename Committer", "Correctness": exclusivity). The snapshot
summary carries the job id (``s3commit.jobId``), so a retried or recovered commit finds its
snapshot and never adds twice; the first job creates the table in the same catalog commit.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from ..errors import CommitError, InvalidArgumentError
from ..formats import Journal, PendingUpload
from ..paths import S3Location, partition_dir
from ..store import S3Settings
from .catalog import CatalogConfig, load_catalog, redacted_uri
from .schema import TableShape, same_schema, shape_of_table
from .stats import data_file

#: snapshot summary key naming the job that produced a snapshot
JOB_KEY = "s3commit.jobId"
#: journal extraData keys
SHAPE_KEY, CATALOG_KEY, UNIT_KEY = "icebergShape", "icebergCatalog", "icebergReplaces"
#: PendingUpload extraData key of a file's Iceberg entry (statistics, partition values)
ENTRY_KEY = "icebergFile"


def table_url(location: S3Location) -> str:
    return f"s3://{location.bucket}/{location.prefix.rstrip('/')}"


@dataclass(frozen=True)
class IcebergCommit:
    """The snapshot a job produced and how many files it removed from the table."""

    snapshot_id: int
    removed: int
    table: str
    catalog: str

    def describe(self) -> str:
        return f"snapshot {self.snapshot_id} of the Iceberg table {self.table}"

    def fields(self) -> dict[str, Any]:
        """What ``_SUCCESS`` records of it."""
        return {
            "icebergSnapshotId": self.snapshot_id,
            "icebergRemovedFiles": self.removed,
            "icebergTable": self.table,
            "icebergCatalog": self.catalog,
        }


class TableCommitFailed(Exception):
    """The snapshot was certainly not committed; ``conflict``: another writer won."""

    def __init__(self, message: str, conflict: bool) -> None:
        super().__init__(message)
        self.conflict = conflict


@dataclass(frozen=True)
class TablePlan:
    """The Iceberg snapshot of one job, worked out from its journal alone (so ``recover``
    commits exactly what the job would have)."""

    job_id: str
    location: S3Location
    shape: TableShape
    mode: str
    per_partition: bool
    commits: tuple[PendingUpload, ...]

    @classmethod
    def from_journal(cls, journal: Journal, location: S3Location) -> TablePlan:
        extra = journal.extraData
        if not isinstance(extra.get(SHAPE_KEY), str) or UNIT_KEY not in extra:
            raise CommitError(f"the journal of job {journal.jobId} holds no Iceberg snapshot")
        for commit in journal.commits:
            if not isinstance(commit.extraData.get(ENTRY_KEY), str):
                raise CommitError(
                    f"{commit.destinationKey!r} has no Iceberg statistics in the commit journal"
                )
        return cls(
            job_id=journal.jobId,
            location=location,
            shape=TableShape.from_json(extra[SHAPE_KEY]),
            mode=journal.conflictMode,
            per_partition=extra[UNIT_KEY] == "partition",
            commits=tuple(journal.commits),
        )

    @property
    def exclusive(self) -> bool:
        return self.mode in ("replace", "fail")

    @property
    def whole_table(self) -> bool:
        return not (self.per_partition and self.shape.partition_by)

    def data_files(self, spec_id: int) -> list[Any]:
        return [
            data_file(
                c.extraData[ENTRY_KEY],
                f"s3://{c.bucket}/{c.destinationKey}",
                c.length,
                self.shape,
                spec_id,
            )
            for c in self.commits
        ]

    def partitions(self, files: list[Any]) -> set[tuple]:
        return {_comparable(f.partition) for f in files}

    def predicate(self, files: list[Any]):
        """The rows of the partitions this job writes (all rows: the whole table)."""
        from pyiceberg.expressions import AlwaysFalse, AlwaysTrue, And, EqualTo, IsNaN, IsNull, Or

        if self.whole_table:
            return AlwaysTrue()
        names = self.shape.partition_by
        result = AlwaysFalse()
        for values in {tuple(f.partition) for f in files}:
            terms = [
                IsNull(n) if v is None else IsNaN(n) if _is_nan(v) else EqualTo(n, v)
                for n, v in zip(names, values, strict=True)
            ]
            result = Or(result, And(*terms) if len(terms) > 1 else terms[0])
        return result


def _is_nan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)


def _comparable(record: Any) -> tuple:
    """A partition record as a hashable key, NaN equal to NaN as a partition value is."""
    return tuple("NaN" if _is_nan(v) else v for v in record)


class IcebergLog:
    """The Iceberg table of a job: its state in the catalog, and commits of whole jobs."""

    kind = "Iceberg"

    def __init__(self, location: S3Location, settings: S3Settings, catalog: CatalogConfig):
        self.location, self.settings, self.config = location, settings, catalog
        self._catalog: Any = None

    @classmethod
    def from_journal(
        cls, journal: Journal, location: S3Location, settings: S3Settings, options: Any = None
    ) -> IcebergLog:
        """The table a journal's job commits to: the catalog it records, with the URI of
        ``options`` where given (the journal's has no password)."""
        raw = json.loads(journal.extraData.get(CATALOG_KEY) or "{}")
        if not raw.get("table"):
            raise CommitError(f"the journal of job {journal.jobId} names no Iceberg table")
        given = options.iceberg_catalog_uri if options is not None else None
        config = CatalogConfig(
            type=raw.get("type", "sql"),
            uri=given or raw.get("uri"),
            properties=tuple(options.iceberg_catalog) if options is not None else (),
            table=raw["table"],
        )
        return cls(location, settings, config)

    @property
    def catalog(self) -> Any:
        if self._catalog is None:
            self._catalog = load_catalog(self.config, self.settings)
        return self._catalog

    @property
    def name(self) -> str:
        return self.config.table or ""

    def open(self) -> Any:
        """The table, or None where the catalog has none by this name. A table of this name
        at another location is refused: this job would write into another table."""
        from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

        try:
            table = self.catalog.load_table(self.name)
        except (NoSuchTableError, NoSuchNamespaceError):
            return None
        except CommitError:
            raise
        except Exception as exc:  # the catalog's database, server or file IO failed
            raise CommitError(
                f"cannot read the Iceberg table {self.name} from the {self.config.shown()} "
                f"catalog: {type(exc).__name__}: {exc}"
            ) from exc
        if table.location().rstrip("/") != table_url(self.location):
            raise InvalidArgumentError(
                f"the Iceberg table {self.name} lives at {table.location()}, not at "
                f"{self.location.url()}: give the table's own location, or another "
                "iceberg.table"
            )
        return table

    def shape(self, arrow: Any, partition_by: tuple[str, ...]) -> TableShape:
        from .schema import new_table_shape

        table = self.open()
        if table is None:
            return new_table_shape(arrow, partition_by)
        return shape_of_table(table, arrow, partition_by)

    @staticmethod
    def occupied(table: Any, partition_by: tuple[str, ...]) -> set[str]:
        """Partition directories holding data (``""``: an unpartitioned table with data)."""
        if table is None or table.current_snapshot() is None:
            return set()
        files = [task.file for task in table.scan().plan_files()]
        if not partition_by:
            return {""} if files else set()
        return {partition_dir(list(partition_by), list(f.partition)) for f in files}

    # -- commit ---------------------------------------------------------------------------------
    def commit(self, plan: TablePlan) -> IcebergCommit:
        """Commit the job's snapshot; idempotent.

        Raises :class:`TableCommitFailed` when the snapshot certainly did not land, and
        :class:`CommitError` when that cannot be told (the files must then be kept).
        """
        from pyiceberg.exceptions import (
            CommitFailedException,
            CommitStateUnknownException,
            TableAlreadyExistsError,
            ValidationException,
        )

        try:
            table = self.open()
            if table is not None:
                found = self.find(table, plan.job_id)
                if found is not None:
                    return found
            if table is None:
                if plan.shape.exists:
                    raise TableCommitFailed(
                        f"the Iceberg table {self.name} was dropped while this job ran",
                        conflict=True,
                    )
                try:
                    self._create(plan)
                except TableAlreadyExistsError:
                    if plan.mode != "append":
                        raise TableCommitFailed(
                            f"another job created the Iceberg table {self.name} while this one ran",
                            conflict=True,
                        ) from None
                    table = self.open()
                else:
                    table = None
            if table is not None:
                self._change(table, plan)
        except TableCommitFailed:
            raise
        except (CommitFailedException, ValidationException) as lost:
            raise TableCommitFailed(f"{type(lost).__name__}: {lost}", conflict=True) from lost
        except CommitStateUnknownException as unknown:
            return self._settle(plan, unknown)
        except CommitError:
            raise
        except Exception as exc:  # the catalog or the file IO failed mid-way
            return self._settle(plan, exc)
        landed = self.committed(plan.job_id)
        if landed is None:
            raise CommitError(
                f"pyiceberg reported the commit of job {plan.job_id} done, but no snapshot of "
                f"{self.name} names it"
            )
        return landed

    def _create(self, plan: TablePlan) -> None:
        """Create the table and add the job's files in one catalog commit."""
        shape = plan.shape
        self.catalog.create_namespace_if_not_exists(self.config.identifier[0])
        tx = self.catalog.create_table_transaction(
            self.name,
            schema=shape.schema(),
            location=table_url(self.location),
            partition_spec=shape.spec(),
        )
        self._add(tx, plan, [])
        tx.commit_transaction()

    def _change(self, table: Any, plan: TablePlan) -> None:
        if not same_schema(table.schema(), plan.shape.schema()):
            raise TableCommitFailed(
                f"the schema of the Iceberg table {self.name} changed while this job ran",
                conflict=True,
            )
        files = plan.data_files(table.metadata.default_spec_id)
        removed: list[Any] = []
        if plan.exclusive and table.current_snapshot() is not None:
            self._check_since_read(table, plan, files)
            written = plan.partitions(files)
            scan = table.scan(row_filter=plan.predicate(files))
            removed = [
                task.file
                for task in scan.plan_files()
                if plan.whole_table or _comparable(task.file.partition) in written
            ]
            if plan.mode == "fail" and removed:
                where = "the table" if plan.whole_table else "its partitions"
                raise TableCommitFailed(
                    f"files landed in {where} of {self.name} while this job ran", conflict=True
                )
        tx = table.transaction()
        self._add(tx, plan, removed, files)
        tx.commit_transaction()

    def _add(self, tx: Any, plan: TablePlan, removed: list[Any], files: list | None = None):
        files = files if files is not None else plan.data_files(0)
        update = tx.update_snapshot(snapshot_properties={JOB_KEY: plan.job_id})
        if not plan.exclusive:
            with update.fast_append() as append:
                for f in files:
                    append.append_data_file(f)
            return
        with update.overwrite() as overwrite:
            overwrite.delete_by_predicate(plan.predicate(files))
            for f in removed:
                overwrite.delete_data_file(f)
            for f in files:
                overwrite.append_data_file(f)

    def _check_since_read(self, table: Any, plan: TablePlan, files: list[Any]) -> None:
        """Refuse when a snapshot since the job's read added files to what it must be alone
        on (a replace would silently drop them)."""
        from pyiceberg.exceptions import ValidationException
        from pyiceberg.table.update.validate import _validate_added_data_files

        read = plan.shape.read_snapshot
        current = table.current_snapshot()
        if current.snapshot_id == read:
            return
        base = table.snapshot_by_id(read) if read is not None else None
        try:
            _validate_added_data_files(table, current, plan.predicate(files), base)
        except ValidationException as exc:
            raise TableCommitFailed(
                f"a snapshot of {self.name} committed while this job ran added files to "
                f"what it writes ({exc})",
                conflict=True,
            ) from exc

    def _settle(self, plan: TablePlan, cause: Exception) -> IcebergCommit:
        """After a failed commit call: did the snapshot land (a lost answer) or not?"""
        try:
            found = self.committed(plan.job_id)
        except Exception as exc:
            raise CommitError(
                f"committing job {plan.job_id} to the Iceberg table {self.name} failed "
                f"({type(cause).__name__}: {cause}), and checking whether it landed failed "
                f"too ({exc})"
            ) from cause
        if found is not None:
            return found
        raise TableCommitFailed(f"{type(cause).__name__}: {cause}", conflict=False) from cause

    def committed(self, job_id: str) -> IcebergCommit | None:
        """The snapshot holding ``job_id``'s files in the latest table, or None."""
        table = self.open()
        return None if table is None else self.find(table, job_id)

    def find(self, table: Any, job_id: str) -> IcebergCommit | None:
        for snapshot in reversed(table.snapshots()):
            summary = snapshot.summary
            if summary is not None and summary.additional_properties.get(JOB_KEY) == job_id:
                removed = int(summary.additional_properties.get("deleted-data-files", 0))
                return IcebergCommit(snapshot.snapshot_id, removed, self.name, self.config.shown())
        return None

    def journal_catalog(self) -> str:
        """The catalog as the journal records it: type, URI without password, table."""
        return json.dumps(
            {"type": self.config.type, "uri": redacted_uri(self.config.uri), "table": self.name},
            separators=(",", ":"),
        )
