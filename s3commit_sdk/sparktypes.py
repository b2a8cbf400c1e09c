"""Arrow types as Spark holds them, and the schema checks Spark's file writers make.

Every input (Spark's Arrow batches, pandas, pyarrow) is cast to one canonical Arrow form before
it is written, so the same data gives the same file schema whichever engine ran: the Arrow
type PySpark's ``to_arrow_type`` gives for the Spark type that Spark's readers would see.
"""

from __future__ import annotations

import datetime
import re
from typing import Any

import pyarrow as pa

from .errors import InvalidArgumentError

#: Widened as Spark's Parquet reader widens unsigned integers, so every value still fits.
_UNSIGNED = {
    pa.uint8(): pa.int16(),
    pa.uint16(): pa.int32(),
    pa.uint32(): pa.int64(),
    pa.uint64(): pa.decimal128(20, 0),
}
MAX_DECIMAL_PRECISION = 38
#: Formats whose Spark writer refuses, or whose file cannot carry, a column of Arrow's null type.
_NO_NULL_TYPE = ("parquet", "orc", "csv")


def canonical_type(arrow_type: pa.DataType, timezone: str | None, where: str) -> pa.DataType:
    """The Arrow type Spark would hand over for ``arrow_type``; refuse what Spark cannot write.

    ``timezone`` replaces the zone of zoned timestamps (the instants stay the same); None keeps
    it. ``where`` names the column for the error message.
    """
    t = arrow_type
    if isinstance(t, pa.BaseExtensionType):
        raise _refused(where, t, "extension types have no Spark equivalent; convert it first")
    if pa.types.is_dictionary(t):
        return canonical_type(t.value_type, timezone, where)
    if t in _UNSIGNED:
        return _UNSIGNED[t]
    if pa.types.is_float16(t):
        return pa.float32()
    if pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return pa.string()
    if pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return pa.binary()
    if pa.types.is_fixed_size_binary(t):
        return pa.binary()
    if pa.types.is_date64(t):
        return pa.date32()
    if pa.types.is_timestamp(t):
        return pa.timestamp("us", tz=t.tz if t.tz is None or timezone is None else timezone)
    if pa.types.is_decimal(t):
        if t.precision > MAX_DECIMAL_PRECISION:
            raise _refused(where, t, "Spark decimals hold at most 38 digits")
        return pa.decimal128(t.precision, t.scale)
    if _is_list(t):
        item = t.value_field
        element = canonical_type(item.type, timezone, f"{where}[]")
        return pa.list_(pa.field("element", element, item.nullable, item.metadata))
    if pa.types.is_map(t):
        key = canonical_type(t.key_type, timezone, f"{where}.key")
        value = canonical_type(t.item_type, timezone, f"{where}.value")
        return pa.map_(pa.field("key", key, False), pa.field("value", value, t.item_field.nullable))
    if pa.types.is_struct(t):
        if t.num_fields == 0:
            raise _refused(where, t, "Spark's writers refuse empty structs")
        return pa.struct(
            [
                f.with_type(canonical_type(f.type, timezone, f"{where}.{f.name}"))
                for f in (t.field(i) for i in range(t.num_fields))
            ]
        )
    if _is_plain(t):
        return t
    raise _refused(where, t, "Spark's file writers cannot round-trip it (intervals, times)")


def canonical_schema(schema: pa.Schema, timezone: str | None = None) -> pa.Schema:
    """``schema`` with canonical types and no schema-level metadata (pandas' is dropped)."""
    return pa.schema([f.with_type(canonical_type(f.type, timezone, repr(f.name))) for f in schema])


def file_schema(schema: pa.Schema) -> pa.Schema:
    """The schema stored in Parquet and ORC files: zoned timestamps as UTC instants.

    The zone only decides how partition values, JSON and CSV render an instant; binary files
    store the instant, so the file does not depend on the session's time zone.
    """
    return canonical_schema(schema, "UTC")


