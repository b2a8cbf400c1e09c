"""Format writers over pyarrow: partition splitting, Spark file naming and file rolling."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.orc as paorc
import pyarrow.parquet as pq

from .attempt_handle import AttemptHandle
from .errors import InvalidArgumentError, TaskCancelledError
from .paths import check_key, partition_dir, partition_value_text
from .protocol import JobContext, OutputSink, TaskAttemptContext, WrittenFile
from .sparktext import CsvWriter, JsonLinesWriter
from .sparktypes import (
    canonical_schema,
    check_orc_values,
    conform,
    file_schema,
    widened_schema,
)

log = logging.getLogger(__name__)

#: format -> file extension Spark gives it with its default codec
EXTENSIONS = {"parquet": ".snappy.parquet", "orc": ".snappy.orc", "csv": ".csv", "json": ".json"}
#: table formats -> the file format their data files are written in
TABLE_FORMATS = {"delta": "parquet", "iceberg": "parquet"}
#: table formats whose files keep their partition columns (Iceberg: readers that do not
#: project identity partitions from metadata still read the values)
KEEPS_PARTITION_COLUMNS = ("iceberg",)
FORMATS = (*EXTENSIONS, *TABLE_FORMATS)


def file_format(fmt: str) -> str:
    """The format of the files a job of format ``fmt`` writes (a Delta table holds Parquet)."""
    return TABLE_FORMATS.get(fmt, fmt)


class _ArrowFileWriter:
    """Parquet and ORC: batches are cast to the file schema (zoned timestamps stored as UTC).
    ``field_ids``: the file schema with each field's Iceberg id (an Iceberg table's files)."""

    def __init__(
        self,
        fmt: str,
        sink: pa.NativeFile,
        schema: pa.Schema,
        field_ids: Callable[[pa.Schema], pa.Schema] | None = None,
    ) -> None:
        self._schema = file_schema(schema)
        self.footer: pq.FileMetaData | None = None  # a Parquet file's, once closed
        self._declared = None  # an Iceberg file's schema: the table's order, ids, all optional
        if fmt == "parquet":
            declared = field_ids(self._schema) if field_ids else self._schema
            if field_ids:
                self._declared = declared
            self._writer = pq.ParquetWriter(sink, declared, compression="snappy")
        else:
            self._writer = paorc.ORCWriter(sink, compression="snappy")

    def write_batch(self, batch: pa.RecordBatch) -> None:
        batch = conform(batch, self._schema)
        if self._declared is not None:
            columns = batch.select(self._declared.names).columns
            batch = pa.RecordBatch.from_arrays(columns, schema=self._declared)
        if isinstance(self._writer, paorc.ORCWriter):  # it takes tables only
            check_orc_values(batch)
            if any(column.offset for column in batch.columns):
                # pyarrow's ORC writer ignores a sliced struct's offset and writes the rows
                # the slice starts after: write a copy that starts at offset 0
                batch = batch.take(pa.array(np.arange(batch.num_rows)))
            self._writer.write(pa.Table.from_batches([batch]))
        else:
            self._writer.write_batch(batch)

    def close(self) -> None:
        self._writer.close()
        if isinstance(self._writer, pq.ParquetWriter):
            self.footer = self._writer.writer.metadata


def _open_format_writer(fmt: str, sink: pa.NativeFile, schema: pa.Schema, job: JobContext):
    if fmt == "iceberg":
        from .iceberg.schema import TableShape, arrow_with_field_ids

        table = TableShape.from_json(job.table_schema).schema()
        return _ArrowFileWriter("parquet", sink, schema, lambda s: arrow_with_field_ids(s, table))
    fmt = file_format(fmt)
    if fmt in ("parquet", "orc"):
        return _ArrowFileWriter(fmt, sink, schema)
    if fmt == "csv":
        return CsvWriter(sink, schema)
    if fmt == "json":
        return JsonLinesWriter(sink, schema)
    raise InvalidArgumentError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")


@dataclass
class _OpenFile:
    relpath: str
    stream: pa.NativeFile
    writer: object
    partition: dict[str, str | None]
    values: tuple
    rows: int = 0


class TaskOutputWriter:
    """Writes one task's rows into files named as Spark names them.

    Spark (FileFormatDataWriter): ``part-<task>-<jobuuid>-c<n><ext>`` without partitions and
    ``<dir>/part-<task>-<jobuuid>.c<n><ext>`` inside partition directories; ``n`` counts the
    files rolled in that directory. One writer stays open per partition directory.
    """

    def __init__(self, job: JobContext, task: TaskAttemptContext, sink: OutputSink) -> None:
        self.job, self.task, self.sink = job, task, sink
        self.max_records = job.options.max_records_per_file
        self.ext = EXTENSIONS[file_format(job.format)]
        self._open: dict[str, _OpenFile] = {}
        self._counters: dict[str, int] = {}
        self.files: list[WrittenFile] = []
        self.rows = 0  # written so far, into every file
        self.keep_partition_columns = job.format in KEEPS_PARTITION_COLUMNS

    def _name(self, directory: str) -> str:
        counter = self._counters.get(directory, 0)
        self._counters[directory] = counter + 1
        uuid_part = f"-{self.job.job_id}" if self.job.options.unique_filenames else ""
        sep = "." if directory else "-"
        name = f"part-{self.task.partition:05d}{uuid_part}{sep}c{counter:03d}{self.ext}"
        return f"{directory}/{name}" if directory else name

    def _file_for(
        self, directory: str, partition: dict, schema: pa.Schema, values: tuple = ()
    ) -> _OpenFile:
        current = self._open.get(directory)
        if current is not None and self.max_records and current.rows >= self.max_records:
            self._close(directory)
            current = None
        if current is None:
            relpath = self._name(directory)
            check_key(self.job.location, relpath)
            stream = self.sink.open(relpath)
            writer = _open_format_writer(self.job.format, stream, schema, self.job)
            current = _OpenFile(relpath, stream, writer, partition, values)
            self._open[directory] = current
        return current

    @property
    def written(self) -> int:
        """Bytes in the files so far: closed ones, and what open ones have flushed."""
        return sum(f.size for f in self.files) + sum(o.stream.tell() for o in self._open.values())

    def write(self, batch: pa.RecordBatch) -> None:
        if batch.num_rows == 0:
            return
        self.rows += batch.num_rows
        split = split_by_partition(batch, self.job.partition_by, self.keep_partition_columns)
        for directory, partition, values, rows in split:
            offset = 0
            while offset < rows.num_rows:
                target = self._file_for(directory, partition, rows.schema, values)
                room = rows.num_rows - offset
                if self.max_records:
                    room = min(room, self.max_records - target.rows)
                target.writer.write_batch(rows.slice(offset, room))
                target.rows += room
                offset += room

    @property
    def is_empty(self) -> bool:
        return not self.files and not self._open

    def write_empty(self, schema: pa.Schema) -> None:
        """Spark lets task 0 of an empty, unpartitioned job write one file holding the schema."""
        self._file_for("", {}, schema)

    def _close(self, directory: str) -> None:
        current = self._open.pop(directory)
        current.writer.close()
        size = current.stream.tell()
        current.stream.close()
        footer = getattr(current.writer, "footer", None)
        written = WrittenFile(
            current.relpath, current.rows, size, current.partition, footer, current.values
        )
        self.sink.finish(written)
        self.files.append(written)

    def close(self) -> list[WrittenFile]:
        for directory in list(self._open):
            self._close(directory)
        return self.files

    def abort(self) -> None:
        """Drop every open file unfinished; the sink makes sure none becomes visible."""
        for directory in list(self._open):
            current = self._open.pop(directory)
            try:
                self.sink.abort(current.relpath)
            except Exception as exc:  # never in place of the error being handled
                log.warning(
                    "aborting %s failed (%s); the job's abort retries it", current.relpath, exc
                )
            with contextlib.suppress(Exception):
                current.writer.close()  # release it now; the sink discards what it writes
            with contextlib.suppress(Exception):
                current.stream.close()


def split_by_partition(
    batch: pa.RecordBatch, columns: tuple[str, ...], keep_columns: bool = False
) -> Iterable[tuple[str, dict[str, str | None], tuple, pa.RecordBatch]]:
    """Group rows by partition values: (directory, values as text, values, rows). Partition
    columns leave the data, as in Spark, unless ``keep_columns``."""
    if not columns:
        yield "", {}, (), batch
        return
    codes = np.zeros(batch.num_rows, dtype=np.int64)
    for name in columns:
        encoded = pc.dictionary_encode(batch.column(name))
        width = len(encoded.dictionary) + 1
        indices = encoded.indices.fill_null(width - 1).to_numpy(zero_copy_only=False)
        codes = codes * width + indices.astype(np.int64)
    # rows already in partition order (as Spark sorts them, or data grouped by day) are sliced,
    # not copied: a take of every row costs a copy of the batch
    ordered = bool(np.all(codes[1:] >= codes[:-1]))
    order = np.arange(batch.num_rows) if ordered else np.argsort(codes, kind="stable")
    _, starts = np.unique(codes[order], return_index=True)
    data = batch if keep_columns else batch.drop_columns(list(columns))
    keys = batch.select(list(columns))
    ends = [*starts[1:], batch.num_rows]
    for start, end in zip(starts, ends, strict=True):
        row = int(order[start])
        values = [_scalar(keys.column(c), row) for c in columns]
        texts = [partition_value_text(v) or None for v in values]
        partition = dict(zip(columns, texts, strict=True))
        typed = tuple(keys.column(c)[row].as_py() for c in columns)
        rows = data.slice(start, end - start) if ordered else data.take(pa.array(order[start:end]))
        yield partition_dir(list(columns), values), partition, typed, rows


def _scalar(column: pa.Array, row: int) -> object:
    """A Python value; float32 stays float32 so it prints with float32's shortest digits."""
    value = column[row].as_py()
    if value is not None and pa.types.is_float32(column.type):
        return np.float32(value)
    return value


