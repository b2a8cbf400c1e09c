"""Appends that cannot break a dataset (schema_check): the data's columns against the files
the destination keeps, before anything is uploaded.

Issue: pandas ``Decimal`` objects wrote decimal(3,2) one day and decimal(6,2) the next, both
appends succeeded, and every reader then failed ("Decimal value does not fit in precision 3").
"""

from __future__ import annotations

import decimal
import json
import re

import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.dataset as ds
import pyarrow.orc as paorc
import pyarrow.parquet as pq
import pytest
from conftest import BUCKET, list_keys, pending_uploads, visible_keys

from s3commit_sdk import write_committed
from s3commit_sdk.errors import InvalidArgumentError, SchemaMismatchError
from s3commit_sdk.formats import SuccessDocument, parse_success
from s3commit_sdk.paths import parse_s3_url
from s3commit_sdk.scan import file_schema, list_table, plan_splits, read_split
from s3commit_sdk.store import open_store

D = decimal.Decimal
FORMATS = ["parquet", "orc", "csv", "json"]
DECIMAL_6_2 = pa.decimal128(6, 2)
DECIMAL_3_2 = pa.decimal128(3, 2)


def success(s3, dest) -> dict:
    return json.loads(s3.get_object(Bucket=BUCKET, Key=dest.dir + "_SUCCESS")["Body"].read())


def amounts_by_pyarrow(s3_server, dest, fmt: str, names: list[str]) -> list[D]:
    """Every row's ``amount`` as pyarrow's dataset reader reads the destination."""
    formats = {
        "csv": ds.CsvFileFormat(read_options=pacsv.ReadOptions(column_names=names)),
        "json": ds.JsonFileFormat(),
    }
    dataset = ds.dataset(
        f"{BUCKET}/{dest.prefix}",
        filesystem=s3_server.arrow_fs(),
        format=formats.get(fmt, fmt),
        partitioning=ds.HivePartitioning.discover(infer_dictionary=False),
    )
    return sorted(D(str(v)) for v in dataset.to_table().column("amount").to_pylist())


def amounts_by_sdk(dest, fmt: str, names: list[str]) -> list[D]:
    """Every row's ``amount`` as the SDK's reader (scan.py, behind format("s3commit")) reads
    it: the first file's schema, every file read with it."""
    store = open_store(None)
    listing = list_table(store, parse_s3_url(dest.url), fmt)
    if fmt == "csv":  # no header, as Spark writes CSV: read with the names given
        data = pa.schema([(name, pa.string()) for name in names])
    else:
        data = file_schema(store, listing)
    partitions = zip(listing.partition_columns, listing.partition_types, strict=True)
    wanted = pa.schema(
        [
            *data,
            *(pa.field(c, t) for c, t in partitions),
        ]
    )
    values = []
    for split in plan_splits(store, listing, 128 << 20):
        for batch in read_split(store, listing, split, data, wanted, "UTC"):
            values += batch.column("amount").to_pylist()
    return sorted(D(str(v)) for v in values)


def assert_refused_untouched(s3, dest, write) -> SchemaMismatchError:
    """``write`` raises SchemaMismatchError and leaves the destination as it was."""
    before = list_keys(s3, dest.dir)
    with pytest.raises(SchemaMismatchError) as refused:
        write()
    assert list_keys(s3, dest.dir) == before  # nothing new, visible or hidden
    assert pending_uploads(s3, dest.dir) == []
    return refused.value


# -- the scenario --------------------------------------------------------------------
@pytest.mark.parametrize("fmt", FORMATS)
def test_python_decimals_appended_twice_read_back_by_every_reader(s3_server, s3, dest, fmt):
    """Day one's values fit decimal(3,2), day two's need decimal(6,2): both written as
    decimal(38,18), as Spark types Python Decimal objects, so every reader reads every row."""
    day1 = pd.DataFrame({"id": [1, 2], "amount": [D("1.50"), D("-2.25")], "day": ["d1", "d1"]})
    day2 = pd.DataFrame({"id": [3], "amount": [D("1234.56")], "day": ["d2"]})
    for frame in (day1, day2):
        write_committed(frame, dest.url, format=fmt, partition_by="day", conflict_mode="append")

    schema = success(s3, dest)["schema"]
    assert [(f["name"], f["type"]) for f in schema["fields"]] == [
        ("id", "long"),
        ("amount", "decimal(38,18)"),
    ]
    expected = sorted([D("1.50"), D("-2.25"), D("1234.56")])
    assert amounts_by_sdk(dest, fmt, ["id", "amount"]) == expected
    assert amounts_by_pyarrow(s3_server, dest, fmt, ["id", "amount"]) == expected


