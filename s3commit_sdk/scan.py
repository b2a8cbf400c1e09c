"""Reading a destination back: its visible files, their partitions, and Arrow batches of them.

What a reader sees is what our committers made visible, as of the last committed job (a commit
in progress is left out: :mod:`.committed_view`); hidden names (``_``/``.``) are skipped
(``_SUCCESS``, ``__s3commit``, ``__magic``). Files are read through our boto3 store: Parquet
with ranged GETs (footer, then only the row groups and columns asked for), ORC, CSV and JSON
(as Spark writes them: CSV without header, JSON lines) in one GET. A Delta table (a destination
with ``_delta_log/``) is read as its snapshot: the files its log names at the latest version or
at ``versionAsOf``, never the files a replace removed.
"""

from __future__ import annotations

import base64
import functools
import io
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.json as pajson
import pyarrow.orc as paorc
import pyarrow.parquet as pq

from .committed_view import committed_objects
from .errors import InvalidArgumentError, InvalidPathError
from .partitions import column_type, parse_directories, typed_value
from .paths import S3Location
from .store import S3Settings, S3Store, open_store
from .writers import EXTENSIONS

BATCH_ROWS = 65_536
#: Objects up to this size are fetched in one GET; larger ones by ranges as pyarrow reads them.
WHOLE_GET_BYTES = 8 * 2**20
RANGE_BUFFER_BYTES = 4 * 2**20
DELTA_LOG = "_delta_log/"


@dataclass(frozen=True)
class TableFile:
    key: str
    size: int
    values: tuple[str | None, ...]  # raw partition values, in the listing's column order


@dataclass(frozen=True)
class Listing:
    """The visible files under a destination and the partition columns of their directories."""

    location: S3Location
    format: str
    files: tuple[TableFile, ...]
    partition_columns: tuple[str, ...]
    partition_types: tuple[pa.DataType, ...] = field(default=())
    schema: pa.Schema | None = None  # the data columns, where a table declares them (Delta)


@dataclass(frozen=True)
class FileSplit:
    """One input partition of a read: a file, or some row groups of a large Parquet file."""

    file: TableFile
    row_groups: tuple[int, ...] | None = None


def store_for(settings: S3Settings) -> S3Store:
    """One store per process and settings: a Python worker serves many tasks."""
    return _cached_store(settings, settings.credentials_provider)


@functools.lru_cache(maxsize=8)
def _cached_store(settings: S3Settings, provider: object) -> S3Store:
    return open_store(settings)  # the provider is part of the key: settings compare without it


def list_table(
    store: S3Store,
    location: S3Location,
    fmt: str | None,
    version: int | None = None,
    iceberg: Any = None,
) -> Listing:
    """The destination's files as of its last committed job (:mod:`.committed_view`); every
    partition directory must name the same columns.

    A Delta table is read as one of its versions (``version``, else the latest) unless another
    format is asked for, which reads every file there as that format. ``format="iceberg"``
    reads a snapshot of the Iceberg table ``iceberg`` (an ``IcebergRead``) names.
    """
    if fmt == "iceberg":
        return _iceberg_listing(store, location, iceberg)
    if fmt == "delta" or (fmt is None and _has_delta_log(store, location)):
        return _delta_listing(store, location, version)
    if version is not None:
        raise InvalidArgumentError(
            f"versionAsOf reads a version of a Delta table; {location.url()} is read as {fmt}"
            + ("" if _has_delta_log(store, location) else " and has no _delta_log")
        )
    files, layouts = [], set()
    for info in committed_objects(store, location):
        names, values = parse_directories(location.relative(info.key))
        layouts.add(tuple(names))
        files.append(TableFile(info.key, info.size, tuple(values)))
    columns = _one_layout(location, layouts)
    types = tuple(column_type([f.values[i] for f in files]) for i in range(len(columns)))
    return Listing(location, fmt or _format_of(files), tuple(files), columns, types)


def _has_delta_log(store: S3Store, location: S3Location) -> bool:
    """Whether a key lies under ``_delta_log/`` (one listing request of one page)."""
    return (
        next(iter(store.list_objects(location.bucket, location.key(DELTA_LOG))), None) is not None
    )


