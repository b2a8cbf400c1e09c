"""Appends that cannot break a dataset: a job's columns checked against the files it keeps.

Spark's and pyarrow's readers take one file's schema and read every file of a destination with
it: a Parquet file of decimal(6,2) read as decimal(3,2) fails ("Decimal value does not fit in
precision 3"), a CSV file with one more column shifts the values of every row. Plain formats
check nothing against what a destination holds (Delta does: :mod:`.delta.schema`), so a job
that leaves existing files beside its own (``append``; ``replace`` or ``fail`` of the
partitions written) compares its data columns with the destination's before anything is
uploaded:

- **The destination's schema**: the ``schema`` the last job recorded in ``_SUCCESS`` (any
  format), else one data file's: a Parquet footer (Spark's own schema when Spark wrote it),
  an ORC footer, the column count of a CSV file's first record. JSON files are not sampled:
  their records name their fields and readers infer types across files.
- **Accepted**: the same data columns (the same order too for CSV, read by position), the
  same partition columns and format, each type the same or one every reader reads at the
  destination's type: a decimal whose integer and fraction digits fit the destination's, a
  narrower integer, float into double. The job then writes the destination's types
  (``JobContext.data_schema``; the writers cast), so the files agree.
- **Refused**: anything else, as :class:`~.errors.SchemaMismatchError` naming the column, both
  types and the fix.

A replace of the whole destination (committers ``directory`` and ``file``, or any committer
without ``partition_by``) keeps nothing old and is not checked.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa
import pyarrow.orc as paorc
import pyarrow.parquet as pq

from .errors import (
    NOTHING_VISIBLE,
    InvalidArgumentError,
    InvalidPathError,
    PendingSetError,
    SchemaMismatchError,
    StoreError,
    about_job,
)
from .formats import parse_success
from .layout import SUCCESS_MARKER, is_hidden
from .partitions import parse_directories
from .paths import S3Location
from .protocol import JobContext
from .redaction import redacted_logs
from .scan import CSV_HEAD_BYTES, TableFile, csv_columns, csv_schema, open_file
from .sparktypes import arrow_of_spark_json, file_schema, spark_type_name
from .store import open_store
from .store.rename import open_rename_store
from .writers import EXTENSIONS

log = logging.getLogger(__name__)

PLAIN_FORMATS = tuple(EXTENSIONS)
#: committers whose unit of conflict is always the whole destination (committers/conflict.py)
_WHOLE_DESTINATION = ("directory", "file")
#: Spark's schema in the key-value metadata of the Parquet files it writes
_SPARK_PARQUET_SCHEMA = b"org.apache.spark.sql.parquet.row.metadata"


@dataclass(frozen=True)
class DestinationSchema:
    """What the files at a destination hold, as far as one source tells."""

    columns: pa.Schema  # the data columns, in the file form (sparktypes.file_schema)
    format: str
    partition_by: tuple[str, ...]
    source: str  # where it was read: _SUCCESS or a file's URL
    #: False where only the column count is known (a CSV file without a recorded schema)
    typed: bool = True
    #: an ORC footer: its zoneless timestamps may hold either Spark timestamp type
    zoneless_timestamps: bool = False


def keeps_existing_files(job: JobContext) -> bool:
    """Whether files already at the destination stay beside the job's: append, and replace or
    fail of the partitions written (the other partitions stay)."""
    if job.conflict_mode == "append":
        return True
    return bool(job.partition_by) and job.committer not in _WHOLE_DESTINATION


def checked_job(job: JobContext) -> JobContext:
    """``job`` writing types the destination's files can be read with, or SchemaMismatchError.

    Driver side, before job setup; the returned job carries the types to write
    (``data_schema``) to every task.
    """
    if job.format not in PLAIN_FORMATS or job.data_schema is None:
        return job
    if not keeps_existing_files(job):
        return job
    reader = _DestinationReader(job)
    with (
        redacted_logs(job.settings.secret_key, job.settings.session_token),  # it reads S3
        about_job(job.location.url(), job.job_id, NOTHING_VISIBLE),  # before the job's setup
    ):
        existing = destination_schema(job, reader)
    counted = reader.counters  # the job's requests too: its _SUCCESS counts them
    job = replace(job, setup_requests=counted.snapshot(), setup_retries=counted.retries())
    if existing is None:
        return job
    return replace(job, data_schema=fitted(existing, job))


def fitted(existing: DestinationSchema, job: JobContext) -> pa.Schema:
    """The job's data columns at the types to write beside ``existing``, or a typed error."""
    new = job.data_schema
    assert new is not None
    url = job.location.url()
    if existing.format != job.format:
        raise _mismatch(
            job,
            existing,
            f"the destination holds {existing.format} files and this job writes {job.format}",
            destination_type=existing.format,
            data_type=job.format,
        )
    if existing.partition_by != job.partition_by:
        raise _mismatch(
            job,
            existing,
            f"the destination is partitioned by {list(existing.partition_by)} and this job "
            f"by {list(job.partition_by)}",
            destination_type=_columns_text(existing.partition_by),
            data_type=_columns_text(job.partition_by),
        )
    if not existing.typed:
        if len(existing.columns) != len(new):
            raise _mismatch(
                job,
                existing,
                f"the destination's CSV files hold {len(existing.columns)} columns and this "
                f"job's data {len(new)} ({new.names})",
                destination_type=f"{len(existing.columns)} columns",
                data_type=f"{len(new)} columns",
            )
        return new
    have, want = existing.columns.names, new.names
    ordered = job.format == "csv"  # read by position
    if (have != want) if ordered else (sorted(have) != sorted(want)):
        missing = [n for n in have if n not in want]
        extra = [n for n in want if n not in have]
        parts = [f"columns missing from the data: {missing}"] if missing else []
        parts += [f"columns not in the destination: {extra}"] if extra else []
        parts += [] if parts else ["CSV is read by position and the order differs"]
        what = f"{'; '.join(parts)} (the destination's data columns are {have}, the data's {want})"
        raise _mismatch(
            job,
            existing,
            what,
            destination_type=_columns_text(have),
            data_type=_columns_text(want),
            fix=f"select the destination's columns {have} in the DataFrame",
        )
    fields = []
    for field in new:
        held = existing.columns.field(field.name).type
        written = _write_type(held, field.type, existing.zoneless_timestamps)
        if written is None:
            raise _mismatch(
                job,
                existing,
                f"column {field.name!r} is {spark_type_name(held)} at the destination and "
                f"{spark_type_name(field.type)} in the data, which not every reader can read "
                "as one type",
                column=field.name,
                destination_type=spark_type_name(held),
                data_type=spark_type_name(field.type),
                fix=f"cast {field.name!r} to {spark_type_name(held)} in the DataFrame",
            )
        fields.append(field.with_type(written))
    log.debug("the data's columns fit those of %s at %s", existing.source, url)
    return pa.schema(fields)