def test_python_decimals_that_decimal_38_18_cannot_hold_are_refused(s3, dest):
    frame = pd.DataFrame({"amount": [D("1.5"), D("0.0000000000000000001")]})
    with pytest.raises(InvalidArgumentError, match=r"decimal\(38,18\).*decimal128\(20, 19\)"):
        write_committed(frame, dest.url)
    assert list_keys(s3, dest.dir) == []


def test_declared_decimal_dtype_keeps_its_type(s3, dest):
    amounts = pd.Series([D("1.50")], dtype=pd.ArrowDtype(DECIMAL_6_2))
    write_committed(pd.DataFrame({"amount": amounts}), dest.url)
    assert success(s3, dest)["schema"]["fields"][0]["type"] == "decimal(6,2)"


# -- widening every reader accepts -----------------------------------------------------------
def footer_types(s3, dest, fmt: str) -> list[dict[str, pa.DataType]]:
    """Each data file's column types, read from its footer."""
    types = []
    for key in visible_keys(s3, dest.dir):
        body = pa.BufferReader(s3.get_object(Bucket=BUCKET, Key=key)["Body"].read())
        schema = pq.read_schema(body) if fmt == "parquet" else paorc.ORCFile(body).schema
        types.append({f.name: f.type for f in schema})
    return types


@pytest.mark.parametrize("fmt", FORMATS)
def test_narrower_types_are_written_at_the_destinations(s3_server, s3, dest, fmt):
    """decimal(3,2) into decimal(6,2), int32 into bigint: written at the destination's types."""
    first = pa.table(
        {"id": pa.array([1], pa.int64()), "amount": pa.array([D("1234.56")], DECIMAL_6_2)}
    )
    second = pa.table(
        {"id": pa.array([2], pa.int32()), "amount": pa.array([D("1.5")], DECIMAL_3_2)}
    )
    write_committed(first, dest.url, format=fmt)
    write_committed(second, dest.url, format=fmt, conflict_mode="append")

    fields = success(s3, dest)["schema"]["fields"]
    assert [f["type"] for f in fields] == ["long", "decimal(6,2)"]
    if fmt in ("parquet", "orc"):
        expected = {"id": pa.int64(), "amount": DECIMAL_6_2}
        assert footer_types(s3, dest, fmt) == [expected, expected]
    expected_amounts = [D("1.50"), D("1234.56")]
    assert amounts_by_sdk(dest, fmt, ["id", "amount"]) == expected_amounts
    assert amounts_by_pyarrow(s3_server, dest, fmt, ["id", "amount"]) == expected_amounts


# -- refusals: typed, before anything is uploaded ---------------------------------------------
@pytest.mark.parametrize("fmt", FORMATS)
def test_a_wider_decimal_is_refused_naming_column_types_and_fix(s3, dest, fmt):
    write_committed(pa.table({"amount": pa.array([D("1.5")], DECIMAL_3_2)}), dest.url, format=fmt)
    wider = pa.table({"amount": pa.array([D("1234.56")], DECIMAL_6_2)})

    error = assert_refused_untouched(
        s3, dest, lambda: write_committed(wider, dest.url, format=fmt, conflict_mode="append")
    )
    assert (error.column, error.destination_type, error.data_type) == (
        "amount",
        "decimal(3,2)",
        "decimal(6,2)",
    )
    assert error.destination == dest.url and error.visible == "nothing"
    message = str(error)
    assert "cast 'amount' to decimal(3,2)" in message and "write to a new path" in message
    assert "Nothing was uploaded" in message


@pytest.mark.parametrize(
    ("second", "words"),
    [
        pytest.param({"id": pa.array(["1"])}, "'id' is bigint .* and string", id="kind"),
        pytest.param({"id": pa.array([1.5])}, "'id' is bigint .* and double", id="int-to-double"),
        pytest.param(
            {"id": pa.array([1]), "extra": pa.array([1])},
            r"columns not in the destination: \['extra'\]",
            id="extra-column",
        ),
        pytest.param({"other": pa.array([1])}, r"missing from the data: \['id'\]", id="renamed"),
    ],
)
def test_other_changes_are_refused(s3, dest, second, words):
    write_committed(pa.table({"id": pa.array([1])}), dest.url)
    error = assert_refused_untouched(
        s3,
        dest,
        lambda: write_committed(pa.table(second), dest.url, conflict_mode="append"),
    )
    assert error.destination_type is not None and error.data_type is not None
    assert re.search(words, str(error)), str(error)