def _one_layout(location: S3Location, layouts: set[tuple[str, ...]]) -> tuple[str, ...]:
    if len(layouts) > 1:
        shown = ", ".join("/".join(layout) or "(root)" for layout in sorted(layouts))
        raise InvalidPathError(
            f"{location.url()} mixes partition layouts ({shown}): Spark cannot read it as one "
            "table either; read each layout's directory on its own"
        )
    return next(iter(layouts), ())


def _delta_listing(store: S3Store, location: S3Location, version: int | None) -> Listing:
    """The files of one version of the Delta table, with the table's own column types."""
    try:
        from .delta.table import DeltaLog
    except ImportError as exc:
        raise InvalidArgumentError(
            f"{location.url()} is a Delta table: reading it needs the delta extra "
            "(pip install 's3commit-sdk[delta]')"
        ) from exc
    try:
        table = DeltaLog(location, store.settings, store).open(version)
    except Exception as exc:  # delta-rs: DeltaError for a version the log does not have
        raise InvalidArgumentError(
            f"cannot read version {version} of the Delta table at {location.url()}: {exc}"
        ) from exc
    if table is None:
        raise InvalidPathError(f"no Delta table at {location.url()} (no _delta_log)")
    columns = tuple(table.metadata().partition_columns)
    schema = pa.schema(table.schema().to_arrow())
    actions = pa.table(table.get_add_actions(flatten=False)).select(["path", "size_bytes"])
    files = []
    for path, size in zip(*(c.to_pylist() for c in actions.columns), strict=True):
        relpath = unquote(path)
        names, values = parse_directories(relpath)
        if tuple(names) != columns:
            raise InvalidPathError(
                f"{relpath!r} of the Delta table at {location.url()} is not in a directory of "
                f"its partition columns {list(columns)}: was it written by another writer?"
            )
        files.append(TableFile(location.key(relpath), size, tuple(values)))
    return Listing(
        location,
        "parquet",
        tuple(files),
        columns,
        tuple(schema.field(c).type for c in columns),
        pa.schema([f for f in schema if f.name not in columns]),
    )


def _iceberg_listing(store: S3Store, location: S3Location, read: Any) -> Listing:
    """The files of one snapshot of the Iceberg table, with the snapshot's columns (the files
    hold the partition columns too: no directory is parsed)."""
    try:
        from .iceberg.read import IcebergRead, snapshot_files
    except ImportError as exc:
        raise InvalidArgumentError(
            "reading an Iceberg table needs the iceberg extra (pip install 's3commit-sdk[iceberg]')"
        ) from exc
    if read is None:
        from .options import resolve_options

        read = IcebergRead(resolve_options(None))
    files, schema = snapshot_files(location, store.settings, read)
    found = tuple(TableFile(key, size, ()) for key, size in files)
    return Listing(location, "parquet", found, (), (), schema)


def _format_of(files: list[TableFile]) -> str:
    """The format our writers' file names say; parquet for an empty destination."""
    for file in files:
        for fmt, ext in EXTENSIONS.items():
            if file.key.endswith(ext) or file.key.endswith(f".{fmt}"):
                return fmt
    if files:
        raise InvalidArgumentError(
            f"cannot tell the format of {files[0].key!r}: give .option('format', ...) "
            f"({', '.join(EXTENSIONS)})"
        )
    return "parquet"


def file_schema(store: S3Store, listing: Listing) -> pa.Schema:
    """The data columns of the first file (Spark also takes one file's schema), or those the
    table declares."""
    if listing.schema is not None:
        return listing.schema
    if not listing.files:
        raise InvalidPathError(
            f"no visible files at {listing.location.url()} to take a schema from: give one "
            "with spark.read.schema(...)"
        )
    first = next((f for f in listing.files if f.size), listing.files[0])
    source = open_file(store, listing.location.bucket, first)
    if listing.format == "parquet":
        return pq.ParquetFile(source).schema_arrow
    if listing.format == "orc":
        return paorc.ORCFile(source).schema
    if listing.format == "csv":  # no header, as Spark writes it: _c0, _c1, ... as strings
        count = csv_columns(source.read(min(first.size, CSV_HEAD_BYTES)))
        if count is None:
            raise InvalidPathError(
                f"the first record of {listing.location.url(first.key)} is not a whole line: "
                "give the schema with spark.read.schema(...)"
            )
        return csv_schema(count)
    inferred = pajson.read_json(source).schema
    # Spark's JSON inference keeps timestamps and dates as strings; nulls-only fields too
    return pa.schema([_json_inferred(f) for f in inferred])


