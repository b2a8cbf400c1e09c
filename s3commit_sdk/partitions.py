"""Hive-style partition directories read back as Spark reads them: unescaping and value types.

Spark's ``PartitioningUtils`` infers each value's type in this order: integer, long, decimal
without a fraction, double, timestamp (``yyyy-MM-dd HH:mm:ss[.fraction]``), date
(``yyyy-MM-dd``), else string; ``__HIVE_DEFAULT_PARTITION__`` is null. A column takes the
widest type of its values (numbers widen, a date and a timestamp give a timestamp, anything
else gives string; a column of nulls only keeps Spark's null type).
"""

from __future__ import annotations

import datetime as _dt
import decimal
import re
from zoneinfo import ZoneInfo

import pyarrow as pa

from .errors import InvalidPathError
from .paths import HIVE_DEFAULT_PARTITION

MAX_DECIMAL_PRECISION = 38
_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)
_INTEGER = re.compile(r"[+-]?[0-9]+")
_JAVA_DECIMAL = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")
_JAVA_DOUBLE = re.compile(
    r"[+-]?(NaN|Infinity|([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?[fFdD]?)"
)
_TIMESTAMP = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,9})?")
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_ESCAPE = re.compile(r"%([0-9a-fA-F]{2})")
TIMESTAMP = pa.timestamp("us", tz="UTC")


def unescape(text: str) -> str:
    """Spark's ``unescapePathName``: ``%XX`` (two hex digits) becomes its character."""
    return _ESCAPE.sub(lambda m: chr(int(m[1], 16)), text)


def parse_directories(relpath: str) -> tuple[list[str], list[str | None]]:
    """Column names and raw (unescaped) values of a file's ``key=value`` directories."""
    names: list[str] = []
    values: list[str | None] = []
    for segment in relpath.split("/")[:-1]:
        name, sep, raw = segment.partition("=")
        if not sep or not name or not raw:
            raise InvalidPathError(
                f"{relpath!r} lies in directory {segment!r}, which is not a key=value "
                "partition directory: Spark would not read this layout either"
            )
        names.append(unescape(name))
        values.append(None if raw == HIVE_DEFAULT_PARTITION else unescape(raw))
    return names, values


def infer_type(raw: str | None) -> pa.DataType:
    """The type Spark infers for one partition value (null for the default partition)."""
    if raw is None:
        return pa.null()
    if _INTEGER.fullmatch(raw):
        number = int(raw)
        if _INT32[0] <= number <= _INT32[1]:
            return pa.int32()
        if _INT64[0] <= number <= _INT64[1]:
            return pa.int64()
    if _JAVA_DECIMAL.fullmatch(raw):
        value = decimal.Decimal(raw)
        exponent = value.as_tuple().exponent
        if isinstance(exponent, int) and exponent >= 0:
            digits = len(str(abs(int(value))))
            if digits <= MAX_DECIMAL_PRECISION:
                return pa.decimal128(digits, 0)
    if _JAVA_DOUBLE.fullmatch(raw.strip(" \t\n\r\f\v\x00")):
        return pa.float64()
    if _TIMESTAMP.fullmatch(raw) and _valid_timestamp(raw):
        return TIMESTAMP
    if _DATE.fullmatch(raw) and _valid_date(raw):
        return pa.date32()
    return pa.string()


def _valid_date(raw: str) -> bool:
    try:
        _dt.date.fromisoformat(raw)
    except ValueError:
        return False
    return True


def _valid_timestamp(raw: str) -> bool:
    return _valid_date(raw[:10]) and _wall_clock(raw) is not None


def _wall_clock(raw: str) -> _dt.datetime | None:
    clock, _, fraction = raw[11:].partition(".")
    try:
        hour, minute, second = (int(part) for part in clock.split(":"))
        day = _dt.date.fromisoformat(raw[:10])
        micros = int((fraction + "000000")[:6]) if fraction else 0
        return _dt.datetime(day.year, day.month, day.day, hour, minute, second, micros)
    except ValueError:
        return None


def wider(left: pa.DataType, right: pa.DataType) -> pa.DataType:
    """The type two values of one column share, as Spark's partition type coercion decides."""
    if left == right:
        return left
    if pa.types.is_null(left):
        return right
    if pa.types.is_null(right):
        return left
    numeric = (_number_rank(left), _number_rank(right))
    if None not in numeric:
        if pa.types.is_floating(left) or pa.types.is_floating(right):
            return pa.float64()
        if pa.types.is_decimal(left) or pa.types.is_decimal(right):
            digits = max(_integer_digits(left), _integer_digits(right))
            return pa.decimal128(min(digits, MAX_DECIMAL_PRECISION), 0)
        return left if numeric[0] > numeric[1] else right
    if {left, right} == {TIMESTAMP, pa.date32()}:
        return TIMESTAMP
    return pa.string()


def _number_rank(t: pa.DataType) -> int | None:
    if t == pa.int32():
        return 1
    if t == pa.int64():
        return 2
    if pa.types.is_decimal(t):
        return 3
    if pa.types.is_floating(t):
        return 4
    return None


def _integer_digits(t: pa.DataType) -> int:
    """Digits a decimal needs to hold every value of ``t`` (Spark: int 10, long 20)."""
    return {pa.int32(): 10, pa.int64(): 20}.get(t, getattr(t, "precision", 0))


def column_type(raws: list[str | None]) -> pa.DataType:
    """A partition column's type over all its values (null when every value is null)."""
    found: pa.DataType = pa.null()
    for raw in raws:
        found = wider(found, infer_type(raw))
    return found


def typed_value(raw: str | None, arrow_type: pa.DataType, zone: str) -> object:
    """``raw`` as a Python value of ``arrow_type``; a timestamp is a wall clock in ``zone``.

    Raises ValueError when ``raw`` cannot be read as that type (a user-given schema).
    """
    if raw is None:
        return None
    if pa.types.is_string(arrow_type):
        return raw
    if pa.types.is_integer(arrow_type):
        return int(raw)
    if pa.types.is_decimal(arrow_type):
        return decimal.Decimal(raw)
    if pa.types.is_floating(arrow_type):
        return float(raw.strip().rstrip("fFdD").replace("Infinity", "inf"))
    if pa.types.is_date(arrow_type):
        return _dt.date.fromisoformat(raw)
    if pa.types.is_timestamp(arrow_type):
        clock = _wall_clock(raw) if _TIMESTAMP.fullmatch(raw) else None
        if clock is None:
            clock = _dt.datetime.combine(_dt.date.fromisoformat(raw), _dt.time())
        return clock.replace(tzinfo=ZoneInfo(zone)).astimezone(_dt.timezone.utc)
    if pa.types.is_boolean(arrow_type):
        if raw.lower() not in ("true", "false"):
            raise ValueError(f"{raw!r} is not a boolean")
        return raw.lower() == "true"
    raise ValueError(f"partition values cannot be read as {arrow_type}")
