"""A data file's Iceberg entry, worked out by the task that wrote it and carried to job commit.

The task has the Parquet footer its writer produced and the partition values it split its rows
by: it computes the file's statistics against the job's field ids (pyiceberg's own functions,
so they are exactly what ``add_files`` would record) and passes the partition values
explicitly, so job commit never reads a data file back and never infers a partition from a
path or from statistics (a column missing from a file would be recorded as null).
"""

from __future__ import annotations

import base64
import json
from functools import lru_cache
from typing import Any

from .schema import TableShape


def file_entry(footer: Any, values: tuple[Any, ...], shape: TableShape) -> str:
    """The file's statistics and partition, as compact JSON (bytes as base64)."""
    from pyiceberg.conversions import to_bytes
    from pyiceberg.io.pyarrow import data_file_statistics_from_parquet_metadata
    from pyiceberg.partitioning import partition_record_value

    schema = shape.schema()
    plan, paths = _statistics_plan(shape)
    stats = data_file_statistics_from_parquet_metadata(footer, plan, paths).to_serialized_dict()
    partition = []
    for field, value in zip(shape.spec().fields, values, strict=True):
        source = schema.find_field(field.source_id).field_type
        internal = partition_record_value(field, value, schema)
        partition.append(None if internal is None else _b64(to_bytes(source, internal)))
    return json.dumps({"stats": _encoded(stats), "partition": partition}, separators=(",", ":"))


@lru_cache(maxsize=16)
def _statistics_plan(shape: TableShape) -> tuple[dict, dict]:
    """What to record per column, and each Parquet column's field id: once per shape."""
    from pyiceberg.io.pyarrow import compute_statistics_plan, parquet_path_to_id_mapping

    schema = shape.schema()
    return compute_statistics_plan(schema, dict(shape.metrics)), parquet_path_to_id_mapping(schema)


def data_file(entry: str, path: str, size: int, shape: TableShape, spec_id: int):
    """The pyiceberg ``DataFile`` of one file from its task's entry (driver side)."""
    from pyiceberg.conversions import from_bytes
    from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
    from pyiceberg.typedef import Record

    raw = json.loads(entry)
    schema = shape.schema()
    values = []
    for field, value in zip(shape.spec().fields, raw["partition"], strict=True):
        source = schema.find_field(field.source_id).field_type
        values.append(None if value is None else from_bytes(source, base64.b64decode(value)))
    return DataFile.from_args(
        content=DataFileContent.DATA,
        file_path=path,
        file_format=FileFormat.PARQUET,
        partition=Record(*values),
        file_size_in_bytes=size,
        sort_order_id=None,
        spec_id=spec_id,
        equality_ids=None,
        key_metadata=None,
        **_decoded(raw["stats"]),
    )


_BYTES_MAPS = ("lower_bounds", "upper_bounds")
_COUNT_MAPS = ("column_sizes", "value_counts", "null_value_counts", "nan_value_counts")


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _encoded(stats: dict[str, Any]) -> dict[str, Any]:
    out = dict(stats)
    for name in _COUNT_MAPS:
        out[name] = {str(k): v for k, v in stats[name].items()}
    for name in _BYTES_MAPS:
        out[name] = {str(k): _b64(v) for k, v in stats[name].items()}
    return out


def _decoded(stats: dict[str, Any]) -> dict[str, Any]:
    out = dict(stats)
    for name in _COUNT_MAPS:
        out[name] = {int(k): v for k, v in stats[name].items()}
    for name in _BYTES_MAPS:
        out[name] = {int(k): base64.b64decode(v) for k, v in stats[name].items()}
    return out