@pytest.mark.parametrize(("fmt", "refused"), [("csv", True), ("parquet", False)])
def test_column_order_matters_to_csv_only(s3, dest, fmt, refused):
    """CSV is read by position; Parquet (and ORC, JSON) by name."""
    write_committed(pa.table({"a": [1], "b": ["x"]}), dest.url, format=fmt)
    swapped = pa.table({"b": ["y"], "a": [2]})
    append = lambda: write_committed(swapped, dest.url, format=fmt, conflict_mode="append")  # noqa: E731
    if refused:
        error = assert_refused_untouched(s3, dest, append)
        assert "read by position" in str(error)
    else:
        append()
        assert len(visible_keys(s3, dest.dir)) == 2


def test_another_format_or_partition_layout_is_refused(s3, dest):
    write_committed(pa.table({"id": [1], "day": ["d1"]}), dest.url, partition_by="day")
    error = assert_refused_untouched(
        s3,
        dest,
        lambda: write_committed(
            pa.table({"id": [2], "day": ["d2"]}), dest.url, format="orc", conflict_mode="append"
        ),
    )
    assert (error.destination_type, error.data_type) == ("parquet", "orc")
    error = assert_refused_untouched(
        s3,
        dest,
        lambda: write_committed(
            pa.table({"id": [2], "day": ["d2"]}), dest.url, conflict_mode="append"
        ),
    )
    assert (error.destination_type, error.data_type) == ("[day]", "[]")


# -- which writes are checked -----------------------------------------------------------------
def test_partition_replace_is_checked_whole_replace_is_not(s3, dest):
    """Replacing some partitions keeps the others beside the new files; replacing the whole
    destination (the directory committer) keeps nothing old."""
    old = pa.table({"amount": pa.array([D("1.5")], DECIMAL_3_2), "day": ["d1"]})
    new = pa.table({"amount": pa.array([D("1234.56")], DECIMAL_6_2), "day": ["d2"]})
    write_committed(old, dest.url, partition_by="day")
    assert_refused_untouched(
        s3,
        dest,
        lambda: write_committed(new, dest.url, partition_by="day", conflict_mode="replace"),
    )
    write_committed(
        new, dest.url, committer="directory", partition_by="day", conflict_mode="replace"
    )
    assert [f["type"] for f in success(s3, dest)["schema"]["fields"]] == ["decimal(6,2)"]


# -- the destination's schema without a recorded one ------------------------------------------
@pytest.mark.parametrize("fmt", ["parquet", "orc", "csv"])
def test_a_data_file_tells_the_schema_when_success_records_none(s3, dest, fmt):
    """A destination written by another writer (or an older version): one file's footer, or
    a CSV file's column count."""
    write_committed(
        pa.table({"id": [1], "amount": pa.array([D("1.5")], DECIMAL_3_2)}), dest.url, format=fmt
    )
    s3.delete_object(Bucket=BUCKET, Key=dest.dir + "_SUCCESS")
    if fmt == "csv":
        second, kind = pa.table({"id": [2]}), (None, "2 columns", "1 columns")
    else:
        second = pa.table({"id": [2], "amount": pa.array([D("1234.56")], DECIMAL_6_2)})
        kind = ("amount", "decimal(3,2)", "decimal(6,2)")
    error = assert_refused_untouched(
        s3, dest, lambda: write_committed(second, dest.url, format=fmt, conflict_mode="append")
    )
    assert (error.column, error.destination_type, error.data_type) == kind
    assert ".parquet" in str(error) or ".orc" in str(error) or ".csv" in str(error)