def _write_type(held: pa.DataType, new: pa.DataType, zoneless: bool) -> pa.DataType | None:
    """The type to write ``new`` data at, beside files holding ``held``; None: no such type.

    Widened to ``held`` only where the cast is exact and every reader reads the files alike.
    """
    if pa.types.is_null(new):  # only nulls (JSON): any type holds them
        return held
    if pa.types.is_null(held):
        return new
    if pa.types.is_decimal(held) and pa.types.is_decimal(new):
        fits = new.scale <= held.scale and new.precision - new.scale <= held.precision - held.scale
        return held if fits else None
    for kind in (pa.types.is_integer, pa.types.is_floating):
        if kind(held) and kind(new):
            return held if new.bit_width <= held.bit_width else None
    if pa.types.is_timestamp(held) and pa.types.is_timestamp(new):
        return new if held.tz == new.tz or (zoneless and held.tz is None) else None
    if pa.types.is_struct(held) and pa.types.is_struct(new):
        inner = [held.field(i) for i in range(held.num_fields)]
        fields = [new.field(i) for i in range(new.num_fields)]
        if [f.name for f in inner] != [f.name for f in fields]:
            return None
        types = [_write_type(h.type, f.type, zoneless) for h, f in zip(inner, fields, strict=True)]
        if any(t is None for t in types):
            return None
        return pa.struct([f.with_type(t) for f, t in zip(fields, types, strict=True)])
    if pa.types.is_list(held) and pa.types.is_list(new):
        item = _write_type(held.value_type, new.value_type, zoneless)
        return None if item is None else pa.list_(new.value_field.with_type(item))
    if pa.types.is_map(held) and pa.types.is_map(new):
        key = _write_type(held.key_type, new.key_type, zoneless)
        value = _write_type(held.item_type, new.item_type, zoneless)
        if key is None or value is None:
            return None
        return pa.map_(new.key_field.with_type(key), new.item_field.with_type(value))
    return new if held == new else None


def _columns_text(names: Any) -> str:
    return "[" + ", ".join(names) + "]"


def _mismatch(
    job: JobContext,
    existing: DestinationSchema,
    what: str,
    *,
    fix: str | None = None,
    **fields: str | None,
) -> SchemaMismatchError:
    url = job.location.url()
    remedies = [fix] if fix else []
    remedies.append("write to a new path")
    if job.committer in _WHOLE_DESTINATION or not job.partition_by:
        remedies.append("replace the whole destination (conflict_mode='replace')")
    else:
        remedies.append(
            "replace the whole destination (conflict_mode='replace' without partition_by, or "
            "committer='directory')"
        )
    return SchemaMismatchError(
        f"cannot write to {url}: {what} (the destination's schema read from "
        f"{existing.source}); files of both could not be read together. Nothing was "
        f"uploaded. Fix: {', or '.join(remedies)}.",
        destination=url,
        job_id=job.job_id,
        visible=NOTHING_VISIBLE,
        **fields,
    )


