"""An Iceberg job's table shape (schema with field ids, identity partition spec, metrics
properties), fixed on the driver before any task runs, and the Arrow schema its files carry.

Tasks compute each file's Iceberg statistics against the field ids of this shape, so it is
decided once: the existing table's own schema when there is one (checked against the data
before anything is uploaded), else a fresh one with ids assigned in column order as
``create_table`` assigns them. Files carry the field ids (``PARQUET:field_id``), which survive
later renames where a name mapping would not, and keep their partition columns: Iceberg readers
that do not project identity partitions from metadata still read the values.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import pyarrow as pa

from ..errors import InvalidArgumentError, SchemaMismatchError
from ..sparktypes import file_schema

#: committers that can write an Iceberg table: the S3 ones, whose job commit we control
ICEBERG_COMMITTERS = ("directory", "partitioned", "magic")
#: the Arrow field metadata key of a Parquet field id
FIELD_ID_KEY = b"PARQUET:field_id"
#: table properties that decide which statistics a data file records
_METRICS_PREFIX = "write.metadata.metrics."


def require_pyiceberg():
    """The ``pyiceberg`` module, or a typed error saying which extra installs it."""
    try:
        import pyiceberg
    except ImportError as exc:
        raise InvalidArgumentError(
            "format='iceberg' needs the pyiceberg package: pip install 's3commit-sdk[iceberg]'"
        ) from exc
    return pyiceberg


@dataclass(frozen=True)
class TableShape:
    """What every task of an Iceberg job needs: the schema (JSON, field ids), the partition
    columns, the metrics properties, and the snapshot the job read (None: no table yet)."""

    schema_json: str
    partition_by: tuple[str, ...]
    metrics: tuple[tuple[str, str], ...] = ()
    read_snapshot: int | None = None
    exists: bool = False

    def to_json(self) -> str:
        return json.dumps(
            {
                "schema": json.loads(self.schema_json),
                "partitionBy": list(self.partition_by),
                "metrics": dict(self.metrics),
                "readSnapshot": self.read_snapshot,
                "exists": self.exists,
            },
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, text: str) -> TableShape:
        raw = json.loads(text)
        return cls(
            schema_json=json.dumps(raw["schema"], separators=(",", ":")),
            partition_by=tuple(raw["partitionBy"]),
            metrics=tuple(sorted(raw.get("metrics", {}).items())),
            read_snapshot=raw.get("readSnapshot"),
            exists=bool(raw.get("exists")),
        )

    def schema(self):
        return _parsed_schema(self.schema_json)

    def spec(self):
        return _spec_of(self.schema_json, self.partition_by)


@lru_cache(maxsize=16)
def _parsed_schema(text: str):
    """Parsed once per process and shape: every file of a job asks for it."""
    from pyiceberg.schema import Schema

    return Schema.model_validate_json(text)


@lru_cache(maxsize=16)
def _spec_of(text: str, partition_by: tuple[str, ...]):
    return identity_spec(_parsed_schema(text), partition_by)


def check_committer(committer: str) -> None:
    if committer not in ICEBERG_COMMITTERS:
        raise InvalidArgumentError(
            f"format='iceberg' needs one of the S3 committers {', '.join(ICEBERG_COMMITTERS)}, "
            f"not {committer!r}"
        )


def fresh_schema(arrow: pa.Schema):
    """The Iceberg schema of data of ``arrow`` (the canonical file types), every field optional,
    ids assigned as a new table assigns them."""
    require_pyiceberg()
    from pyiceberg.io.pyarrow import _ConvertToIcebergWithoutIDs, visit_pyarrow
    from pyiceberg.schema import assign_fresh_schema_ids

    optional = pa.schema([f.with_nullable(True) for f in file_schema(arrow)])
    try:
        converted = visit_pyarrow(optional, _ConvertToIcebergWithoutIDs())
    except (TypeError, ValueError) as exc:  # a type Iceberg has no counterpart for
        raise InvalidArgumentError(f"an Iceberg table cannot hold this data: {exc}") from exc
    return assign_fresh_schema_ids(converted)


def identity_spec(schema: Any, partition_by: tuple[str, ...]):
    """The identity partition spec on ``partition_by``, field ids from 1000 as Iceberg's."""
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.transforms import IdentityTransform
    from pyiceberg.types import PrimitiveType

    fields = []
    for offset, name in enumerate(partition_by):
        source = schema.find_field(name)
        if not isinstance(source.field_type, PrimitiveType):
            raise InvalidArgumentError(
                f"cannot partition an Iceberg table by {name!r}, of type {source.field_type}: "
                "partition by a column of a primitive type"
            )
        fields.append(
            PartitionField(
                source_id=source.field_id,
                field_id=1000 + offset,
                transform=IdentityTransform(),
                name=name,
            )
        )
    return PartitionSpec(*fields)


