"""One job as one Delta version, through delta-rs (``deltalake``), on files already written.

delta-rs commits ``_delta_log/<version>.json`` with ``If-None-Match: *`` (S3, Ceph RGW): a
commit that finds its version taken re-reads the log, checks for conflicts and retries at the
next version, so concurrent appends all land. Every commit carries the job id in its commit
info and an application transaction ``s3commit-job:<job id>``: a retried commit of the same job
finds that transaction and never adds the files twice. Jobs that must be alone on their
partitions (``replace``, ``fail``) also carry one transaction per partition, so two of them
racing on a partition conflict even where no file was there to remove.

delta-rs's retry does not see that an append landed files in a partition a replace removes
(its removals come from the replace's read snapshot), so exclusive jobs do not let it retry:
they check every version committed since their read themselves and commit on the latest one
(the paper "A Zero-Rename Committer", "Correctness": exclusivity).
"""

from __future__ import annotations

import base64
import json
import math
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar
from urllib.parse import unquote

import deltalake
import pyarrow as pa
from deltalake.exceptions import CommitFailedError, TableNotFoundError
from deltalake.transaction import (
    AddAction,
    CommitProperties,
    RemoveAction,
    Transaction,
    create_table_with_add_actions,
)

from ..credentials import fixed_keys
from ..errors import CommitError, DeltaTableError, InvalidArgumentError, S3CommitError, StoreError
from ..formats import Journal, PendingUpload
from ..paths import S3Location, partition_dir
from ..store import S3Settings, S3Store
from ..streaming.batch import StreamBatch
from .schema import schema_difference

#: commit info key naming the job that produced a version
JOB_KEY = "s3commit.jobId"
#: journal extraData keys
SCHEMA_KEY, READ_VERSION_KEY, UNIT_KEY = "deltaSchema", "deltaReadVersion", "deltaReplaces"
#: PendingUpload extraData key of a file's Delta statistics
STATS_KEY = "deltaStats"
LOG_DIR = "_delta_log"
_GONE = {"NoSuchKey", "404"}
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
#: where delta-rs's error text turns into a Rust backtrace ("   0: <unknown>")
_BACKTRACE = re.compile(r"\n\s*0: ")
#: a log entry's name: ``<version, 20 digits>.json``
_ENTRY_NAME = re.compile(r"\d{20}\.json")
#: how many of the newest log entries are read to find the one delta-rs cannot parse
_ENTRIES_SEARCHED = 100
_Read = TypeVar("_Read")
#: how many times an exclusive job re-checks and retries when its version is taken
_REBASES = 20


def table_uri(location: S3Location) -> str:
    return f"s3://{location.bucket}/{location.prefix}"


def job_app_id(job_id: str) -> str:
    return f"s3commit-job:{job_id}"


def partition_app_id(partition: str) -> str:
    """One per partition (``""``: the whole table) that exclusive jobs claim."""
    return f"s3commit-partition:{partition}"


def storage_options(settings: S3Settings) -> dict[str, str]:
    """delta-rs reads S3 through its own client: the same endpoint and credentials as boto3's.

    Credentials are resolved the way the store resolves them (explicit keys, a provider, the
    profile, the environment or an instance role) and handed over as fixed keys. The log
    entries delta-rs writes get the job's encryption and requester pays (object_store has no
    storage class or canned ACL: those entries get the bucket's defaults).
    """
    options = {
        "AWS_REGION": settings.region or "us-east-1",
        # as many attempts per request as the store makes for a transient error
        "max_retries": str(settings.retry.max_attempts - 1),
        "retry_timeout": f"{math.ceil(settings.retry.max_duration_s)}s",
    }
    if settings.endpoint_url:  # delta-rs takes AWS_ENDPOINT_URL_S3 from the environment first
        options["AWS_ENDPOINT_URL"] = options["AWS_ENDPOINT_URL_S3"] = settings.endpoint_url
        if settings.endpoint_url.startswith("http://"):
            options["AWS_ALLOW_HTTP"] = "true"
    if settings.path_style:
        options["AWS_VIRTUAL_HOSTED_STYLE_REQUEST"] = "false"
    keys = fixed_keys(settings)
    if keys:
        options["AWS_ACCESS_KEY_ID"], options["AWS_SECRET_ACCESS_KEY"] = keys[0], keys[1]
        if keys[2]:
            options["AWS_SESSION_TOKEN"] = keys[2]
    requests = settings.requests
    if requests.customer_key is not None:
        options["aws_server_side_encryption"] = "sse-c"
        options["aws_sse_customer_key_base64"] = base64.b64encode(requests.customer_key).decode()
    elif requests.encryption_algorithm:
        options["aws_server_side_encryption"] = requests.encryption_algorithm
        if requests.kms_key_id:
            options["aws_sse_kms_key_id"] = requests.kms_key_id
    if requests.requester_pays:
        options["aws_request_payer"] = "true"
    return options


