"""Format writers over pyarrow: partition splitting, Spark file naming and file rolling."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.orc as paorc
import pyarrow.parquet as pq

from .errors import InvalidArgumentError
from .paths import partition_dir, partition_value_text
from .protocol import JobContext, OutputSink, TaskAttemptContext, WrittenFile

#: format -> file extension Spark gives it with its default codec
EXTENSIONS = {"parquet": ".snappy.parquet", "orc": ".snappy.orc", "csv": ".csv", "json": ".json"}
FORMATS = tuple(EXTENSIONS)


class _JsonLinesWriter:
    """Spark's JSON output: one object per line, nulls left out."""

    def __init__(self, sink: pa.NativeFile, schema: pa.Schema) -> None:
        self._sink = sink

    def write_batch(self, batch: pa.RecordBatch) -> None:
        lines = []
        for row in batch.to_pylist():
            kept = {k: v for k, v in row.items() if v is not None}
            lines.append(json.dumps(kept, default=_json_default, ensure_ascii=False))
        if lines:
            self._sink.write(("\n".join(lines) + "\n").encode())

    def close(self) -> None:
        pass


class _OrcWriter:
    """pyarrow's ORC writer takes tables; give it the batch interface of the others."""

    def __init__(self, sink: pa.NativeFile) -> None:
        self._writer = paorc.ORCWriter(sink, compression="snappy")

    def write_batch(self, batch: pa.RecordBatch) -> None:
        self._writer.write(pa.Table.from_batches([batch]))

    def close(self) -> None:
        self._writer.close()


def _json_default(value: object) -> object:
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.decode("latin-1")
    return str(value)


def _open_format_writer(fmt: str, sink: pa.NativeFile, schema: pa.Schema):
    if fmt == "parquet":
        return pq.ParquetWriter(sink, schema, compression="snappy")
    if fmt == "orc":
        return _OrcWriter(sink)
    if fmt == "csv":
        return pacsv.CSVWriter(sink, schema)
    if fmt == "json":
        return _JsonLinesWriter(sink, schema)
    raise InvalidArgumentError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")


@dataclass
class _OpenFile:
    relpath: str
    stream: pa.NativeFile
    writer: object
    partition: dict[str, str | None]
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
        self.ext = EXTENSIONS[job.format]
        self._open: dict[str, _OpenFile] = {}
        self._counters: dict[str, int] = {}
        self.files: list[WrittenFile] = []

    def _name(self, directory: str) -> str:
        counter = self._counters.get(directory, 0)
        self._counters[directory] = counter + 1
        uuid_part = f"-{self.job.job_id}" if self.job.options.unique_filenames else ""
        sep = "." if directory else "-"
        name = f"part-{self.task.partition:05d}{uuid_part}{sep}c{counter:03d}{self.ext}"
        return f"{directory}/{name}" if directory else name

    def _file_for(self, directory: str, partition: dict, schema: pa.Schema) -> _OpenFile:
        current = self._open.get(directory)
        if current is not None and self.max_records and current.rows >= self.max_records:
            self._close(directory)
            current = None
        if current is None:
            relpath = self._name(directory)
            stream = self.sink.open(relpath)
            writer = _open_format_writer(self.job.format, stream, schema)
            current = self._open[directory] = _OpenFile(relpath, stream, writer, partition)
        return current

    def write(self, batch: pa.RecordBatch) -> None:
        if batch.num_rows == 0:
            return
        for directory, partition, rows in split_by_partition(batch, self.job.partition_by):
            offset = 0
            while offset < rows.num_rows:
                target = self._file_for(directory, partition, rows.schema)
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
        written = WrittenFile(current.relpath, current.rows, size, current.partition)
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
            self.sink.abort(current.relpath)
            with contextlib.suppress(Exception):
                current.writer.close()  # release it now; the sink discards what it writes
            with contextlib.suppress(Exception):
                current.stream.close()


def split_by_partition(
    batch: pa.RecordBatch, columns: tuple[str, ...]
) -> Iterable[tuple[str, dict[str, str | None], pa.RecordBatch]]:
    """Group rows by partition values; partition columns leave the data, as in Spark."""
    if not columns:
        yield "", {}, batch
        return
    codes = np.zeros(batch.num_rows, dtype=np.int64)
    for name in columns:
        encoded = pc.dictionary_encode(batch.column(name))
        width = len(encoded.dictionary) + 1
        indices = encoded.indices.fill_null(width - 1).to_numpy(zero_copy_only=False)
        codes = codes * width + indices.astype(np.int64)
    order = np.argsort(codes, kind="stable")
    _, starts = np.unique(codes[order], return_index=True)
    data = batch.drop_columns(list(columns))
    keys = batch.select(list(columns))
    ends = [*starts[1:], batch.num_rows]
    for start, end in zip(starts, ends, strict=True):
        rows = pa.array(order[start:end])
        row = int(order[start])
        values = [_scalar(keys.column(c), row) for c in columns]
        texts = [partition_value_text(v) or None for v in values]
        partition = dict(zip(columns, texts, strict=True))
        yield partition_dir(list(columns), values), partition, data.take(rows)


def _scalar(column: pa.Array, row: int) -> object:
    """A Python value; float32 stays float32 so it prints with float32's shortest digits."""
    value = column[row].as_py()
    if value is not None and pa.types.is_float32(column.type):
        return np.float32(value)
    return value


def write_task_output(
    job: JobContext,
    task: TaskAttemptContext,
    batches: Iterable[pa.RecordBatch],
    sink: OutputSink,
    schema: pa.Schema | None = None,
) -> list[WrittenFile]:
    writer = TaskOutputWriter(job, task, sink)
    try:
        for batch in batches:
            schema = batch.schema
            writer.write(batch)
        if writer.is_empty and task.partition == 0 and not job.partition_by and schema:
            writer.write_empty(schema)
    except BaseException:
        writer.abort()
        raise
    return writer.close()
