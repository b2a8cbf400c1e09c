"""Reading a destination as its committers left it: what ``spark.read.format("s3commit")``
reads, and :func:`read_table`, the same without Spark (pyarrow, pandas).

A destination is read as of its last committed job (:mod:`.committed_view`): a job, or a
stream's micro-batch, whose completion is under way is never read half, where a plain listing
may show part of it. A Delta table is read from its log, an Iceberg table from a snapshot.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from .errors import InvalidArgumentError, InvalidPathError
from .options import parse_size, resolve_options
from .paths import S3Location, parse_s3_url
from .scan import Listing, file_schema, list_table, plan_splits, read_split, store_for
from .store import S3Settings

_DEFAULT_SPLIT = "128M"  # as spark.sql.files.maxPartitionBytes


@dataclass(frozen=True)
class ReadOptions:
    """``spark.read.format("s3commit")`` options: S3 ones as ``write_committed`` takes them."""

    location: S3Location
    format: str | None
    zone: str
    split_bytes: int
    settings: S3Settings
    version: int | None = None  # versionAsOf: a Delta table's version
    iceberg: Any = None  # format iceberg: the table and snapshot (iceberg.read.IcebergRead)

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> ReadOptions:
        given = dict(options)
        path = given.pop("path", None)
        if not path:
            raise InvalidPathError("no source: call .load('s3://bucket/prefix')")
        fmt = given.pop("format", None)
        version = _version_as_of(given.pop("versionasof", None))
        zone = given.pop("timezone", "UTC")
        split = parse_size("maxPartitionBytes", given.pop("maxpartitionbytes", _DEFAULT_SPLIT))
        provider = given.pop("credentials_provider", None)
        snapshot, as_of = given.pop("snapshotid", None), given.pop("asoftimestamp", None)
        resolved = resolve_options(given)
        settings = S3Settings.resolve(resolved, provider=provider)
        iceberg = None
        if fmt == "iceberg":
            from .iceberg.read import IcebergRead

            iceberg = IcebergRead.parse(resolved, snapshot, as_of)
        elif snapshot is not None or as_of is not None:
            raise InvalidArgumentError(
                "snapshotId and asOfTimestamp read a snapshot of an Iceberg table: give "
                ".option('format', 'iceberg')"
            )
        return cls(parse_s3_url(path), fmt, zone, split, settings, version, iceberg)

    @property
    def store(self):
        return store_for(self.settings)

    def list(self) -> Listing:
        return list_table(self.store, self.location, self.format, self.version, self.iceberg)


def _version_as_of(text: str | None) -> int | None:
    if text is None:
        return None
    if not str(text).strip().isdigit():
        raise InvalidArgumentError(f"versionAsOf={text!r}: give a Delta table version, 0 or more")
    return int(text)


def read_table(
    path: str,
    *,
    format: str | None = None,
    options: Mapping[str, Any] | None = None,
    columns: list[str] | None = None,
) -> pa.Table:
    """Everything committed at the S3 destination ``path``, as one Arrow table
    (``.to_pandas()`` for pandas): the rows ``spark.read.format("s3commit")`` reads, with the
    same options (``format``: a file format, ``delta`` or ``iceberg``; ``options``: S3 options,
    ``versionAsOf``, ``snapshotId``, ``asOfTimestamp``, the Iceberg catalog's), partition
    columns last. ``columns``: only these.
    """
    given = {str(k).lower(): str(v) for k, v in (options or {}).items()}
    given["path"] = path
    if format is not None:
        given["format"] = format
    read = ReadOptions.parse(given)
    store, listing = read.store, read.list()
    data = file_schema(store, listing)
    partitions = [
        pa.field(c, t)
        for c, t in zip(listing.partition_columns, listing.partition_types, strict=True)
    ]
    names = {f.name for f in partitions}
    wanted = pa.schema([*(f for f in data if f.name not in names), *partitions])
    if columns is not None:
        missing = sorted(set(columns) - set(wanted.names))
        if missing:
            raise InvalidArgumentError(f"columns {missing} are not in {path} ({wanted.names})")
        wanted = pa.schema([wanted.field(c) for c in columns])
    stored = pa.schema([f for f in data if f.name in wanted.names and f.name not in names])
    batches = [
        batch
        for split in plan_splits(store, listing, read.split_bytes)
        for batch in read_split(store, listing, split, stored, wanted, read.zone)
    ]
    return pa.Table.from_batches(batches, wanted)
