"""``write_committed``: validate, choose committer and engine, run the job, return the result."""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import pyarrow as pa

from .committers import check_committer
from .committers.staging import usable_buffer_dir
from .credentials import CredentialsProvider
from .delta.schema import delta_table_schema
from .engines.connect import (
    connect_conf,
    is_connect_dataframe,
    require_connect_support,
    run_connect_tasks,
)
from .engines.local import run_local_tasks, to_arrow
from .engines.spark import is_spark_dataframe, run_spark_tasks, spark_conf, spark_schema_to_arrow
from .errors import InvalidArgumentError, InvalidPathError, S3CommitError, for_humans
from .formats import CommittedFile, SuccessDocument
from .listeners import make_listener
from .options import (
    CONFLICT_MODES,
    OUTPUT_FORMATS,
    S3_COMMITTERS,
    SAVE_MODES,
    CommitterName,
    ConflictMode,
    Engine,
    OutputFormat,
    check_choice,
    check_combination,
    option_spec,
    resolve_options,
    spark_conf_defaults,
)
from .paths import (
    HIVE_DEFAULT_PARTITION,
    S3Location,
    is_hidden,
    parse_destination,
)
from .progress import ProgressCallback, ProgressTracker, job_seconds
from .protocol import JobContext
from .python_decimals import python_decimals
from .runner import execute_job
from .schema_check import checked_job
from .sparktypes import check_schema, file_schema
from .store import S3Settings, open_store
from .streaming.batch import StreamBatch
from .uploads import read_success
from .writers import file_format


@dataclass
class WriteResult:
    """What a committed write produced; ``success`` is its ``_SUCCESS`` document (also when
    the destination holds the classic committer's 0-byte marker or none at all)."""

    job_id: str
    committer: str
    destination: str
    files: list[CommittedFile]
    success: SuccessDocument
    rows: int
    bytes: int
    duration_s: float
    phases: dict[str, float] = field(default_factory=dict)
    requests: dict[str, int] = field(default_factory=dict)
    #: a stream's micro-batch that an earlier attempt had committed (or begun to commit, and
    #: this call finished): nothing was added twice; the figures are the batch's commit
    replayed: bool = False

    @classmethod
    def from_success(cls, doc: SuccessDocument) -> WriteResult:
        """The result a committed job recorded in its ``_SUCCESS`` document."""
        phases = dict(doc.durations)
        return cls(
            job_id=doc.job_id,
            committer=doc.committer,
            destination=doc.destination,
            files=list(doc.files),
            success=doc,
            rows=doc.rows,
            bytes=doc.bytes,
            duration_s=job_seconds(phases),
            phases=phases,
            requests=dict(doc.requests),
        )

    def __repr__(self) -> str:
        return (
            f"WriteResult(committer={self.committer!r}, destination={self.destination!r}, "
            f"files={len(self.files)}, rows={self.rows}, bytes={self.bytes}, "
            f"duration_s={self.duration_s:.2f})"
        )

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        """In a notebook kernel the ``SuccessReport`` of this write; plain text elsewhere."""
        if "ipykernel" in sys.modules:
            try:
                from .widgets import SuccessReport
            except ImportError:  # ipywidgets not installed
                pass
            else:
                return SuccessReport(self)._repr_mimebundle_(include=include, exclude=exclude)
        return {"text/plain": repr(self)}