@dataclass(frozen=True)
class DeltaCommit:
    """The version a job produced (None: its log entry was cleaned up since) and how many
    files it removed from the table."""

    version: int | None
    removed: int


class TableCommitFailed(Exception):
    """The Delta transaction was certainly not committed; ``conflict``: another writer won."""

    def __init__(self, message: str, conflict: bool) -> None:
        super().__init__(message)
        self.conflict = conflict


@dataclass(frozen=True)
class TablePlan:
    """The Delta transaction of one job, worked out from its journal alone (so ``recover``
    commits exactly what the job would have)."""

    job_id: str
    location: S3Location
    schema: str
    read_version: int | None
    partition_by: tuple[str, ...]
    mode: str
    per_partition: bool
    commits: tuple[PendingUpload, ...]
    #: a stream's micro-batch: its app transaction (stream id, batch id) goes in the same
    #: version, the idempotent-writes convention Delta's own streaming writers follow
    stream: StreamBatch | None = None

    @classmethod
    def from_journal(cls, journal: Journal, location: S3Location) -> TablePlan:
        extra = journal.extraData
        if not isinstance(extra.get(SCHEMA_KEY), str) or UNIT_KEY not in extra:
            raise CommitError(f"the journal of job {journal.jobId} holds no Delta transaction")
        for commit in journal.commits:
            if not isinstance(commit.extraData.get(STATS_KEY), str):
                raise CommitError(
                    f"{commit.destinationKey!r} has no Delta statistics in the commit journal"
                )
        return cls(
            job_id=journal.jobId,
            location=location,
            schema=extra[SCHEMA_KEY],
            read_version=extra.get(READ_VERSION_KEY),
            partition_by=tuple(journal.partitionBy),
            mode=journal.conflictMode,
            per_partition=extra[UNIT_KEY] == "partition",
            commits=tuple(journal.commits),
            stream=StreamBatch.from_fields(extra),
        )

    @property
    def exclusive(self) -> bool:
        """replace and fail must be alone on what they write; append need not be."""
        return self.mode in ("replace", "fail")

    def partitions(self) -> set[tuple[str | None, ...]]:
        return {tuple(c.partition.get(col) for col in self.partition_by) for c in self.commits}

    def adds(self) -> list[AddAction]:
        now = int(time.time() * 1000)
        return [
            AddAction(
                self.location.relative(c.destinationKey),
                c.length,
                {col: c.partition.get(col) for col in self.partition_by},
                now,
                True,
                c.extraData[STATS_KEY],
            )
            for c in self.commits
        ]

    def claims(self) -> list[str]:
        """The partitions (app ids) an exclusive job claims; none for append."""
        if not self.exclusive:
            return []
        if not (self.per_partition and self.partition_by):
            return [partition_app_id("")]
        columns = list(self.partition_by)
        return sorted(partition_app_id(partition_dir(columns, list(v))) for v in self.partitions())

    def properties(self) -> CommitProperties:
        """Exclusive jobs commit on exactly the snapshot they checked: no retry by delta-rs."""
        now = int(time.time() * 1000)
        claims = [Transaction(app, now) for app in self.claims()]
        return CommitProperties(
            custom_metadata={JOB_KEY: self.job_id},
            max_commit_retries=0 if self.exclusive else None,
            app_transactions=[Transaction(job_app_id(self.job_id), 1), *claims, *self.batch()],
        )

    def batch(self) -> list[Transaction]:
        if self.stream is None:
            return []
        return [Transaction(self.stream.query_id, self.stream.batch_id)]

    def touched(self, entry: list[dict[str, Any]]) -> str | None:
        """The partition of this job that a log entry adds or removes files in, if any."""
        written = self.partitions() if self.per_partition and self.partition_by else None
        for action in entry:
            change = action.get("add") or action.get("remove")
            if change is None:
                continue
            values = change.get("partitionValues") or {}
            key = tuple(values.get(col) for col in self.partition_by)
            if written is None or key in written:
                return partition_dir(list(self.partition_by), list(key)) or "the table"
        return None

    def actions(self, table: deltalake.DeltaTable) -> tuple[list, str, list | None]:
        """(actions, mode, partition filters) for ``create_write_transaction`` on ``table``.

        Replacing partitions is an overwrite with partition filters when one conjunction names
        exactly the partitions written (always, with one partition column); otherwise the files
        of those partitions are removed one by one.
        """
        adds = self.adds()
        if self.mode != "replace":
            return adds, "append", None
        if not (self.per_partition and self.partition_by):
            return adds, "overwrite", None
        written = self.partitions()
        if not written:
            return adds, "append", None
        columns = [
            sorted({values[i] or "" for values in written}) for i in range(len(self.partition_by))
        ]
        if math.prod(len(c) for c in columns) == len(written):
            filters = [
                (col, "in", values) for col, values in zip(self.partition_by, columns, strict=True)
            ]
            return adds, "overwrite", filters
        return _removals(table, self.partition_by, written) + adds, "append", None


