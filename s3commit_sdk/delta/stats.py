"""Delta file statistics (``numRecords``, ``minValues``, ``maxValues``, ``nullCount``) from a
Parquet footer.

The task that wrote a file holds its footer, so the statistics travel in its commit message
(``PendingUpload.extraData``) and job commit reads no file back. Readers skip files by these
bounds, so a bound is only written where it is certainly right: float and double columns get
none (Parquet's bounds leave NaN out, but Spark orders NaN above every number), nor do binary
columns, naive timestamps, decimals too wide for a JSON number, columns inside lists and maps,
or columns some row group has no bounds for. Timestamps are written to the millisecond as
Delta writers do: the minimum rounded down, the maximum up.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

#: digits a decimal may have for its bounds to round-trip through a JSON (double) number
_EXACT_DECIMAL_DIGITS = 15
_MILLI = dt.timedelta(milliseconds=1)


def file_stats(footer: pq.FileMetaData) -> str:
    """The Delta ``stats`` JSON of the Parquet file whose footer this is."""
    mins: dict[str, Any] = {}
    maxes: dict[str, Any] = {}
    nulls: dict[str, Any] = {}
    groups = [footer.row_group(i) for i in range(footer.num_row_groups)]
    groups = [g for g in groups if g.num_rows > 0]
    for index, (path, arrow_type) in enumerate(_leaves(footer.schema.to_arrow_schema())):
        if path is None:
            continue
        chunks = [g.column(index).statistics for g in groups]
        if all(s is not None and s.has_null_count for s in chunks):
            _put(nulls, path, sum(s.null_count for s in chunks))
        if not chunks or not all(s is not None and s.has_min_max for s in chunks):
            continue
        try:
            low = _bound(min(s.min for s in chunks), arrow_type, upper=False)
            high = _bound(max(s.max for s in chunks), arrow_type, upper=True)
        except (OverflowError, ValueError, TypeError):  # out of Python's range: no bound
            continue
        if low is not None and high is not None:
            _put(mins, path, low)
            _put(maxes, path, high)
    return json.dumps(
        {"numRecords": footer.num_rows, "minValues": mins, "maxValues": maxes, "nullCount": nulls},
        separators=(",", ":"),
    )


def _leaves(schema: pa.Schema) -> list[tuple[tuple[str, ...] | None, pa.DataType]]:
    """Parquet's leaf columns in order: the field path, or None for a leaf inside a list/map."""
    found: list[tuple[tuple[str, ...] | None, pa.DataType]] = []

    def walk(path: tuple[str, ...] | None, arrow_type: pa.DataType) -> None:
        if pa.types.is_struct(arrow_type):
            for i in range(arrow_type.num_fields):
                child = arrow_type.field(i)
                walk(None if path is None else (*path, child.name), child.type)
        elif pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
            walk(None, arrow_type.value_type)
        elif pa.types.is_map(arrow_type):
            walk(None, arrow_type.key_type)
            walk(None, arrow_type.item_type)
        else:
            found.append((path, arrow_type))

    for field in schema:
        walk((field.name,), field.type)
    return found


def _bound(value: Any, arrow_type: pa.DataType, upper: bool) -> Any:
    """The JSON value of a bound, or None where no safe bound can be written."""
    if pa.types.is_boolean(arrow_type) or pa.types.is_integer(arrow_type):
        return value
    if pa.types.is_string(arrow_type):
        return value if isinstance(value, str) else None
    if pa.types.is_date(arrow_type):
        return value.isoformat()
    if pa.types.is_timestamp(arrow_type) and arrow_type.tz is not None:
        return _millis(value.astimezone(dt.timezone.utc), upper)
    if pa.types.is_decimal(arrow_type) and arrow_type.precision <= _EXACT_DECIMAL_DIGITS:
        return float(decimal.Decimal(value))
    return None


def _millis(moment: dt.datetime, upper: bool) -> str:
    floor = moment.replace(microsecond=moment.microsecond // 1000 * 1000)
    if upper and floor != moment:
        floor += _MILLI
    return floor.strftime("%Y-%m-%dT%H:%M:%S.") + f"{floor.microsecond // 1000:03d}Z"


def _put(target: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    for name in path[:-1]:
        target = target.setdefault(name, {})
    target[path[-1]] = value