def shape_of_table(table: Any, arrow: pa.Schema, partition_by: tuple[str, ...]) -> TableShape:
    """The shape of an existing table, once the data fits it; else a typed error, before any
    upload."""
    url = table.location()
    spec_columns = tuple(table.schema().find_field(f.source_id).name for f in table.spec().fields)
    identity = all(str(f.transform) == "identity" for f in table.spec().fields)
    if spec_columns != tuple(partition_by) or not identity:
        raise InvalidArgumentError(
            f"the Iceberg table at {url} is partitioned by {table.spec()}, this job by "
            f"{list(partition_by)}: give partition_by={list(spec_columns)} (identity "
            "partitions only)"
        )
    difference = schema_difference(table.schema(), fresh_schema(arrow))
    if difference:
        raise SchemaMismatchError(
            f"the data does not fit the Iceberg table at {url}: {difference}. Nothing was uploaded."
        )
    metrics = {k: v for k, v in table.properties.items() if k.startswith(_METRICS_PREFIX)}
    snapshot = table.current_snapshot()
    return TableShape(
        schema_json=table.schema().model_dump_json(),
        partition_by=tuple(partition_by),
        metrics=tuple(sorted(metrics.items())),
        read_snapshot=None if snapshot is None else snapshot.snapshot_id,
        exists=True,
    )


def new_table_shape(arrow: pa.Schema, partition_by: tuple[str, ...]) -> TableShape:
    schema = fresh_schema(arrow)
    identity_spec(schema, partition_by)  # refuses a nested partition column now
    return TableShape(schema.model_dump_json(), tuple(partition_by))


def schema_difference(table: Any, data: Any) -> str | None:
    """How the data's columns differ from the table's (names, types, ids aside), or None."""
    have = {f.name: str(f.field_type) for f in table.fields}
    want = {f.name: str(f.field_type) for f in data.fields}
    missing = sorted(set(have) - set(want))
    extra = sorted(set(want) - set(have))
    changed = sorted(n for n in set(have) & set(want) if have[n] != want[n])
    parts = [
        *([f"columns missing from the data: {missing}"] if missing else []),
        *([f"columns not in the table: {extra}"] if extra else []),
        *(f"column {n!r} is {want[n]} in the data, {have[n]} in the table" for n in changed),
    ]
    return "; ".join(parts) or None


def same_schema(a: Any, b: Any) -> bool:
    """Whether two Iceberg schemas have the same fields (names, ids, types), ids of schemas
    aside."""
    return a.as_struct() == b.as_struct()


def arrow_with_field_ids(arrow: pa.Schema, schema: Any) -> pa.Schema:
    """``arrow`` (the file's types, in the table's column order) with each field, element, key
    and value carrying its Iceberg field id."""
    return pa.schema(
        [_field(f.name, arrow.field(f.name).type, f.field_id, f.field_type) for f in schema.fields]
    )


def _field(name: str, arrow_type: pa.DataType, field_id: int, kind: Any, nullable=True) -> pa.Field:
    return pa.field(
        name,
        _typed(arrow_type, kind),
        nullable,
        metadata={FIELD_ID_KEY: str(field_id).encode()},
    )


def _typed(arrow_type: pa.DataType, kind: Any) -> pa.DataType:
    from pyiceberg.types import ListType, MapType, StructType

    if isinstance(kind, StructType):
        return pa.struct(
            [
                _field(f.name, arrow_type.field(f.name).type, f.field_id, f.field_type)
                for f in kind.fields
            ]
        )
    if isinstance(kind, ListType):
        element = _field("element", arrow_type.value_type, kind.element_id, kind.element_type)
        return pa.list_(element)
    if isinstance(kind, MapType):
        key = _field("key", arrow_type.key_type, kind.key_id, kind.key_type, nullable=False)
        value = _field("value", arrow_type.item_type, kind.value_id, kind.value_type)
        return pa.map_(key, value)
    return arrow_type