def _removals(
    table: deltalake.DeltaTable, columns: tuple[str, ...], written: Iterable[tuple]
) -> list[RemoveAction]:
    """The active files of exactly the ``written`` partitions, as remove actions.

    Files are matched by the partition values of their add actions, typed by the table, never
    by their directory: another writer may escape a value differently (``a=x%20y`` where Spark
    writes ``a=x y``). The job's values (Spark's text of each) are cast to the same types. The
    log's paths are percent-encoded, actions take the plain ones.
    """
    actions = pa.table(table.get_add_actions(flatten=True))
    found = [actions.column(f"partition.{c}") for c in columns]
    texts = list(written)
    typed = [_typed(column.type, [t[i] for t in texts]) for i, column in enumerate(found)]
    values = {
        tuple(_comparable(v) for v in key): dict(zip(columns, text, strict=True))
        for key, text in zip(zip(*typed, strict=True), texts, strict=True)
    }
    now = int(time.time() * 1000)
    removes = []
    paths, sizes = (actions.column(c).to_pylist() for c in ("path", "size_bytes"))
    for path, size, *key in zip(paths, sizes, *(c.to_pylist() for c in found), strict=True):
        partition = values.get(tuple(_comparable(v) for v in key))
        if partition is not None:
            removes.append(RemoveAction(unquote(path), True, now, size, partition))
    return removes


def _typed(arrow_type: pa.DataType, texts: list[str | None]) -> list[Any]:
    """Partition values as Spark's text renders them, in the table's type for the column."""
    return pa.array(texts, pa.string()).cast(arrow_type).to_pylist()


def _comparable(value: Any) -> Any:
    """NaN equal to NaN, as a partition value is."""
    return "NaN" if isinstance(value, float) and math.isnan(value) else value


def _one_line(error: Exception) -> str:
    """delta-rs's multi-line, colour-coded error text as one plain line, its Rust backtrace
    left out."""
    message = _BACKTRACE.split(_ANSI.sub("", str(error)), maxsplit=1)[0]
    text = " ".join(message.replace("↳", " ").split())
    return f"{type(error).__name__}: {text[:400]}"


