"""The Delta schema of a job, worked out and checked before anything is uploaded."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa

from ..errors import InvalidArgumentError
from ..sparktypes import file_schema

#: characters delta-spark refuses in column names unless column mapping is enabled
_BAD_NAME_CHARACTERS = set(" ,;{}()\n\t=")
#: committers that can write a Delta table: the S3 ones, whose job commit we control
DELTA_COMMITTERS = ("directory", "partitioned", "magic")


def require_deltalake():
    """The ``deltalake`` module, or a typed error saying which extra installs it."""
    try:
        import deltalake
    except ImportError as exc:
        raise InvalidArgumentError(
            "format='delta' needs the deltalake package (delta-rs): "
            "pip install 's3commit-sdk[delta]'"
        ) from exc
    return deltalake


def delta_table_schema(schema: pa.Schema, partition_by: tuple[str, ...], committer: str) -> str:
    """The table's Delta schema (``schemaString``) for data of ``schema``, or a typed error.

    Data columns keep their order, partition columns come last (as Spark lays a table out);
    types are the ones the Parquet files hold. Every field is nullable, so a later job whose
    input says otherwise appends to the same table.
    """
    if committer not in DELTA_COMMITTERS:
        raise InvalidArgumentError(
            f"format='delta' needs one of the S3 committers {', '.join(DELTA_COMMITTERS)}, "
            f"not {committer!r}"
        )
    for name in partition_by:
        if pa.types.is_timestamp(schema.field(name).type):
            raise InvalidArgumentError(
                f"cannot partition a Delta table by the timestamp column {name!r}: Delta and "
                "Spark render timestamp partition values differently; partition by a date or "
                "a string column"
            )
    for field in schema:
        _check_names(field.name, field.type)
    data = [f for f in schema if f.name not in partition_by]
    arrow = file_schema(pa.schema(data + [schema.field(name) for name in partition_by]))
    deltalake = require_deltalake()
    try:
        text = deltalake.Schema.from_arrow(arrow).to_json()
    except Exception as exc:  # delta-rs raises several types for types it cannot hold
        raise InvalidArgumentError(f"a Delta table cannot hold this data: {exc}") from exc
    return json.dumps(permissive(json.loads(text)), separators=(",", ":"))


def _check_names(name: str, arrow_type: pa.DataType) -> None:
    bad = sorted(_BAD_NAME_CHARACTERS & set(name))
    if bad:
        raise InvalidArgumentError(
            f"column name {name!r} holds {bad!r}, which Delta readers refuse without column "
            "mapping: rename the column"
        )
    if pa.types.is_struct(arrow_type):
        for i in range(arrow_type.num_fields):
            _check_names(arrow_type.field(i).name, arrow_type.field(i).type)
    elif pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        _check_names(name, arrow_type.value_type)
    elif pa.types.is_map(arrow_type):
        _check_names(name, arrow_type.item_type)


def permissive(node: Any) -> Any:
    """A Delta schema (or type) with every field, element and map value nullable, no metadata."""
    if not isinstance(node, dict):
        return node
    kind = node.get("type")
    if kind == "struct":
        return {
            "type": "struct",
            "fields": [
                {"name": f["name"], "type": permissive(f["type"]), "nullable": True, "metadata": {}}
                for f in node["fields"]
            ],
        }
    if kind == "array":
        return {**node, "elementType": permissive(node["elementType"]), "containsNull": True}
    if kind == "map":
        return {
            **node,
            "keyType": permissive(node["keyType"]),
            "valueType": permissive(node["valueType"]),
            "valueContainsNull": True,
        }
    return node


def schema_difference(table: str, job: str) -> str | None:
    """How a job's schema differs from the table's (names, types), or None if it fits."""
    have = {f["name"]: permissive(f["type"]) for f in json.loads(table)["fields"]}
    want = {f["name"]: permissive(f["type"]) for f in json.loads(job)["fields"]}
    missing = sorted(set(have) - set(want))
    extra = sorted(set(want) - set(have))
    changed = sorted(n for n in set(have) & set(want) if have[n] != want[n])
    parts = [
        *([f"columns missing from the data: {missing}"] if missing else []),
        *([f"columns not in the table: {extra}"] if extra else []),
        *(
            f"column {n!r} is {json.dumps(want[n])} in the data, {json.dumps(have[n])} in the table"
            for n in changed
        ),
    ]
    return "; ".join(parts) or None
