"""The schema a reader takes from a destination's first file, for every plain format."""

from __future__ import annotations

import pandas as pd
import pyarrow as pa
import pytest

from s3commit_sdk import write_committed
from s3commit_sdk.paths import parse_s3_url
from s3commit_sdk.scan import file_schema, list_table
from s3commit_sdk.store import open_store

FRAME = pd.DataFrame({"id": [1, 2, 3], "name": ["a", "b", None], "score": [0.5, 1.5, 2.5]})


@pytest.mark.parametrize("fmt", ["parquet", "orc", "csv", "json"])
def test_file_schema_of_each_format(dest, fmt):
    """CSV has no header (as Spark writes it): its columns are ``_c0, _c1, ...`` strings, as
    Spark names them; the others carry their names and types."""
    write_committed(FRAME, dest.url, format=fmt, options={"tasks": 1})
    store = open_store(None)
    listing = list_table(store, parse_s3_url(dest.url), fmt)
    schema = file_schema(store, listing)
    if fmt == "csv":
        assert schema == pa.schema(
            [("_c0", pa.string()), ("_c1", pa.string()), ("_c2", pa.string())]
        )
    else:
        assert schema.names == ["id", "name", "score"]
        assert schema.field("score").type == pa.float64()
