"""Values as text, the way Spark renders them: casts to string, its JSON and its CSV writer.

Checked against Spark's own output (tests/test_types.py): Java's ``Double.toString`` for
floats, ``BigDecimal.toString`` for decimals, ``yyyy-MM-dd'T'HH:mm:ss.SSSXXX`` for timestamps
in JSON and CSV (in the zone the timestamp carries: Spark's session time zone), base64 binary in
JSON, null fields left out of JSON objects.
"""

from __future__ import annotations

import base64
import datetime as _dt
import decimal
import json
import math
from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

Render = Callable[[object], str]
_NON_FINITE = ("NaN", "Infinity", "-Infinity")


def java_float_text(value: float | np.floating) -> str:
    """Java's ``Double.toString`` (``Float.toString`` for float32), which Spark's cast uses.

    Shortest round-trip digits, plain between 1e-3 and 1e7, else ``d.dddE<exp>``.
    """
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    shortest = decimal.Decimal(str(value) if isinstance(value, np.floating) else repr(value))
    sign, digits, exponent = shortest.as_tuple()
    text = "".join(map(str, digits)).rstrip("0") or "0"
    point = len(digits) + exponent  # digits before the decimal point
    prefix = "-" if sign else ""
    if 1e-3 <= abs(value) < 1e7:
        if point <= 0:
            return f"{prefix}0.{'0' * -point}{text}"
        whole, frac = text[:point].ljust(point, "0"), text[point:]
        return f"{prefix}{whole}.{frac or '0'}"
    return f"{prefix}{text[0]}.{text[1:] or '0'}E{point - 1}"


def date_text(value: _dt.date) -> str:
    return f"{value.year:04d}-{value.month:02d}-{value.day:02d}"


def timestamp_cast_text(value: _dt.datetime) -> str:
    """Spark's cast of a timestamp to string: the wall clock, fraction without trailing zeros."""
    text = f"{date_text(value)} {value.hour:02d}:{value.minute:02d}:{value.second:02d}"
    return text + (f".{value.microsecond:06d}".rstrip("0") if value.microsecond else "")


def timestamp_iso_text(value: _dt.datetime) -> str:
    """Spark's JSON and CSV timestamps: milliseconds (truncated), offset ``Z`` or ``+hh:mm``."""
    clock = f"{value.hour:02d}:{value.minute:02d}:{value.second:02d}"
    text = f"{date_text(value)}T{clock}.{value.microsecond // 1000:03d}"
    offset = value.utcoffset()
    if offset is None:  # timestamp_ntz
        return text
    return text + _offset_text(int(offset.total_seconds()))


