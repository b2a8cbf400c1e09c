"""The ``s3commit`` Spark data source: the committers behind ``df.write`` and ``spark.read``.

PySpark's Python Data Source API (4.x) calls ``writer()`` once per write on the driver side
(in a Python worker the driver's JVM starts; under Connect, on the server), ``write()`` once
per task on the executors, and ``commit()`` / ``abort()`` in yet another Python worker. So
``writer()`` validates and sets the job up (bucket check, conflict checks, alive marker)
before any task runs; tasks run the committers' task side; ``commit()`` is job commit, whose
result is the ``_SUCCESS`` document (:func:`s3commit_sdk.read_result` reads it back);
``abort()`` is job abort, which finds the uploads of failed and killed attempts by job UUID
(the API has no per-task abort).

Reading lists the visible files as of the destination's last committed job (a commit in
progress is never read half: :mod:`.committed_view`), one input partition per file (large
Parquet files split by row groups), discovers Hive partition columns as Spark does, skips the
partition directories a pushed filter rules out as Spark would (:mod:`.pruning`), and returns
Arrow batches.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, replace

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    Filter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.types import StructField, StructType

from .api import new_job
from .committers import make_committer
from .engines.connect import attempts_settle_seconds
from .engines.spark import execute_spark_task, struct_to_arrow
from .errors import (
    InvalidOptionError,
    InvalidPathError,
    crossing_spark,
)
from .options import parse_text
from .protocol import JobContext, decode_messages
from .pruning import may_match, partition_values
from .reading import ReadOptions
from .runner import abort_job, commit_job, setup_job, split_task_phase
from .scan import FileSplit, Listing, file_schema, plan_splits, read_split
from .schema_check import checked_job
from .streaming.batch import StreamBatch

NAME = "s3commit"
#: a stream's job before its first batch: each batch's tasks replace it with their batch's
UNSTARTED = StreamBatch("unstarted", 0)


def register(spark) -> None:
    """Register the ``s3commit`` data source with a classic or Spark Connect session.

    Not needed where the package is installed on the driver (under Connect: on the server):
    Spark then finds the ``pyspark_s3commit`` module by itself.
    """
    spark.dataSource.register(S3CommitDataSource)


@dataclass
class TaskCommitMessage(WriterCommitMessage):
    """One task attempt's commit message (an encoded :class:`TaskCommit`), as
    ``write_committed``'s tasks return it."""

    message: str


class S3CommitDataSource(DataSource):
    """``df.write.format("s3commit")`` and ``spark.read.format("s3commit")``."""

    @classmethod
    def name(cls) -> str:
        return NAME

    # -- writing ------------------------------------------------------------------------------
    def writer(self, schema: StructType, overwrite: bool) -> S3CommitWriter:
        """Validate every option and set the job up, before Spark starts a task."""
        arrow = struct_to_arrow(schema, "UTC")  # the batches carry the session's zone
        started = time.time()
        with crossing_spark():  # in a Python worker: the typed error must survive Spark
            job = checked_job(write_job(self.options, arrow, overwrite))
            setup_job(job)
        now = time.time()
        return S3CommitWriter(job, arrow, now - started, now)

    def streamWriter(self, schema: StructType, overwrite: bool):
        """``df.writeStream.format("s3commit")``: every option and the destination checked
        once, as the query starts; each micro-batch is then one job (:mod:`.streaming.sink`)."""
        from .streaming.sink import S3CommitStreamWriter, stream_options

        arrow = struct_to_arrow(schema, "UTC")
        with crossing_spark():
            options, checkpoint = stream_options(self.options, overwrite)
            job = checked_job(write_job(options, arrow, False, stream=UNSTARTED))
            make_committer(job).check_destination()
        return S3CommitStreamWriter(job, arrow, checkpoint)

    # -- reading ------------------------------------------------------------------------------
    def schema(self) -> StructType:
        read = ReadOptions.parse(self.options)
        listing = read.list()
        from pyspark.sql.pandas.types import from_arrow_schema

        return table_schema(from_arrow_schema(file_schema(read.store, listing)), listing)

    def reader(self, schema: StructType) -> S3CommitReader:
        read = ReadOptions.parse(self.options)
        plan = ScanPlan(read, read.list(), schema)
        return PruningReader(plan) if _planning_with_pushdown() else S3CommitReader(plan)


def write_job(
    options: Mapping[str, str],
    schema: pa.Schema,
    overwrite: bool,
    stream: StreamBatch | None = None,
) -> JobContext:
    """The job ``df.write.format("s3commit")`` describes, validated as ``write_committed`` does.

    ``mode("overwrite")`` is conflict mode replace (the directory committer replaces the whole
    destination, the partitioned and magic committers with ``partition_by`` the partitions
    written), ``mode("append")`` is append; an explicit ``conflict_mode`` wins.
    """
    given = dict(options)
    path = given.pop("path", None)
    if not path:
        raise InvalidPathError("no destination: call .save('s3://bucket/prefix')")
    committer = given.pop("committer", "partitioned")
    columns = _partition_columns(given.pop("partition_by", None), schema)
    conflict_mode = given.pop("conflict_mode", None)
    provider = given.pop("credentials_provider", None)
    if provider is not None:  # a blank one would be taken as none
        provider = parse_text("credentials_provider", provider)
    return new_job(
        path,
        committer=committer,
        partition_by=columns,
        conflict_mode=conflict_mode,
        format=given.pop("format", "parquet"),
        options=given,
        schema=schema,
        conf={},
        credentials_provider=provider,
        default_conflict_mode="replace" if overwrite else "append",
        stream=stream,
    )