def write_committed(
    df: Any,
    path: str,
    *,
    committer: CommitterName = "partitioned",
    partition_by: Sequence[str] | str | None = None,
    conflict_mode: ConflictMode | None = None,
    format: OutputFormat = "parquet",
    options: Mapping[str, Any] | None = None,
    progress: str | bool | ProgressCallback | None = "auto",
    credentials_provider: CredentialsProvider | None = None,
    stream: StreamBatch | None = None,
) -> WriteResult:
    """Write ``df`` to ``path`` through a zero-rename committer; nothing is visible until done.

    ``df`` is a pyspark DataFrame (tasks run on the executors) or a pandas DataFrame / pyarrow
    Table (tasks run in this process). Everything after ``path`` is keyword-only; argument
    errors raise before anything is uploaded, naming the nearest committer, format, conflict
    mode or option to a misspelt one. ``options``: see :data:`s3commit_sdk.options.REGISTRY`.
    ``progress``: "auto" (a widget in a notebook front end, tqdm on a terminal, text lines in
    papermill, nbconvert and logs), "widget", "text", False, or a callable receiving
    :class:`~s3commit_sdk.progress.ProgressEvent`.
    Errors are typed (:class:`~s3commit_sdk.errors.S3CommitError`) and say what is visible and
    what to do; Spark's own error is kept on their ``engine_error`` rather than chained.
    ``credentials_provider``: S3 credentials for every task where the environment has none, a
    callable or ``"module:function"`` (see :mod:`s3commit_sdk.credentials`).
    ``stream``: this write is micro-batch ``StreamBatch(query_id, batch_id)`` of a stream (in
    ``foreachBatch``; :func:`s3commit_sdk.streaming.exactly_once` builds the function): it
    commits exactly once however often the batch is replayed (``result.replayed``).
    """
    spark = is_spark_dataframe(df)
    connect = spark and is_connect_dataframe(df)
    if connect:
        require_connect_support(df)
    conf = (connect_conf(df) if connect else spark_conf(df)) if spark else None
    converting = time.monotonic()
    table = None if spark else _local_input(df)
    # pandas -> Arrow can take seconds on a large frame: its own phase, before job setup
    prepared = {} if spark else {"prepare_input": time.monotonic() - converting}
    job = new_job(
        path,
        committer=committer,
        partition_by=partition_by,
        conflict_mode=conflict_mode,
        format=format,
        options=options,
        schema=spark_schema_to_arrow(df) if spark else table.schema,
        conf=conf,
        credentials_provider=credentials_provider,
        check_local_dirs=not connect,
        stream=stream,
    )
    job = checked_job(job)  # reads the destination: after every argument is checked
    tracker = ProgressTracker(make_listener(progress, f"s3commit write to {job.location.url()}"))
    if connect:
        run_tasks = partial(run_connect_tasks, df)
    elif spark:
        run_tasks = partial(run_spark_tasks, df)
    else:
        run_tasks = partial(run_local_tasks, table)
    try:
        outcome = execute_job(job, run_tasks, tracker, before=prepared)
    except (S3CommitError, KeyboardInterrupt) as exc:
        raise for_humans(exc)  # noqa: B904 (the chain is what for_humans decides on)
    return WriteResult(
        job_id=job.job_id,
        committer=committer,
        destination=job.location.url(),
        files=outcome.files,
        success=outcome.success,
        rows=outcome.success.rows,  # a replayed batch's record lists up to 1,000 of its files
        bytes=outcome.success.bytes,
        duration_s=job_seconds(outcome.phases),
        phases=outcome.phases,
        requests=outcome.requests,
        replayed=outcome.replayed,
    )


def check_destination(path: str, options: Mapping[str, Any] | None = None) -> None:
    """Fail now, as a write to ``path`` would at job setup, if its bucket does not exist or
    refuses these credentials (``StoreError`` naming the bucket); a malformed path raises
    ``InvalidPathError``. For batch runs that should stop before computing anything."""
    location = parse_destination(path)
    if isinstance(location, S3Location):
        open_store(options, threads=1).check_bucket(location.bucket)


def read_result(path: str, options: Mapping[str, Any] | None = None) -> WriteResult:
    """The last job committed at the S3 destination ``path``, read from its ``_SUCCESS``.

    How a ``df.write.format("s3commit")...save(path)`` learns its result: Spark commits the
    job in another process, which persists the result there. ``options``: S3 options
    (``endpoint``, ``access.key``, ...) as ``write_committed`` takes them.
    """
    doc = read_success(path, dict(options) if options else None)
    if doc is None:
        raise InvalidArgumentError(
            f"{path} holds the classic committer's empty _SUCCESS, which records no result"
        )
    return WriteResult.from_success(doc)


def new_job(
    path: str,
    *,
    committer: CommitterName,
    partition_by: Sequence[str] | str | None,
    conflict_mode: ConflictMode | None,
    format: OutputFormat,
    options: Mapping[str, Any] | None,
    schema: pa.Schema,
    conf: Mapping[str, str] | None,
    credentials_provider: CredentialsProvider | None = None,
    default_conflict_mode: ConflictMode = "fail",
    check_local_dirs: bool = True,
    stream: StreamBatch | None = None,
) -> JobContext:
    """Validate every argument of a write, before anything is uploaded; the job they describe.

    ``conf`` is the Spark session's conf, or None for in-process input. Shared by
    ``write_committed`` and the ``s3commit`` Spark data source, whose save mode is its
    ``default_conflict_mode``: the mode where neither ``conflict_mode`` nor the option is given.
    ``check_local_dirs``: check ``buffer.dir`` here (this process is Spark's driver or runs the
    tasks itself); False for a Spark Connect client, whose disks are not the tasks' (the tasks
    then check it, with the same typed error). ``stream``: the micro-batch the job is (an
    append by an S3 committer, whose job id is the batch's).
    """
    check_committer(committer)
    if stream is not None:
        default_conflict_mode = _check_stream(stream, committer, conflict_mode)
    check_choice("format", format, OUTPUT_FORMATS)
    engine: Engine = "local" if conf is None else "spark"
    resolved = resolve_options(options, None if conf is None else spark_conf_defaults(conf))
    mode = _conflict_mode(conflict_mode, resolved.conflict_mode) or default_conflict_mode
    check_combination(
        resolved, options, committer=committer, format=format, engine=engine, conflict_mode=mode
    )
    if check_local_dirs and committer in option_spec("buffer.dir").committers:
        usable_buffer_dir(resolved.buffer_dir)
    location = parse_destination(path)
    if committer in S3_COMMITTERS and not isinstance(location, S3Location):
        raise InvalidPathError(
            f"committer {committer!r} writes to S3: use an s3:// destination, or "
            "committer='manifest' / 'file' for a store with rename such as file://"
        )
    columns = _partition_columns(partition_by)
    if engine == "spark" and getattr(location, "scheme", "") == "memory":
        raise InvalidPathError(
            "memory:// lives inside one Python process; Spark tasks run in other "
            "processes: use file:// or s3:// with a Spark DataFrame"
        )
    case_sensitive = (conf or {}).get("spark.sql.caseSensitive", "false").lower() == "true"
    check_schema(schema, columns, file_format(format), case_sensitive)
    settings = S3Settings.resolve(resolved, provider=credentials_provider)
    table = None
    if format == "delta":
        table = delta_table_schema(schema, columns, committer)
    elif format == "iceberg":
        table = iceberg_table_shape(location, resolved, settings, schema, columns, committer)
    data = file_schema(pa.schema([f for f in schema if f.name not in columns]))
    return JobContext(
        location=location,
        committer=committer,
        conflict_mode=mode,
        partition_by=columns,
        format=format,
        options=resolved,
        settings=settings,
        table_schema=table,
        data_schema=data,
        **({} if stream is None else stream_job_fields(stream)),
    )