def _json_lines(body: bytes) -> list[dict[str, Any]] | None:
    """A log entry's actions; None if it is not JSON lines (truncated, garbled)."""
    try:
        actions = [json.loads(line) for line in body.decode().splitlines() if line.strip()]
    except ValueError:  # UnicodeDecodeError and json.JSONDecodeError both are
        return None
    return actions if all(isinstance(a, dict) for a in actions) else None


class DeltaLog:
    """The Delta table at a destination: its state, and commits of whole jobs."""

    def __init__(self, location: S3Location, settings: S3Settings, store: S3Store) -> None:
        self.location, self.settings, self.store = location, settings, store
        self.uri = table_uri(location)
        self._options: dict[str, str] | None = None

    @property
    def options(self) -> dict[str, str]:
        if self._options is None:
            self._options = storage_options(self.settings)
        return self._options

    def open(self, version: int | None = None) -> deltalake.DeltaTable | None:
        """The table (at ``version``, else the latest), or None where there is none yet.

        Any other failure of delta-rs is a :class:`DeltaTableError` naming the table, the log
        entry at fault where one does not parse, and the cause's first line.
        """
        try:
            return deltalake.DeltaTable(self.uri, version=version, storage_options=self.options)
        except TableNotFoundError:
            return None
        except Exception as exc:  # DeltaError (a corrupted entry, a store failure), a panic
            raise self.unreadable(exc) from exc

    def unreadable(self, cause: Exception, entry: str | None = None) -> DeltaTableError:
        """The typed error for a log that delta-rs (or :meth:`find`) cannot read: the table,
        the entry at fault (``entry``, else the newest of the last ``_ENTRIES_SEARCHED`` that
        is not JSON lines, if any), the cause's first line and the remedy."""
        url = self.location.url()
        try:
            keys = self._log_keys()
            entry = entry or self._unparsable(keys[-_ENTRIES_SEARCHED:])
        except S3CommitError:  # the log cannot be listed: the error names no entry
            keys = []
        if entry is None:
            where, remedy = "", "Repair the table's _delta_log (or restore it from a backup)"
        else:
            where = f": its log entry {entry!r} is not valid JSON lines"
            remedy = (
                "Restore that entry from a backup, or have the writer that wrote it write it again"
            )
            if keys and entry == keys[-1]:
                remedy += (
                    " (deleting it, the newest entry, returns the table to its previous version)"
                )
        return DeltaTableError(
            f"cannot read the Delta table at {url}{where} ({_one_line(cause)}). {remedy}.",
            entry=entry,
            destination=url,
        )

    def _log_keys(self) -> list[str]:
        """The keys of the log's JSON entries, oldest first."""
        prefix = self.location.key(f"{LOG_DIR}/")
        return sorted(
            o.key
            for o in self.store.list_objects(self.location.bucket, prefix)
            if _ENTRY_NAME.fullmatch(o.key[len(prefix) :])
        )

    def _unparsable(self, keys: list[str]) -> str | None:
        """The newest of ``keys`` whose entry is not JSON lines, or None."""
        for key in reversed(keys):
            if _json_lines(self.store.get(self.location.bucket, key)) is None:
                return key
        return None

    @staticmethod
    def occupied(table: deltalake.DeltaTable | None) -> set[str]:
        """Partition directories holding data (``""``: an unpartitioned table with data)."""
        if table is None:
            return set()
        columns = list(table.metadata().partition_columns)
        if not columns:
            return {""} if table.file_uris() else set()
        return {partition_dir(columns, [p.get(c) for c in columns]) for p in table.partitions()}

    def check_fits(self, table: deltalake.DeltaTable, schema: str, partition_by: tuple) -> None:
        """Refuse, before anything is uploaded, data that does not fit the existing table."""
        columns = tuple(table.metadata().partition_columns)
        if columns != tuple(partition_by):
            raise InvalidArgumentError(
                f"the Delta table at {self.location.url()} is partitioned by {list(columns)}, "
                f"this job by {list(partition_by)}: give partition_by={list(columns)}"
            )
        difference = schema_difference(table.schema().to_json(), schema)
        if difference:
            raise InvalidArgumentError(
                f"the data does not fit the Delta table at {self.location.url()}: {difference}"
            )

    # -- commit ---------------------------------------------------------------------------------
    def commit(self, plan: TablePlan, table: deltalake.DeltaTable | None) -> DeltaCommit:
        """Commit the job's transaction; idempotent. ``table``: the plan's read snapshot, if held.

        Raises :class:`TableCommitFailed` when the transaction certainly did not land, and
        :class:`CommitError` when that cannot be told (the files must then be kept).
        """
        try:
            self._write(plan, table)
        except TableCommitFailed:
            raise
        except DeltaTableError as unreadable:  # read before the transaction was sent
            raise TableCommitFailed(str(unreadable), conflict=False) from unreadable
        except Exception as exc:  # delta-rs raises DeltaError, OSError, ... for store failures
            return self._settle(plan, exc)
        found = self.find(plan.job_id, plan.read_version)
        if found is None:
            raise CommitError(
                f"delta-rs reported the commit of job {plan.job_id} done, but no version of "
                f"{self.uri} after {plan.read_version} names it"
            )
        return found

    def _write(self, plan: TablePlan, table: deltalake.DeltaTable | None) -> None:
        schema = deltalake.Schema.from_json(plan.schema)
        if plan.read_version is None:
            try:
                create_table_with_add_actions(
                    self.uri,
                    schema,
                    plan.adds(),
                    mode="error",
                    partition_by=list(plan.partition_by),
                    storage_options=self.options,
                    commit_properties=plan.properties(),
                )
                return
            except Exception as failed:
                table = self._read_after(failed, self.open)
                if table is None or table.transaction_version(job_app_id(plan.job_id)):
                    raise  # settled by the caller
            if plan.mode != "append":
                raise TableCommitFailed(
                    f"another job created the Delta table at {self.uri} while this one ran",
                    conflict=True,
                )
            self.check_fits(table, plan.schema, plan.partition_by)
        elif plan.exclusive:
            self._commit_alone(plan, plan.read_version, schema)
            return
        elif table is None or table.version() != plan.read_version:
            table = self.open(plan.read_version)
        self._transaction(plan, table, schema)

    def _transaction(
        self, plan: TablePlan, table: deltalake.DeltaTable, schema: deltalake.Schema
    ) -> None:
        actions, mode, filters = plan.actions(table)
        table.create_write_transaction(
            actions,
            mode=mode,
            schema=schema,
            partition_by=list(plan.partition_by),
            partition_filters=filters,
            commit_properties=plan.properties(),
        )

    def _commit_alone(self, plan: TablePlan, checked: int, schema: deltalake.Schema) -> None:
        """Commit on the latest version once no version since ``checked`` (the job's read)
        touched what it writes; a version taken meanwhile is checked the same way, up to
        ``_REBASES`` times."""
        for _ in range(_REBASES):
            table = self.open()
            if table is None:
                raise TableCommitFailed(f"{self.uri} was deleted while this job ran", conflict=True)
            for version in range(checked + 1, table.version() + 1):
                partition = plan.touched(self._entry(version) or [])
                if partition is not None:
                    raise TableCommitFailed(
                        f"version {version} of {self.uri} changed {partition} while this job ran",
                        conflict=True,
                    )
            checked = table.version()
            try:
                self._transaction(plan, table, schema)
                return
            except CommitFailedError as failed:
                landed = partial(self.committed, plan.job_id, plan.read_version)
                if self._read_after(failed, landed) is not None:
                    return  # the answer was lost, the commit was not
        raise TableCommitFailed(
            f"{self.uri} got {_REBASES} new versions while this job tried to commit", conflict=True
        )

    @staticmethod
    def _read_after(failed: Exception, read: Callable[[], _Read]) -> _Read:
        """``read()`` after a commit call failed with ``failed``. If the log cannot be read,
        ``failed`` is raised again: whether the call landed is for :meth:`_settle`."""
        try:
            return read()
        except DeltaTableError:
            raise failed from None

    def _settle(self, plan: TablePlan, cause: Exception) -> DeltaCommit:
        """After a failed commit call: did the transaction land (a lost answer) or not?"""
        try:
            found = self.committed(plan.job_id, plan.read_version)
        except DeltaTableError as unreadable:  # delta-rs cannot read the log: read it here
            found = self._found_in_entries(plan, cause, unreadable)
            if found is None:
                raise TableCommitFailed(str(unreadable), conflict=False) from unreadable
            return found
        except Exception as exc:
            raise CommitError(
                f"committing job {plan.job_id} to the Delta table {self.uri} failed "
                f"({_one_line(cause)}), and checking whether it landed failed too ({exc})"
            ) from cause
        if found is not None:
            return found
        conflict = isinstance(cause, CommitFailedError)
        raise TableCommitFailed(_one_line(cause), conflict) from cause

    def committed(self, job_id: str, after: int | None) -> DeltaCommit | None:
        """The version holding ``job_id``'s transaction in the latest table, or None."""
        table = self.open()
        if table is None or table.transaction_version(job_app_id(job_id)) is None:
            return None
        return self.find(job_id, after) or DeltaCommit(None, 0)

    def _found_in_entries(
        self, plan: TablePlan, cause: Exception, unreadable: DeltaTableError
    ) -> DeltaCommit | None:
        """Whether the job's transaction landed, from the log entries after its read, where
        delta-rs cannot read the log: an entry that is not JSON lines is no commit of ours
        (delta-rs wrote it as JSON). With an entry missing among them, or the log unreadable
        here too, it cannot be told: :class:`DeltaTableError`, the files to be kept."""
        after = -1 if plan.read_version is None else plan.read_version
        try:
            since = [v for v in (int(key[-25:-5]) for key in self._log_keys()) if v > after]
            if since == list(range(after + 1, after + 1 + len(since))):
                return self.find(plan.job_id, plan.read_version, skip_unparsable=True)
        except S3CommitError:  # the entries cannot be listed or read either
            pass
        raise DeltaTableError(
            f"committing job {plan.job_id} to the Delta table {self.uri} failed "
            f"({_one_line(cause)}), and whether it landed cannot be told: {unreadable}",
            entry=unreadable.entry,
            destination=unreadable.destination,
        ) from cause

    def find(
        self, job_id: str, after: int | None, skip_unparsable: bool = False
    ) -> DeltaCommit | None:
        """Read log entries from ``after + 1`` on until one names ``job_id`` (None at the end).
        ``skip_unparsable``: an entry that is not JSON lines is passed over (no job of ours
        wrote it), else it raises :class:`DeltaTableError`."""
        version = 0 if after is None else after + 1
        while True:
            try:
                entry = self._entry(version)
            except DeltaTableError:
                if not skip_unparsable:
                    raise
                entry = []
            if entry is None:
                return None
            info = next((a["commitInfo"] for a in entry if "commitInfo" in a), {})
            if info.get(JOB_KEY) == job_id:
                return DeltaCommit(version, sum(1 for a in entry if "remove" in a))
            version += 1

    def _entry(self, version: int) -> list[dict[str, Any]] | None:
        """The actions of log entry ``version``; None if there is none."""
        key = self.location.key(f"{LOG_DIR}/{version:020d}.json")
        try:
            body = self.store.get(self.location.bucket, key)
        except StoreError as exc:
            if exc.code in _GONE:
                return None
            raise
        actions = _json_lines(body)
        if actions is None:
            raise self.unreadable(ValueError(f"version {version} is not JSON lines"), key)
        return actions
