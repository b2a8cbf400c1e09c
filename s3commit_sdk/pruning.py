"""Partition pruning: which partition directories a pushed filter can keep rows of, as Spark says.

Spark hands the Python data source the conjuncts of a query's filter (``pyspark.sql.datasource``:
``EqualTo``, ``EqualNullSafe``, ``GreaterThan(OrEqual)``, ``LessThan(OrEqual)``, ``In``,
``IsNull``, ``IsNotNull``, ``StringStartsWith`` / ``EndsWith`` / ``Contains``, and ``Not`` of
one of them; Spark pushes no ``And`` / ``Or``: it splits the conjunction itself and keeps a
disjunction). The reader hands every filter back, so Spark still evaluates them on the rows;
pruning may therefore only skip a directory whose rows Spark would certainly filter out: one
where some conjunct is false or null (SQL's three-valued logic) for the directory's value.

Each value is the one the reader returns for the directory (``partitions.typed_value`` through
the column's Arrow type, as ``scan.read_split`` builds it), compared the way Spark compares that
type: a null directory (``__HIVE_DEFAULT_PARTITION__``) makes every comparison null; for float
and double, NaN equals NaN and sorts above every other value, and -0.0 equals 0.0 (Spark's
``SQLOrderingUtil``); strings compare by code point, which is UTF-8 byte order (Spark's default
``UTF8_BINARY`` collation). A literal of another Python type than the value, a nested column, a
column that is not a partition column or a value the reader cannot build leaves the answer
unknown, and the directory is kept.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

import pyarrow as pa
from pyspark.sql.datasource import (
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringContains,
    StringEndsWith,
    StringStartsWith,
)

from .partitions import typed_value


class _Unknown:
    def __repr__(self) -> str:
        return "UNKNOWN"


#: the truth of a filter pruning cannot decide: the directory is kept
UNKNOWN: Final = _Unknown()
Truth = bool | None | _Unknown

_ORDER = {
    GreaterThan: lambda c: c > 0,
    GreaterThanOrEqual: lambda c: c >= 0,
    LessThan: lambda c: c < 0,
    LessThanOrEqual: lambda c: c <= 0,
    EqualTo: lambda c: c == 0,
}
_TEXT = {
    StringStartsWith: str.startswith,
    StringEndsWith: str.endswith,
    StringContains: str.__contains__,
}


def partition_values(
    columns: Sequence[str], raws: Sequence[str | None], types: Mapping[str, pa.DataType], zone: str
) -> dict[str, object]:
    """The value each partition column has in the rows the reader returns for one directory.

    ``types`` are the Arrow types the read returns (the schema Spark asked for); a column
    missing there, or whose value the reader cannot build, is left out (its filters stay
    unknown).
    """
    values: dict[str, object] = {}
    for name, raw in zip(columns, raws, strict=True):
        arrow_type = types.get(name)
        if arrow_type is None:
            continue
        try:
            values[name] = pa.array([typed_value(raw, arrow_type, zone)], arrow_type)[0].as_py()
        except (ValueError, ArithmeticError, TypeError, pa.ArrowException):
            continue
    return values


def may_match(filters: Iterable[Filter], values: Mapping[str, object]) -> bool:
    """False only if some filter is false or null for every row of the directory."""
    return all(truth(f, values) not in (False, None) for f in filters)


def truth(f: Filter, values: Mapping[str, object]) -> Truth:
    """The SQL truth of ``f`` where the partition columns hold ``values``."""
    if isinstance(f, Not):
        inner = truth(f.child, values)
        return inner if inner is None or inner is UNKNOWN else not inner
    attribute = getattr(f, "attribute", ())
    if len(attribute) != 1 or attribute[0] not in values:
        return UNKNOWN
    value = values[attribute[0]]
    if isinstance(f, IsNull):
        return value is None
    if isinstance(f, IsNotNull):
        return value is not None
    if isinstance(f, EqualNullSafe):
        if value is None or f.value is None:
            return value is None and f.value is None
        return _equal(value, f.value)
    if value is None:
        return None
    if type(f) in _ORDER:
        if f.value is None:
            return None
        order = compare(value, f.value)
        return order if order is UNKNOWN else _ORDER[type(f)](order)
    if isinstance(f, In):
        return _within(value, f.value)
    if type(f) in _TEXT:
        if not (isinstance(value, str) and isinstance(f.value, str)):
            return UNKNOWN
        return _TEXT[type(f)](value, f.value)
    return UNKNOWN


def compare(left: object, right: object) -> int | _Unknown:
    """-1, 0 or 1 as Spark orders two non-null values of one type; UNKNOWN across types."""
    if type(left) is not type(right):
        return UNKNOWN
    if isinstance(left, float):
        left, right = _float_key(left), _float_key(right)  # type: ignore[arg-type]
    try:
        return (left > right) - (left < right)  # type: ignore[operator]
    except TypeError:  # e.g. a zoned and a wall-clock datetime
        return UNKNOWN


def _float_key(x: float) -> tuple[int, float]:
    """Spark's order of doubles: NaN equal to itself and above +Infinity; -0.0 equal to 0.0."""
    return (1, 0.0) if math.isnan(x) else (0, x)


def _equal(left: object, right: object) -> Truth:
    order = compare(left, right)
    return order if order is UNKNOWN else order == 0


def _within(value: object, literals: Iterable[object]) -> Truth:
    """``value IN (literals)``: true if one equals it, else null if one is null, else false."""
    answer: Truth = False
    for literal in literals:
        if literal is None:
            answer = None if answer is False else answer
            continue
        equal = _equal(value, literal)
        if equal is True:
            return True
        if equal is UNKNOWN:
            answer = UNKNOWN
    return answer
