"""Python ``Decimal`` objects in pandas input: one stated column type, so appends agree.

The objects carry no column type: pyarrow gives each frame the smallest decimal that holds its
values, so two jobs got decimal(3,2) and decimal(6,2), and the destination could no longer be
read. Spark types Python ``Decimal`` objects decimal(38,18) (``createDataFrame`` from rows, or
from pandas without Arrow), so every job writes that.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import pyarrow as pa
from pandas.api.types import is_object_dtype

from .errors import InvalidArgumentError
from .sparktypes import spark_type_name

#: the type of a column of Python Decimal objects, as Spark types them
PYTHON_DECIMAL = pa.decimal128(38, 18)


def python_decimals(frame: Any, table: Any) -> Any:
    """``table`` with the columns of Python ``Decimal`` objects in ``frame`` at
    :data:`PYTHON_DECIMAL`, or InvalidArgumentError naming a value it cannot hold exactly.

    The objects carry no column type: pyarrow gives each batch the smallest that holds its
    values, so two jobs got decimal(3,2) and decimal(6,2). Spark types Python ``Decimal``
    objects decimal(38,18) (``createDataFrame`` from rows, or from pandas without Arrow), so
    every job writes that. A column declared as ``pd.ArrowDtype(pa.decimal128(p, s))`` keeps
    its type.
    """
    if not isinstance(frame, pd.DataFrame) or not isinstance(table, pa.Table):
        return table
    objects = {str(name) for name, dtype in frame.dtypes.items() if is_object_dtype(dtype)}
    for index, field in enumerate(table.schema):
        if field.name not in objects:
            continue
        typed = _decimals_at(field.type)
        if typed == field.type:
            continue
        try:
            column = table.column(index).cast(typed)
        except pa.ArrowInvalid as exc:
            raise InvalidArgumentError(
                f"column {field.name!r} holds Python Decimal objects, written as "
                f"{spark_type_name(PYTHON_DECIMAL)} as Spark types them, and some need "
                f"{spark_type_name(field.type)}: more than {PYTHON_DECIMAL.scale} digits after "
                f"the point or {PYTHON_DECIMAL.precision - PYTHON_DECIMAL.scale} before it. "
                "Declare the column's type with the digits it will need, e.g. "
                f"df[{field.name!r}].astype(pd.ArrowDtype(pa.{_decimal_call(field.type)}))"
            ) from exc
        table = table.set_column(index, field.with_type(typed), column)
    return table


def _decimal_call(t: pa.DataType) -> str:
    """How pyarrow spells the first decimal type in ``t``."""
    if pa.types.is_decimal(t):
        return f"decimal128({t.precision}, {t.scale})"
    children = [t.field(i).type for i in range(t.num_fields)]
    return next(_decimal_call(c) for c in children if "decimal" in str(c))


def _decimals_at(t: pa.DataType) -> pa.DataType:
    """``t`` with every decimal in it at :data:`PYTHON_DECIMAL`."""
    if pa.types.is_decimal(t):
        return PYTHON_DECIMAL
    if pa.types.is_list(t):
        return pa.list_(t.value_field.with_type(_decimals_at(t.value_type)))
    if pa.types.is_struct(t):
        return pa.struct(
            [f.with_type(_decimals_at(f.type)) for f in (t.field(i) for i in range(t.num_fields))]
        )
    if pa.types.is_map(t):
        return pa.map_(
            t.key_field.with_type(_decimals_at(t.key_type)),
            t.item_field.with_type(_decimals_at(t.item_type)),
        )
    return t