def _write_schema(schema: pa.Schema, job: JobContext) -> pa.Schema:
    """The canonical types (sparktypes), at the widths of the destination's files where the
    job's schema check widened a column (``job.data_schema``)."""
    return widened_schema(canonical_schema(schema), job.data_schema)


def write_task_output(
    job: JobContext,
    task: TaskAttemptContext,
    batches: Iterable[pa.RecordBatch],
    sink: OutputSink,
    schema: pa.Schema | None = None,
    handle: AttemptHandle | None = None,
) -> list[WrittenFile]:
    """Write one task's batches, cast to the canonical types (sparktypes) first.

    Before every batch the attempt stops if its engine cancelled it (``handle``); after every
    batch the handle learns the rows and bytes written so far (a Parquet file's bytes grow as
    its row groups are flushed).
    """
    writer = TaskOutputWriter(job, task, sink)
    handle = handle or AttemptHandle()
    canonical: dict[pa.Schema, pa.Schema] = {}
    try:
        for batch in batches:
            if handle.cancelled:
                raise TaskCancelledError(
                    f"{task.attempt_id} stopped after {writer.rows} rows: its engine cancelled it"
                )
            if batch.schema not in canonical:
                canonical[batch.schema] = _write_schema(batch.schema, job)
            schema = canonical[batch.schema]
            writer.write(conform(batch, schema))
            handle.report(writer.rows, writer.written)
        if writer.is_empty and task.partition == 0 and not job.partition_by and schema:
            writer.write_empty(_write_schema(schema, job))
    except BaseException:
        writer.abort()
        raise
    return writer.close()