# -- the destination's schema ----------------------------------------------------------------
def destination_schema(job: JobContext, reader: _DestinationReader) -> DestinationSchema | None:
    """The destination's schema from its ``_SUCCESS``, else from one of its data files; None
    if it holds no data file (or none whose schema can be read, as JSON).

    A store that refuses to read (write-only credentials) is logged and not checked: job
    setup then meets the same store.
    """
    try:
        return _recorded(reader, job) or _sampled(reader, job)
    except StoreError as exc:
        log.warning(
            "not checking the schema of %s against the data: reading it failed (%s)",
            job.location.url(),
            exc,
        )
        return None


def _recorded(reader: _DestinationReader, job: JobContext) -> DestinationSchema | None:
    body = reader.read(SUCCESS_MARKER)
    if not body:
        return None
    try:
        doc = parse_success(body)
        if doc is None or doc.schema is None:
            return None
        columns = arrow_of_spark_json(doc.schema)
    except (PendingSetError, ValueError) as exc:
        log.warning("the _SUCCESS of %s records no usable schema (%s)", job.location.url(), exc)
        return None
    source = job.location.url(job.location.key(SUCCESS_MARKER))
    return DestinationSchema(columns, doc.format, tuple(doc.partition_by), source)


def _sampled(reader: _DestinationReader, job: JobContext) -> DestinationSchema | None:
    for relpath, size in reader.files():
        fmt = next((f for f, ext in EXTENSIONS.items() if relpath.endswith(ext)), None)
        if fmt is None or not size:
            continue  # another writer's file, or an empty one: nothing to tell
        try:
            partition_by = tuple(parse_directories(relpath)[0])
        except InvalidPathError:
            continue
        source = job.location.url(job.location.key(relpath))
        stream = reader.open(relpath, size)
        try:
            if fmt == "json":
                return None  # readers infer JSON types across files: nothing to hold it to
            if fmt == "csv":
                count = csv_columns(stream.read(min(size, CSV_HEAD_BYTES)))
                if count is None:
                    return None
                columns = csv_schema(count)
                return DestinationSchema(columns, fmt, partition_by, source, typed=False)
            columns = _footer_schema(stream, fmt)
        except (pa.ArrowException, InvalidArgumentError, ValueError) as exc:
            log.warning("cannot read the schema of %s (%s): not checked", source, exc)
            return None
        return DestinationSchema(
            columns, fmt, partition_by, source, zoneless_timestamps=fmt == "orc"
        )
    return None


def _footer_schema(stream: pa.NativeFile, fmt: str) -> pa.Schema:
    """A Parquet or ORC file's columns in the file form; Spark's own schema where it wrote one
    (its INT96 timestamps read as zoneless otherwise)."""
    if fmt == "orc":
        return file_schema(paorc.ORCFile(stream).schema)
    parquet = pq.ParquetFile(stream)
    spark = (parquet.schema_arrow.metadata or {}).get(_SPARK_PARQUET_SCHEMA)
    if spark is not None:
        try:
            return arrow_of_spark_json(json.loads(spark))
        except ValueError:
            pass  # a type we do not write: pyarrow's reading of the footer is the next best
    return file_schema(parquet.schema_arrow)


class _DestinationReader:
    """The destination's visible files and ``_SUCCESS``, on S3 (ranged reads) or a store with
    rename; ``counters`` count its requests, which :func:`checked_job` adds to the job's."""

    def __init__(self, job: JobContext) -> None:
        self.location = job.location
        if isinstance(job.location, S3Location):
            self.s3 = open_store(job.settings, threads=1)
            self.counters = self.s3.counters
        else:
            self.fs = open_rename_store(job.location, job.settings, threads=1)
            self.counters = self.fs.counters

    def read(self, relpath: str) -> bytes | None:
        key = self.location.key(relpath)
        if not isinstance(self.location, S3Location):
            try:
                return self.fs.read_bytes(key)
            except FileNotFoundError:
                return None
        try:
            return self.s3.get(self.location.bucket, key)
        except StoreError as exc:
            if exc.code in ("NoSuchKey", "404", "NoSuchBucket"):
                return None  # job setup names a missing bucket
            raise

    def files(self) -> Iterator[tuple[str, int]]:
        """Visible files, relative to the destination, listed as they are read."""
        location = self.location
        if isinstance(location, S3Location):
            listed = (
                (o.key, o.size) for o in self.s3.list_objects(location.bucket, location.dir_prefix)
            )
        else:
            listed = iter(sorted(self.fs.list_files(location.key(""))))
        for key, size in listed:
            relpath = location.relative(key)
            if relpath and not relpath.endswith("/") and not is_hidden(relpath):
                yield relpath, size

    def open(self, relpath: str, size: int) -> pa.NativeFile:
        key = self.location.key(relpath)
        if isinstance(self.location, S3Location):
            return open_file(self.s3, self.location.bucket, TableFile(key, size, ()))
        return pa.BufferReader(self.fs.read_bytes(key))
