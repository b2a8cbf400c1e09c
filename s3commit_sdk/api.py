"""``write_committed``: validate, choose committer and engine, run the job, return the result."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from .committers import COMMITTERS, S3_ONLY
from .engines.local import run_local_tasks, to_arrow
from .engines.spark import is_spark_dataframe, run_spark_tasks, spark_conf, spark_schema_to_arrow
from .errors import InvalidArgumentError, InvalidPathError
from .options import CONFLICT_MODES, resolve_options, spark_conf_defaults
from .paths import HIVE_DEFAULT_PARTITION, S3Location, is_hidden, parse_destination
from .progress import ProgressTracker, make_listener
from .protocol import JobContext, execute_job
from .store import S3Settings
from .writers import FORMATS


@dataclass(frozen=True)
class CommittedFile:
    path: str
    key: str
    size: int
    rows: int
    partition: dict[str, str | None]
    etag: str


@dataclass
class WriteResult:
    """What a committed write produced; ``success`` is the ``_SUCCESS`` document."""

    job_id: str
    committer: str
    destination: str
    files: list[CommittedFile]
    success: dict[str, Any]
    rows: int
    bytes: int
    duration_s: float
    phases: dict[str, float] = field(default_factory=dict)
    requests: dict[str, int] = field(default_factory=dict)

    def __repr__(self) -> str:
        return (
            f"WriteResult(committer={self.committer!r}, destination={self.destination!r}, "
            f"files={len(self.files)}, rows={self.rows}, bytes={self.bytes}, "
            f"duration_s={self.duration_s:.2f})"
        )


def write_committed(
    df: Any,
    path: str,
    committer: str = "partitioned",
    partition_by: Sequence[str] | str | None = None,
    conflict_mode: str | None = None,
    format: str = "parquet",
    options: Mapping[str, Any] | None = None,
    progress: Any = "auto",
) -> WriteResult:
    """Write ``df`` to ``path`` through a zero-rename committer; nothing is visible until done.

    ``df`` is a pyspark DataFrame (tasks run on the executors) or a pandas DataFrame / pyarrow
    Table (tasks run in this process). Argument errors raise before anything is uploaded.
    ``progress``: "auto" (a widget in a notebook, tqdm on a terminal), False, or a callable
    receiving :class:`~s3commit_sdk.progress.ProgressEvent`.
    """
    started = time.monotonic()
    spark = is_spark_dataframe(df)
    if committer not in COMMITTERS:
        raise InvalidArgumentError(
            f"unknown committer {committer!r}; available: {', '.join(COMMITTERS)}"
        )
    if format not in FORMATS:
        raise InvalidArgumentError(f"unknown format {format!r}; use one of {', '.join(FORMATS)}")
    resolved = resolve_options(options, spark_conf_defaults(spark_conf(df)) if spark else None)
    mode = _conflict_mode(conflict_mode, resolved.conflict_mode)
    location = parse_destination(path)
    if committer in S3_ONLY and not isinstance(location, S3Location):
        raise InvalidPathError(
            f"committer {committer!r} writes to S3: use an s3:// destination, or "
            "committer='manifest' / 'file' for a store with rename such as file://"
        )
    columns = _partition_columns(partition_by)

    if spark:
        if getattr(location, "scheme", "") == "memory":
            raise InvalidPathError(
                "memory:// lives inside one Python process; Spark tasks run in other "
                "processes: use file:// or s3:// with a Spark DataFrame"
            )
        schema = spark_schema_to_arrow(df)
    else:
        try:
            table = to_arrow(df)
        except (TypeError, ValueError, pa.ArrowException) as exc:
            raise InvalidArgumentError(
                f"cannot write {type(df).__name__}: pass a pyspark or pandas DataFrame or a "
                f"pyarrow Table ({exc})"
            ) from exc
        schema = table.schema
    _check_columns(schema, columns)
    tracker = ProgressTracker(make_listener(progress))

    job = JobContext(
        location=location,
        committer=committer,
        conflict_mode=mode,
        partition_by=columns,
        format=format,
        options=resolved,
        settings=S3Settings.resolve(resolved),
    )
    if spark:
        outcome = execute_job(job, lambda j, t: run_spark_tasks(df, j, t), tracker)
    else:
        outcome = execute_job(job, lambda j, t: run_local_tasks(table, j, t), tracker)
    files = [
        CommittedFile(f["path"], f["key"], f["size"], f["rows"], f["partition"], f["etag"])
        for f in outcome.files
    ]
    return WriteResult(
        job_id=job.job_id,
        committer=committer,
        destination=location.url(),
        files=files,
        success=outcome.success,
        rows=sum(f.rows for f in files),
        bytes=sum(f.size for f in files),
        duration_s=time.monotonic() - started,
        phases=outcome.phases,
        requests=outcome.requests,
    )


def _conflict_mode(argument: str | None, option: str | None) -> str:
    if argument is not None and argument not in CONFLICT_MODES:
        raise InvalidArgumentError(
            f"unknown conflict_mode {argument!r}; use one of {', '.join(CONFLICT_MODES)}"
        )
    if argument and option and argument != option:
        raise InvalidArgumentError(
            f"conflict_mode={argument!r} contradicts option staging.conflict-mode={option!r}"
        )
    return argument or option or "fail"


def _partition_columns(partition_by: Sequence[str] | str | None) -> tuple[str, ...]:
    if partition_by is None:
        return ()
    columns = (partition_by,) if isinstance(partition_by, str) else tuple(partition_by)
    if len(set(columns)) != len(columns):
        raise InvalidArgumentError(f"partition_by names a column twice: {list(columns)}")
    for name in columns:
        bad = not isinstance(name, str) or not name or is_hidden(name)
        if bad or name == HIVE_DEFAULT_PARTITION:
            raise InvalidArgumentError(f"invalid partition column name {name!r}")
    return columns


def _check_columns(schema: pa.Schema, columns: tuple[str, ...]) -> None:
    missing = [c for c in columns if c not in schema.names]
    if missing:
        raise InvalidArgumentError(
            f"partition column(s) {missing} not in the data; columns are {schema.names}"
        )
    if columns and len(columns) == len(schema.names):
        raise InvalidArgumentError("every column is a partition column: no data would be written")