def test_spark_written_parquet_is_read_as_spark_typed_it(spark, s3, dest, tmp_path):
    """Spark's own Parquet files (INT96 timestamps): the schema Spark stored in them."""
    import datetime as dt

    rows = [(1, dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc), D("1.50"))]
    frame = spark.createDataFrame(rows, "id long, at timestamp, amount decimal(3,2)")
    frame.coalesce(1).write.parquet("file://" + str(tmp_path / "spark"))
    written = next((tmp_path / "spark").glob("part-*.parquet"))
    s3.put_object(
        Bucket=BUCKET, Key=dest.dir + "part-00000.snappy.parquet", Body=written.read_bytes()
    )
    at = pa.array([dt.datetime(2024, 1, 2)], pa.timestamp("us", "UTC"))
    fits = pa.table({"id": [2], "at": at, "amount": pa.array([D("2.5")], DECIMAL_3_2)})
    write_committed(fits, dest.url, conflict_mode="append")
    wider = fits.set_column(2, "amount", pa.array([D("1234.56")], DECIMAL_6_2))
    error = assert_refused_untouched(
        s3, dest, lambda: write_committed(wider, dest.url, conflict_mode="append")
    )
    assert error.column == "amount"


def test_a_success_document_without_schema_still_loads(s3, dest):
    write_committed(pa.table({"id": [1]}), dest.url)
    raw = success(s3, dest)
    assert SuccessDocument.from_dict(raw).schema == raw["schema"]
    del raw["schema"]
    older = parse_success(json.dumps(raw).encode())
    assert older.schema is None and "schema" not in older.to_dict()


def test_a_rename_committer_on_a_filesystem_is_checked(tmp_path):
    url = f"file://{tmp_path}/table"
    write_committed(
        pa.table({"amount": pa.array([D("1.5")], DECIMAL_3_2)}), url, committer="manifest"
    )
    before = sorted(p.name for p in (tmp_path / "table").iterdir())
    wider = pa.table({"amount": pa.array([D("1234.56")], DECIMAL_6_2)})
    with pytest.raises(SchemaMismatchError, match="decimal"):
        write_committed(wider, url, committer="manifest", conflict_mode="append")
    assert sorted(p.name for p in (tmp_path / "table").iterdir()) == before


# -- Spark input: its types are the DataFrame's -----------------------------------------------
@pytest.mark.parametrize("fmt", FORMATS)
def test_spark_input_is_widened_or_refused(spark, s3_server, s3, dest, fmt):
    """decimal(3,2) from Spark into decimal(6,2) files: written as decimal(6,2); decimal(9,2)
    into them: a narrowing, refused."""
    write_committed(
        pa.table({"id": [1], "amount": pa.array([D("1234.56")], DECIMAL_6_2)}), dest.url, format=fmt
    )
    # one partition: no empty task file, which pyarrow's CSV, JSON and ORC readers refuse
    narrow = spark.createDataFrame([(2, D("1.50"))], "id long, amount decimal(3,2)").coalesce(1)
    write_committed(narrow, dest.url, format=fmt, conflict_mode="append")
    assert [f["type"] for f in success(s3, dest)["schema"]["fields"]] == ["long", "decimal(6,2)"]
    expected = [D("1.50"), D("1234.56")]
    assert amounts_by_sdk(dest, fmt, ["id", "amount"]) == expected
    assert amounts_by_pyarrow(s3_server, dest, fmt, ["id", "amount"]) == expected

    wide = spark.createDataFrame([(3, D("1234567.89"))], "id long, amount decimal(9,2)")
    error = assert_refused_untouched(
        s3, dest, lambda: write_committed(wide, dest.url, format=fmt, conflict_mode="append")
    )
    assert (error.destination_type, error.data_type) == ("decimal(6,2)", "decimal(9,2)")


def test_python_decimals_get_the_type_spark_gives_them(spark, s3, dest):
    """Spark's createDataFrame types Python Decimal objects decimal(38,18) (from rows, or from
    pandas without Arrow): in-process pandas input writes the same. (With Arrow, Spark takes
    pyarrow's type for each frame's values: the issue's decimal(3,2), then decimal(6,2).)"""
    frame = pd.DataFrame({"id": [1, 2], "amount": [D("1.50"), D("-2.25")]})
    rows = spark.createDataFrame(
        [tuple(r) for r in frame.itertuples(index=False)], ["id", "amount"]
    )
    write_committed(rows, dest.url + "/spark")
    write_committed(frame, dest.url + "/local")

    def amount_type(sub: str) -> str:
        key = f"{dest.dir}{sub}/_SUCCESS"
        doc = json.loads(s3.get_object(Bucket=BUCKET, Key=key)["Body"].read())
        return next(f["type"] for f in doc["schema"]["fields"] if f["name"] == "amount")

    assert amount_type("spark") == amount_type("local") == "decimal(38,18)"