def _json_inferred(f: pa.Field) -> pa.Field:
    if pa.types.is_timestamp(f.type) or pa.types.is_date(f.type) or pa.types.is_null(f.type):
        return f.with_type(pa.string())
    return f


def plan_splits(store: S3Store, listing: Listing, split_bytes: int) -> list[FileSplit]:
    """One split per file; a Parquet file larger than ``split_bytes`` splits by row groups."""
    splits = []
    for file in listing.files:
        if listing.format != "parquet" or file.size <= split_bytes:
            splits.append(FileSplit(file))
            continue
        metadata = pq.ParquetFile(open_file(store, listing.location.bucket, file)).metadata
        group: list[int] = []
        size = 0
        for index in range(metadata.num_row_groups):
            group.append(index)
            size += metadata.row_group(index).total_byte_size
            if size >= split_bytes:
                splits.append(FileSplit(file, tuple(group)))
                group, size = [], 0
        if group or not splits or splits[-1].file != file:
            splits.append(FileSplit(file, tuple(group)))
    return splits


def read_split(
    store: S3Store,
    listing: Listing,
    split: FileSplit,
    data: pa.Schema,
    wanted: pa.Schema,
    zone: str,
) -> Iterator[pa.RecordBatch]:
    """Batches of ``wanted`` (data columns then partition columns, any order) from one split.

    ``data`` is the file's columns that are asked for, with the types to return them in.
    """
    source = open_file(store, listing.location.bucket, split.file)
    values = dict(zip(listing.partition_columns, split.file.values, strict=True))
    for batch in _file_batches(source, listing.format, split, data):
        columns = []
        for f in wanted:
            if f.name in values:
                value = _partition_value(values[f.name], f, zone)
                columns.append(pa.array([value] * batch.num_rows, f.type))
            elif f.name in batch.schema.names:
                columns.append(_convert(batch.column(f.name), f.type))
            else:
                columns.append(pa.nulls(batch.num_rows, f.type))
        yield pa.RecordBatch.from_arrays(columns, schema=wanted)


def _partition_value(raw: str | None, f: pa.Field, zone: str) -> object:
    try:
        return typed_value(raw, f.type, zone)
    except (ValueError, ArithmeticError) as exc:
        raise InvalidArgumentError(
            f"partition value {raw!r} of column {f.name!r} cannot be read as {f.type} ({exc})"
        ) from exc


def _file_batches(
    source: pa.NativeFile, fmt: str, split: FileSplit, data: pa.Schema
) -> Iterator[pa.RecordBatch]:
    if fmt == "parquet":
        parquet = pq.ParquetFile(source, pre_buffer=True)
        present = [n for n in data.names if n in parquet.schema_arrow.names]
        if not present:  # only partition columns asked for: the row count is enough
            yield from _row_counts(parquet, split.row_groups)
            return
        yield from parquet.iter_batches(
            BATCH_ROWS, row_groups=split.row_groups, columns=present, use_threads=False
        )
        return
    if fmt == "orc":
        orc = paorc.ORCFile(source)
        present = [n for n in data.names if n in orc.schema.names]
        table = orc.read(columns=present) if present else pa.table({"_": pa.nulls(orc.nrows)})
    else:
        table = _read_text(source.read(), fmt, data)
    yield from table.to_batches(BATCH_ROWS)


def _row_counts(parquet: pq.ParquetFile, row_groups: tuple[int, ...] | None):
    groups = range(parquet.metadata.num_row_groups) if row_groups is None else row_groups
    for index in groups:
        rows = parquet.metadata.row_group(index).num_rows
        yield pa.RecordBatch.from_arrays([pa.nulls(rows)], ["_"])