def _check_stream(stream: object, committer: str, conflict_mode: object) -> ConflictMode:
    """A micro-batch appends through an S3 committer: its conflict mode, refused otherwise."""
    if not isinstance(stream, StreamBatch):
        raise InvalidArgumentError(
            f"stream={stream!r}: give StreamBatch(query_id, batch_id) (s3commit_sdk.streaming)"
        )
    if committer not in S3_COMMITTERS:
        raise InvalidArgumentError(
            f"committer {committer!r} cannot commit a stream's batches exactly once: use "
            "'directory', 'partitioned' or 'magic'"
        )
    if conflict_mode not in (None, "append"):
        raise InvalidArgumentError(
            f"conflict_mode={conflict_mode!r}: a stream's batches append (each batch is one "
            "committed job adding its rows)"
        )
    return "append"


def stream_job_fields(stream: StreamBatch) -> dict[str, Any]:
    """A micro-batch's job: the batch's id, which every attempt of it shares."""
    return {"job_id": stream.job_id, "job_id_source": "stream batch", "stream": stream}


def iceberg_table_shape(
    location: Any,
    options: Any,
    settings: S3Settings,
    schema: pa.Schema,
    columns: tuple[str, ...],
    committer: str,
) -> str:
    """The Iceberg table's shape every task writes against (:mod:`.iceberg.schema`): the
    existing table's, once the data fits it, else a new one; read from the catalog here, on
    the driver, before any task runs."""
    from .iceberg.catalog import CatalogConfig
    from .iceberg.schema import check_committer as check_iceberg_committer
    from .iceberg.schema import require_pyiceberg
    from .iceberg.table import IcebergLog

    check_iceberg_committer(committer)
    require_pyiceberg()
    log = IcebergLog(location, settings, CatalogConfig.of(options, location))
    return log.shape(schema, columns).to_json()


def _local_input(df: Any):
    """pandas or Arrow input in canonical types, or a typed error naming what was passed."""
    try:
        return python_decimals(df, to_arrow(df))
    except InvalidArgumentError:
        raise
    except (TypeError, ValueError, pa.ArrowException) as exc:
        raise InvalidArgumentError(
            f"cannot write {type(df).__name__}: pass a pyspark or pandas DataFrame or a "
            f"pyarrow Table ({exc})"
        ) from exc


def _conflict_mode(
    argument: ConflictMode | None, option: ConflictMode | None
) -> ConflictMode | None:
    """The conflict mode ``conflict_mode=`` or the option ``staging.conflict-mode`` gives,
    which must agree; None if neither does."""
    if argument is None:
        return option
    mode = check_choice("conflict_mode", argument, CONFLICT_MODES, SAVE_MODES)
    if option and mode != option:
        raise InvalidArgumentError(
            f"conflict_mode={mode!r} contradicts option staging.conflict-mode={option!r}"
        )
    return mode


def _partition_columns(partition_by: Sequence[str] | str | None) -> tuple[str, ...]:
    if partition_by is None:
        return ()
    if not isinstance(partition_by, (str, Sequence)):
        raise InvalidArgumentError(
            f"partition_by must be a column name or a list of them, not {partition_by!r}"
        )
    columns = (partition_by,) if isinstance(partition_by, str) else tuple(partition_by)
    if len(set(columns)) != len(columns):
        raise InvalidArgumentError(f"partition_by names a column twice: {list(columns)}")
    for name in columns:
        bad = not isinstance(name, str) or not name.strip() or is_hidden(name)
        if bad or name == HIVE_DEFAULT_PARTITION:
            raise InvalidArgumentError(f"invalid partition column name {name!r}")
    return columns