def conform(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """``batch`` cast to ``schema`` (truncating to microseconds and days, as Spark does)."""
    if batch.schema.equals(schema):
        return batch
    return batch.cast(schema, safe=False)


#: The first day of the Gregorian calendar; Java's ORC reader reads earlier days in the Julian one.
_GREGORIAN_START = datetime.date(1582, 10, 15)
_GREGORIAN_DAYS = (_GREGORIAN_START - datetime.date(1970, 1, 1)).days
_GREGORIAN_MICROS = _GREGORIAN_DAYS * 86_400_000_000


def check_orc_values(batch: pa.RecordBatch) -> None:
    """Refuse what Spark would misread from an ORC file pyarrow wrote: dates and timestamps
    before 1582-10-15 (pyarrow does not flag the proleptic calendar, so Java's ORC reader shifts
    them by days), and timestamps before 1970 with a fraction of a second (stored in a form
    Java's ORC reader rejects, failing every read of the file)."""
    for field, column in zip(batch.schema, batch.columns, strict=True):
        for values in _leaves(column):
            if pa.types.is_date32(values.type):
                days = values.cast(pa.int32()).fill_null(0).to_numpy()
                _refuse_where(field.name, values, days < _GREGORIAN_DAYS, "before 1582-10-15")
            elif pa.types.is_timestamp(values.type):
                micros = values.cast(pa.int64()).fill_null(0).to_numpy()
                old = micros < _GREGORIAN_MICROS
                _refuse_where(field.name, values, old, "before 1582-10-15")
                fraction = (micros < 0) & (micros % 1_000_000 != 0)
                _refuse_where(
                    field.name, values, fraction, "before 1970 with a fraction of a second"
                )


def _refuse_where(name: str, values: pa.Array, bad, what: str) -> None:
    if bad.any():
        raise InvalidArgumentError(
            f"column {name!r} holds {values[int(bad.argmax())]}, {what}, which Spark reads back "
            "wrong or not at all from ORC files written by pyarrow: write parquet instead"
        )


def _leaves(array: pa.Array) -> list[pa.Array]:
    """The arrays of every leaf value of ``array`` (list items, map keys and values, fields)."""
    t = array.type
    if pa.types.is_struct(t):
        return [leaf for child in array.flatten() for leaf in _leaves(child)]
    if pa.types.is_map(t):
        return _leaves(array.keys) + _leaves(array.items)
    if pa.types.is_list(t):
        return _leaves(array.flatten())
    return [array]


def check_schema(
    schema: pa.Schema, partition_by: tuple[str, ...], fmt: str, case_sensitive: bool = False
) -> None:
    """Refuse, before anything is uploaded, what Spark's writers refuse or cannot read back."""
    names = schema.names
    if not names:
        raise InvalidArgumentError("the data has no columns: there is nothing to write")
    fold = (lambda n: n) if case_sensitive else str.lower
    seen: dict[str, str] = {}
    for name in names:
        if fold(name) in seen:
            raise InvalidArgumentError(
                f"duplicate column names {seen[fold(name)]!r} and {name!r}"
                + ("" if case_sensitive else " (Spark compares names case-insensitively)")
                + "; rename one"
            )
        seen[fold(name)] = name
    missing = [c for c in partition_by if c not in names]
    if missing:
        raise InvalidArgumentError(
            f"partition column(s) {missing} not in the data; columns are {names}"
        )
    if partition_by and len(partition_by) == len(names):
        raise InvalidArgumentError("every column is a partition column: no data would be written")
    for name in partition_by:
        column_type = schema.field(name).type
        if not _is_partitionable(column_type):
            raise InvalidArgumentError(
                f"cannot partition by {name!r} of type {column_type}: partition values must "
                "be strings, numbers, booleans, dates or timestamps"
            )
    for f in schema:
        if f.name not in partition_by:
            _check_column(f.type, fmt, repr(f.name))


def _check_column(arrow_type: pa.DataType, fmt: str, where: str) -> None:
    if pa.types.is_null(arrow_type) and fmt in _NO_NULL_TYPE:
        raise InvalidArgumentError(
            f"column {where} holds only nulls and has no type, which {fmt} cannot store: "
            "cast it to the type it will hold"
        )
    nested = _children(arrow_type)
    if nested and fmt == "csv":
        raise InvalidArgumentError(
            f"CSV cannot hold column {where} of type {arrow_type} (Spark's CSV writer refuses "
            "arrays, structs and maps too): use parquet, orc or json, or flatten it"
        )
    names = [f.name for f in nested] if pa.types.is_struct(arrow_type) else []
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        raise InvalidArgumentError(f"struct column {where} has duplicate fields {duplicated}")
    for f in nested:
        _check_column(f.type, fmt, f"{where}.{f.name}")


def _children(t: pa.DataType) -> list[pa.Field]:
    if _is_list(t):
        return [t.value_field]
    if pa.types.is_map(t):
        return [t.key_field, t.item_field]
    if pa.types.is_struct(t):
        return [t.field(i) for i in range(t.num_fields)]
    return []


def _is_list(t: pa.DataType) -> bool:
    return (
        pa.types.is_list(t)
        or pa.types.is_large_list(t)
        or pa.types.is_fixed_size_list(t)
        or pa.types.is_list_view(t)
        or pa.types.is_large_list_view(t)
    )


def _is_plain(t: pa.DataType) -> bool:
    """Types that are already canonical."""
    return (
        pa.types.is_null(t)
        or pa.types.is_boolean(t)
        or pa.types.is_signed_integer(t)
        or pa.types.is_float32(t)
        or pa.types.is_float64(t)
        or pa.types.is_string(t)
        or pa.types.is_binary(t)
        or pa.types.is_date32(t)
    )


def _is_partitionable(t: pa.DataType) -> bool:
    """Spark renders these as directory names and infers them back; binary it would mangle."""
    if pa.types.is_null(t) or pa.types.is_binary(t):
        return False
    return _is_plain(t) or pa.types.is_decimal(t) or pa.types.is_timestamp(t)


def _refused(where: str, arrow_type: pa.DataType, why: str) -> InvalidArgumentError:
    return InvalidArgumentError(f"cannot write column {where} of type {arrow_type}: {why}")


# -- Spark's names for the canonical types: its JSON schema form and its type names ------------
#: canonical Arrow type -> (Spark's JSON name, Spark's simpleString)
_SPARK_NAMES = {
    pa.null(): ("null", "void"),
    pa.bool_(): ("boolean", "boolean"),
    pa.int8(): ("byte", "tinyint"),
    pa.int16(): ("short", "smallint"),
    pa.int32(): ("integer", "int"),
    pa.int64(): ("long", "bigint"),
    pa.float32(): ("float", "float"),
    pa.float64(): ("double", "double"),
    pa.string(): ("string", "string"),
    pa.binary(): ("binary", "binary"),
    pa.date32(): ("date", "date"),
}
_FROM_SPARK_JSON = {json_name: t for t, (json_name, _) in _SPARK_NAMES.items()}
_SPARK_DECIMAL = re.compile(r"decimal\((\d+),\s*(\d+)\)")
_SPARK_TEXT = re.compile(r"(?:var)?char\(\d+\)")


def spark_json_schema(schema: pa.Schema) -> dict[str, Any]:
    """``schema`` in Spark's JSON schema form (``StructType.jsonValue``), as ``_SUCCESS`` and
    Spark's own Parquet files record it; types are taken canonical, in the file form."""
    return _spark_json(pa.struct(list(file_schema(schema))))


def _spark_json(t: pa.DataType) -> str | dict[str, Any]:
    if pa.types.is_struct(t):
        fields = [t.field(i) for i in range(t.num_fields)]
        return {
            "type": "struct",
            "fields": [
                {
                    "name": f.name,
                    "type": _spark_json(f.type),
                    "nullable": f.nullable,
                    "metadata": {},
                }
                for f in fields
            ],
        }
    if pa.types.is_list(t):
        return {
            "type": "array",
            "elementType": _spark_json(t.value_type),
            "containsNull": t.value_field.nullable,
        }
    if pa.types.is_map(t):
        return {
            "type": "map",
            "keyType": _spark_json(t.key_type),
            "valueType": _spark_json(t.item_type),
            "valueContainsNull": t.item_field.nullable,
        }
    if pa.types.is_decimal(t):
        return f"decimal({t.precision},{t.scale})"
    if pa.types.is_timestamp(t):
        return "timestamp" if t.tz else "timestamp_ntz"
    return _SPARK_NAMES[t][0]


def arrow_of_spark_json(node: Any) -> pa.Schema:
    """The file-form Arrow schema of a Spark JSON schema (:func:`spark_json_schema`);
    ValueError for a type this SDK does not write (intervals, variants, collations)."""
    struct = _arrow_type(node)
    if not pa.types.is_struct(struct):
        raise ValueError(f"not a Spark struct schema: {node!r:.200}")
    return pa.schema([struct.field(i) for i in range(struct.num_fields)])


def _arrow_type(node: Any) -> pa.DataType:
    if isinstance(node, str):
        if node in _FROM_SPARK_JSON:
            return _FROM_SPARK_JSON[node]
        if node in ("timestamp", "timestamp_ntz"):
            return pa.timestamp("us", "UTC" if node == "timestamp" else None)
        decimal = _SPARK_DECIMAL.fullmatch(node)
        if decimal:
            return pa.decimal128(int(decimal[1]), int(decimal[2]))
        if _SPARK_TEXT.fullmatch(node):
            return pa.string()
        raise ValueError(f"Spark type {node!r} is not one this SDK writes")
    if not isinstance(node, dict):
        raise ValueError(f"not a Spark type: {node!r:.200}")
    kind = node.get("type")
    if kind == "struct":
        return pa.struct(
            [
                pa.field(f["name"], _arrow_type(f["type"]), bool(f.get("nullable", True)))
                for f in node["fields"]
            ]
        )
    if kind == "array":
        element = _arrow_type(node["elementType"])
        return pa.list_(pa.field("element", element, bool(node.get("containsNull", True))))
    if kind == "map":
        key = pa.field("key", _arrow_type(node["keyType"]), False)
        value = _arrow_type(node["valueType"])
        return pa.map_(key, pa.field("value", value, bool(node.get("valueContainsNull", True))))
    raise ValueError(f"Spark type {node!r:.200} is not one this SDK writes")


def spark_type_name(t: pa.DataType) -> str:
    """The type as Spark names it (``simpleString``): ``decimal(3,2)``, ``array<bigint>``."""
    t = canonical_type(t, "UTC", "")
    if pa.types.is_struct(t):
        fields = (t.field(i) for i in range(t.num_fields))
        return "struct<" + ",".join(f"{f.name}:{spark_type_name(f.type)}" for f in fields) + ">"
    if pa.types.is_list(t):
        return f"array<{spark_type_name(t.value_type)}>"
    if pa.types.is_map(t):
        return f"map<{spark_type_name(t.key_type)},{spark_type_name(t.item_type)}>"
    if pa.types.is_decimal(t):
        return f"decimal({t.precision},{t.scale})"
    if pa.types.is_timestamp(t):
        return "timestamp" if t.tz else "timestamp_ntz"
    return _SPARK_NAMES[t][1]


def widened_schema(schema: pa.Schema, target: pa.Schema | None) -> pa.Schema:
    """``schema`` with the decimals, integers and floats of each column ``target`` names at
    ``target``'s width: the types the destination's files hold, where the job's check
    (:mod:`.schema_check`) widened them. Every other type stays ``schema``'s (a timestamp
    keeps its zone, which decides how CSV and JSON render it)."""
    if target is None:
        return schema
    names = set(target.names)
    return pa.schema(
        [
            f.with_type(_widened(f.type, target.field(f.name).type)) if f.name in names else f
            for f in schema
        ]
    )


def _widened(have: pa.DataType, want: pa.DataType) -> pa.DataType:
    if pa.types.is_struct(have) and pa.types.is_struct(want):
        wanted = {want.field(i).name: want.field(i).type for i in range(want.num_fields)}
        fields = (have.field(i) for i in range(have.num_fields))
        return pa.struct(
            [
                f.with_type(_widened(f.type, wanted[f.name])) if f.name in wanted else f
                for f in fields
            ]
        )
    if pa.types.is_list(have) and pa.types.is_list(want):
        item = have.value_field
        return pa.list_(item.with_type(_widened(item.type, want.value_type)))
    if pa.types.is_map(have) and pa.types.is_map(want):
        key, item = have.key_field, have.item_field
        return pa.map_(
            key.with_type(_widened(key.type, want.key_type)),
            item.with_type(_widened(item.type, want.item_type)),
        )
    for same_kind in (pa.types.is_decimal, pa.types.is_integer, pa.types.is_floating):
        if same_kind(have) and same_kind(want):
            return want
    return have