def _read_text(body: bytes, fmt: str, data: pa.Schema) -> pa.Table:
    """CSV and JSON as Spark writes them; text-encoded types are decoded after parsing."""
    if not body.strip():
        return data.empty_table() if data else pa.table({"_": pa.nulls(0)})
    if not data:  # only partition columns asked for: count the rows
        if fmt == "csv":
            counted = pacsv.read_csv(io.BytesIO(body), *_csv_read(None))
        else:
            counted = pajson.read_json(io.BytesIO(body))
        return pa.table({"_": pa.nulls(counted.num_rows)})
    as_text = pa.schema([f.with_type(_text_type(f.type)) for f in data])
    if fmt == "csv":
        return pacsv.read_csv(io.BytesIO(body), *_csv_read(as_text))
    options = pajson.ParseOptions(explicit_schema=as_text, unexpected_field_behavior="ignore")
    return pajson.read_json(io.BytesIO(body), parse_options=options)


#: how much of a CSV file is read for its first record
CSV_HEAD_BYTES = 64 * 1024


def csv_columns(head: bytes) -> int | None:
    """The column count of the first record of a CSV file as Spark writes it (the first
    ``CSV_HEAD_BYTES`` of it); None if its first line is not a whole record (a quoted value
    holding a line break)."""
    line = head.split(b"\n", 1)[0] + b"\n"  # a record ends in one
    try:
        return pacsv.read_csv(io.BytesIO(line), *_csv_read(None)).num_columns
    except pa.ArrowInvalid:
        return None


def csv_schema(count: int) -> pa.Schema:
    """Spark's names for the columns of a CSV file without a header: strings ``_c0``, ..."""
    return pa.schema([(f"_c{i}", pa.string()) for i in range(count)])


def _csv_read(schema: pa.Schema | None):
    read = pacsv.ReadOptions(
        column_names=schema.names if schema is not None else None,
        autogenerate_column_names=schema is None,
    )
    parse = pacsv.ParseOptions(escape_char="\\", double_quote=False, newlines_in_values=True)
    convert = pacsv.ConvertOptions(
        column_types=schema,
        null_values=[""],
        strings_can_be_null=True,
        quoted_strings_can_be_null=False,
    )
    return read, parse, convert


def _text_type(t: pa.DataType) -> pa.DataType:
    """Types read as text first: dates, timestamps and base64 binary."""
    if pa.types.is_timestamp(t) or pa.types.is_date(t) or pa.types.is_binary(t):
        return pa.string()
    return t


def _convert(column: pa.Array, target: pa.DataType) -> pa.Array:
    if column.type == target:
        return column
    if pa.types.is_binary(target) and pa.types.is_string(column.type):
        return pa.array(
            [None if v is None else base64.b64decode(v) for v in column.to_pylist()], target
        )
    return column.cast(target)


def open_file(store: S3Store, bucket: str, file: TableFile) -> pa.NativeFile:
    """A readable, seekable file: the whole object in memory, or ranged GETs as read."""
    if file.size <= WHOLE_GET_BYTES:
        return pa.BufferReader(store.get(bucket, file.key))
    raw = _RangedObject(store, bucket, file.key, file.size)
    return pa.PythonFile(io.BufferedReader(raw, RANGE_BUFFER_BYTES), mode="r")


class _RangedObject(io.RawIOBase):
    """An S3 object as a seekable raw file; every read is one ranged GET (with our retries)."""

    def __init__(self, store: S3Store, bucket: str, key: str, size: int) -> None:
        super().__init__()
        self.store, self.bucket, self.key, self.size = store, bucket, key, size
        self.position = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.position, io.SEEK_END: self.size}[whence]
        self.position = max(0, base + offset)
        return self.position

    def tell(self) -> int:
        return self.position

    def readinto(self, buffer) -> int:
        end = min(self.size, self.position + len(buffer))
        if end <= self.position:
            return 0
        chunk = self.store.get_range(self.bucket, self.key, self.position, end)
        buffer[: len(chunk)] = chunk
        self.position += len(chunk)
        return len(chunk)