def _offset_text(seconds: int) -> str:
    """Java's ``XXX`` offset: ``Z``, ``+01:00``, or with seconds (local mean time) ``+00:09:21``."""
    if not seconds:
        return "Z"
    sign, seconds = ("-", -seconds) if seconds < 0 else ("+", seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{sign}{hours:02d}:{minutes:02d}" + (f":{secs:02d}" if secs else "")


def _scalar_text(t: pa.DataType) -> Render:
    """Text of a non-null scalar as Spark's CSV writer and JSON map keys render it."""
    if pa.types.is_boolean(t):
        return lambda v: "true" if v else "false"
    if pa.types.is_float32(t):
        return lambda v: java_float_text(np.float32(v))
    if pa.types.is_float64(t):
        return java_float_text
    if pa.types.is_date(t):
        return date_text
    if pa.types.is_timestamp(t):
        return timestamp_iso_text
    if pa.types.is_binary(t):  # Spark's CSV writer: the bytes in hex, as an array prints
        return lambda v: "[" + " ".join(f"{b:02X}" for b in v) + "]"
    return str  # integers, decimals (BigDecimal.toString is Python's str), strings


def _json_value(t: pa.DataType) -> Render:
    """The JSON text of a non-null value of type ``t`` as Spark's JSON writer writes it."""
    if pa.types.is_string(t):
        return lambda v: json.dumps(v, ensure_ascii=False)
    if pa.types.is_binary(t):
        return lambda v: '"' + base64.b64encode(v).decode("ascii") + '"'
    if pa.types.is_date(t) or pa.types.is_timestamp(t):
        text = _scalar_text(t)
        return lambda v: f'"{text(v)}"'
    if pa.types.is_floating(t):
        text = _scalar_text(t)
        return lambda v: _json_number(text(v))
    if pa.types.is_list(t):
        element = _nullable(_json_value(t.value_type))
        return lambda v: "[" + ",".join(map(element, v)) + "]"
    if pa.types.is_map(t):
        key, item = _scalar_text(t.key_type), _nullable(_json_value(t.item_type))
        return lambda v: "{" + ",".join(f"{_json_string(key(k))}:{item(x)}" for k, x in v) + "}"
    if pa.types.is_struct(t):
        return _json_object([t.field(i) for i in range(t.num_fields)])
    return _scalar_text(t)


def _json_object(fields: list[pa.Field]) -> Render:
    """A struct or a row: fields in schema order, null fields left out (``ignoreNullFields``)."""
    members = [(f.name, _json_string(f.name) + ":", _json_value(f.type)) for f in fields]

    def render(value: dict) -> str:
        kept = (key + text(value[name]) for name, key, text in members if value[name] is not None)
        return "{" + ",".join(kept) + "}"

    return render


def _json_number(text: str) -> str:
    """Jackson quotes the non-finite floats (Spark reads them back as numbers)."""
    return f'"{text}"' if text in _NON_FINITE else text


def _json_string(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def _nullable(render: Render) -> Render:
    return lambda v: "null" if v is None else render(v)


# Columns are rendered whole where Arrow's cast to string already writes Spark's text (integers,
# booleans, decimals as BigDecimal.toString, dates) and strings need no escaping; other values
# one by one in Python.
_JSON_ESCAPED = r'["\\\x00-\x1f]'
#: What makes Spark's CSV writer quote a value (empty, quote, comma, line break), and leading or
#: trailing whitespace, which Spark's writer would trim away and we keep.
_CSV_QUOTED = r'^$|[",\n\r]|^[\x00- ]|[\x00- ]$'


def _cast_renders(t: pa.DataType) -> bool:
    return (
        pa.types.is_integer(t)
        or pa.types.is_boolean(t)
        or pa.types.is_decimal(t)
        or pa.types.is_date32(t)
    )


def _rendered(column: pa.Array, render: Render) -> pa.Array:
    """Each non-null value rendered in Python; nulls stay null."""
    return pa.array([None if v is None else render(v) for v in column.to_pylist()], pa.string())


def _quoted(text: pa.Array) -> pa.Array:
    return pc.binary_join_element_wise('"', text, '"', "")


def _float_column(column: pa.Array) -> pa.Array:
    """``java_float_text`` of every value: Arrow's shortest digits, plain in [1e-3, 1e7) as in
    Java (plus ``.0`` on whole numbers), the rest (zero, non-finite, exponents) in Python."""
    text = pc.cast(column, pa.string())
    magnitude = pc.abs(column)
    plain = pc.fill_null(pc.and_(pc.greater_equal(magnitude, 1e-3), pc.less(magnitude, 1e7)), False)
    whole = pc.invert(pc.match_substring(text, "."))
    text = pc.if_else(whole, pc.binary_join_element_wise(text, ".0", ""), text)
    rest = pc.and_(pc.invert(plain), pc.is_valid(column))
    if not pc.any(rest).as_py():
        return text
    render = _scalar_text(column.type)
    others = [render(v) for v in pc.filter(column, rest).to_pylist()]
    return pc.replace_with_mask(text, rest, pa.array(others, pa.string()))


def _timestamp_column(column: pa.Array) -> pa.Array:
    """``timestamp_iso_text`` of every value: milliseconds floored, the wall clock of the
    column's zone, and the offset in force at each instant.

    Offsets come from Python's zone rules (one lookup per distinct second): Arrow's own zone
    conversion stops following daylight saving time after 2037, Java's and Python's do not.
    """
    micros = column.cast(pa.int64())
    nulls = micros.is_null().to_numpy(zero_copy_only=False)
    utc = micros.fill_null(0).to_numpy()
    offsets = np.zeros(len(utc), np.int64)
    suffixes = None
    if column.type.tz is not None:
        zone = pa.lib.string_to_tzinfo(column.type.tz)
        seconds, where = np.unique(utc // 1_000_000, return_inverse=True)
        found = [
            int(_dt.datetime.fromtimestamp(int(s), zone).utcoffset().total_seconds())
            for s in seconds
        ]
        offsets = np.array(found, np.int64)[where]
        suffixes = pa.array([_offset_text(o) for o in found], pa.string()).take(where)
    local = pa.array((utc + offsets * 1_000_000) // 1000, pa.timestamp("ms"), mask=nulls)
    text = pc.strftime(local, format="%Y-%m-%dT%H:%M:%S", locale="C")
    return text if suffixes is None else pc.binary_join_element_wise(text, suffixes, "")


def _json_column(column: pa.Array) -> pa.Array:
    """The JSON text of every value of ``column``; null where the value is null."""
    t = column.type
    if _cast_renders(t):
        text = pc.cast(column, pa.string())
        return _quoted(text) if pa.types.is_date32(t) else text
    if pa.types.is_timestamp(t):
        return _quoted(_timestamp_column(column))
    if pa.types.is_floating(t):  # Jackson quotes NaN and the infinities
        text = _float_column(column)
        return pc.if_else(pc.is_finite(column), text, _quoted(text))
    if (
        pa.types.is_string(t)
        and not pc.any(pc.match_substring_regex(column, _JSON_ESCAPED)).as_py()
    ):
        return _quoted(column)
    return _rendered(column, _json_value(t))


def _csv_column(column: pa.Array) -> pa.Array:
    """The CSV cell of every value of ``column``; null where the value is null."""
    t = column.type
    if _cast_renders(t):
        return pc.cast(column, pa.string())
    if pa.types.is_string(t):
        escaped = pc.replace_substring(pc.replace_substring(column, "\\", "\\\\"), '"', '\\"')
        return pc.if_else(pc.match_substring_regex(column, _CSV_QUOTED), _quoted(escaped), column)
    if pa.types.is_timestamp(t):
        return _timestamp_column(column)
    if pa.types.is_floating(t):
        return _float_column(column)
    return _rendered(column, _scalar_text(t))


def _joined(lines: pa.Array) -> pa.Buffer:
    """The bytes of every string of ``lines``, back to back (they lie so in its data buffer)."""
    offsets = np.frombuffer(lines.buffers()[1], np.int32, len(lines) + 1, lines.offset * 4)
    return lines.buffers()[2].slice(int(offsets[0]), int(offsets[-1] - offsets[0]))


class JsonLinesWriter:
    """Spark's JSON output: one object per line, in schema order, null fields left out."""

    def __init__(self, sink: pa.NativeFile, schema: pa.Schema) -> None:
        self._sink = sink
        self._keys = [_json_string(name) + ":" for name in schema.names]

    def write_batch(self, batch: pa.RecordBatch) -> None:
        members = [
            pc.binary_join_element_wise(key, _json_column(column), "")
            for key, column in zip(self._keys, batch.columns, strict=True)
        ]
        body = pc.binary_join_element_wise(*members, ",", null_handling="skip")
        self._sink.write(_joined(pc.binary_join_element_wise("{", body, "}\n", "")))

    def close(self) -> None:
        pass


class CsvWriter:
    """Spark's CSV output with its default options: no header, ``"`` quotes, ``\\`` escapes.

    Nulls are empty, the empty string is ``""``. Strings keep leading and trailing whitespace
    (quoted), where Spark's writer trims it by default.
    """

    def __init__(self, sink: pa.NativeFile, schema: pa.Schema) -> None:
        self._sink = sink

    def write_batch(self, batch: pa.RecordBatch) -> None:
        cells = [_csv_column(column) for column in batch.columns]
        line = pc.binary_join_element_wise(
            *cells, ",", null_handling="replace", null_replacement=""
        )
        self._sink.write(_joined(pc.binary_join_element_wise(line, "\n", "")))

    def close(self) -> None:
        pass