def _partition_columns(text: str | None, schema: pa.Schema) -> list[str] | None:
    """The ``partition_by`` option's column names, comma-separated. A blank name is refused:
    dropped, it would make the write unpartitioned (or partitioned by fewer columns)."""
    if text is None:
        return None
    names = [name.strip() for name in str(text).split(",")]
    if not all(names):
        raise InvalidOptionError(
            f"option 'partition_by' is {text!r}, which names a blank column: give the columns "
            f"separated by commas (the data's columns: {', '.join(schema.names)}), or leave "
            "the option out",
            option="partition_by",
        )
    return names


class S3CommitWriter(DataSourceArrowWriter):
    """Pickled to every task and to the worker that commits or aborts the job."""

    def __init__(self, job: JobContext, schema: pa.Schema, setup_s: float, tasks_from: float):
        self.job, self.schema = job, schema
        self.setup_s, self.tasks_from = setup_s, tasks_from

    def write(self, iterator: Iterator[pa.RecordBatch]) -> TaskCommitMessage:
        """One task attempt; its typed error reaches the driver in its envelope."""
        return TaskCommitMessage(execute_spark_task(self.job, iterator, self.schema).encode())

    def commit(self, messages: list[TaskCommitMessage | None]) -> None:
        decoded = decode_messages(messages)
        tasks = time.time() - self.tasks_from
        phases = {"job_setup": self.setup_s, "tasks": tasks, **split_task_phase(decoded, tasks)}
        with crossing_spark():
            commit_job(self.job, decoded, phases)

    def abort(self, messages: list[TaskCommitMessage | None]) -> None:
        """Wait until Spark has destroyed the killed attempts, then abort by job UUID."""
        time.sleep(attempts_settle_seconds())
        with crossing_spark():
            abort_job(self.job, decode_messages(messages, strict=False))


# -- reading ----------------------------------------------------------------------------------
def table_schema(data: StructType, listing: Listing) -> StructType:
    """The file's columns, then the partition columns (which win over a same-named column)."""
    from pyspark.sql.pandas.types import from_arrow_type

    partition = set(listing.partition_columns)
    fields = [f for f in data.fields if f.name not in partition]
    for name, arrow_type in zip(listing.partition_columns, listing.partition_types, strict=True):
        fields.append(StructField(name, from_arrow_type(arrow_type), True))
    return StructType(fields)


class ScanPlan:
    """What every read task needs: the listing, the columns asked for, their Arrow types."""

    def __init__(self, read: ReadOptions, listing: Listing, schema: StructType) -> None:
        from pyspark.sql.pandas.types import to_arrow_schema

        self.read, self.listing = read, listing
        self.wanted = to_arrow_schema(schema, timezone="UTC")
        partition = set(listing.partition_columns)
        self.data = pa.schema([f for f in self.wanted if f.name not in partition])
        self.pruned: set[str] = set()

    def splits(self) -> list[FileSplit]:
        kept = tuple(f for f in self.listing.files if f.key not in self.pruned)
        listing = replace(self.listing, files=kept)
        return plan_splits(self.read.store, listing, self.read.split_bytes)


class S3CommitReader(DataSourceReader):
    """One input partition per file (or per row-group run of a large Parquet file)."""

    def __init__(self, plan: ScanPlan) -> None:
        self.plan = plan

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(split) for split in self.plan.splits()]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Spark asks for one partition of value None when ``partitions()`` gave none (every
        file pruned, or none there): it holds no rows."""
        if partition.value is None:
            return
        plan = self.plan
        yield from read_split(
            plan.read.store, plan.listing, partition.value, plan.data, plan.wanted, plan.read.zone
        )


class PruningReader(S3CommitReader):
    """Drops the files of partitions that no row of a pushed filter can come from
    (:mod:`.pruning`: Spark's null, NaN and ordering rules).

    Only used when Spark asks for pushdown (``spark.sql.python.filterPushdown.enabled``):
    Spark's planning fails for a reader defining ``pushFilters`` while it is off. Every filter
    is handed back, so Spark still evaluates them all on the rows.
    """

    def pushFilters(self, filters: list[Filter]) -> Iterable[Filter]:
        plan = self.plan
        listing, types = plan.listing, {f.name: f.type for f in plan.wanted}
        for file in listing.files:
            values = partition_values(listing.partition_columns, file.values, types, plan.read.zone)
            if not may_match(filters, values):
                plan.pruned.add(file.key)
        return filters


def _planning_with_pushdown() -> bool:
    """Whether ``reader()`` was called by Spark's filter-pushdown planning worker."""
    frame = sys._getframe(1)
    for _ in range(4):
        frame = frame.f_back
        if frame is None:
            return False
        if frame.f_code.co_filename.endswith("data_source_pushdown_filters.py"):
            return True
    return False
