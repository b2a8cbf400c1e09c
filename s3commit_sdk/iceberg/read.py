"""Reading an Iceberg table through the s3commit reader: the files of one snapshot.

The current snapshot, or the one ``snapshotId`` names, or the one current at
``asOfTimestamp`` (milliseconds since the epoch, or ISO 8601 text). The files are the ones the
snapshot's manifests name, never a listing: a replace's old files stay in storage for time
travel. Columns come from the snapshot's schema; the files hold the partition columns too.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import pyarrow as pa

from ..errors import InvalidArgumentError, InvalidPathError
from ..options import CommitOptions
from ..paths import S3Location, parse_s3_url
from ..store import S3Settings
from .catalog import CatalogConfig
from .table import IcebergLog


@dataclass(frozen=True)
class IcebergRead:
    """Which table and snapshot a read takes."""

    options: CommitOptions
    snapshot_id: int | None = None
    as_of_ms: int | None = None

    @classmethod
    def parse(cls, options: CommitOptions, snapshot: Any, as_of: Any) -> IcebergRead:
        snapshot_id = None
        if snapshot is not None:
            text = str(snapshot).strip()
            if not text.lstrip("-").isdigit():
                raise InvalidArgumentError(f"snapshotId={snapshot!r}: give a snapshot id")
            snapshot_id = int(text)
        if snapshot_id is not None and as_of is not None:
            raise InvalidArgumentError("give snapshotId or asOfTimestamp, not both")
        return cls(options, snapshot_id, None if as_of is None else _milliseconds(as_of))


def _milliseconds(value: Any) -> int:
    text = str(value).strip()
    if text.isdigit():
        return int(text)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidArgumentError(
            f"asOfTimestamp={value!r}: give milliseconds since the epoch or ISO 8601 text "
            "such as 2026-11-24T09:30:00+00:00"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return int(moment.timestamp() * 1000)


def snapshot_files(
    location: S3Location, settings: S3Settings, read: IcebergRead
) -> tuple[list[tuple[str, int]], pa.Schema]:
    """(key, size) of every data file of the chosen snapshot, and its columns."""
    from pyiceberg.io.pyarrow import _pyarrow_schema_ensure_small_types, schema_to_pyarrow

    log = IcebergLog(location, settings, CatalogConfig.of(read.options, location))
    table = log.open()
    if table is None:
        raise InvalidPathError(
            f"no Iceberg table {log.name} in the {log.config.shown()} catalog: give "
            "iceberg.table and the catalog options the table was written with"
        )
    snapshot = _snapshot(table, read, log.name)
    if snapshot is None:  # a table without data yet
        return [], _pyarrow_schema_ensure_small_types(schema_to_pyarrow(table.schema(), {}, False))
    schema = table.schemas().get(snapshot.schema_id, table.schema())
    files = []
    for task in table.scan(snapshot_id=snapshot.snapshot_id).plan_files():
        path = parse_s3_url(task.file.file_path)
        if path.bucket != location.bucket:
            raise InvalidPathError(
                f"{task.file.file_path} of the Iceberg table {log.name} lies in another bucket "
                f"than {location.url()}: read it with an Iceberg engine"
            )
        files.append((path.prefix, task.file.file_size_in_bytes))
    arrow = schema_to_pyarrow(schema, {}, False)
    return files, _pyarrow_schema_ensure_small_types(arrow)


def _snapshot(table: Any, read: IcebergRead, name: str) -> Any:
    if read.snapshot_id is not None:
        found = table.snapshot_by_id(read.snapshot_id)
        if found is None:
            known = [s.snapshot_id for s in table.snapshots()]
            raise InvalidArgumentError(
                f"the Iceberg table {name} has no snapshot {read.snapshot_id} (it has {known})"
            )
        return found
    if read.as_of_ms is not None:
        found = table.snapshot_as_of_timestamp(read.as_of_ms)
        if found is None:
            raise InvalidArgumentError(
                f"the Iceberg table {name} has no snapshot at or before asOfTimestamp "
                f"{read.as_of_ms} ms"
            )
        return found
    return table.current_snapshot()
