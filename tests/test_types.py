"""Data fidelity, with Spark's own writer as the oracle.

Every Spark SQL type a DataFrame can hold is written by ``df.write.<format>`` to a local
directory and by ``write_committed`` to S3, in session time zones UTC and Europe/Paris; Spark
reads both back (a local copy of ours: Spark has no S3 client here) and the schemas, the values
and, for the text formats, the very lines must agree.
"""

from __future__ import annotations

import datetime as dt
import decimal
import glob
import json
import math
import os
import random
from contextlib import contextmanager

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import BUCKET, download, list_keys, pending_uploads, visible_keys
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    NullType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from s3commit_sdk import InvalidArgumentError, write_committed

UTC = dt.timezone.utc
D = decimal.Decimal
NAN, INF = math.nan, math.inf
ZONES = ("UTC", "Europe/Paris")
FALL_BACK = [  # the night Paris puts its clocks back: both are 02:30 on the wall
    dt.datetime(2026, 10, 25, 0, 30, tzinfo=UTC),
    dt.datetime(2026, 10, 25, 1, 30, tzinfo=UTC),
]
FORMATS = ("parquet", "orc", "csv", "json")

# name, Spark type, one value per row (row 2 is null everywhere), formats that leave it out:
# CSV cannot hold nested types or the null type (Spark refuses them too); see docs/concepts/types.md
# for ORC (timestamp_ntz, dates before 1582) and Parquet (the null type).
COLUMNS = [
    ("id", IntegerType(), [0, 1, 2, 3], ()),
    ("b", ByteType(), [1, -128, None, 127], ()),
    ("s", ShortType(), [2, -32768, None, 32767], ()),
    ("i", IntegerType(), [3, -(2**31), None, 2**31 - 1], ()),
    ("l", LongType(), [4, -(2**63), None, 2**63 - 1], ()),
    ("f", FloatType(), [0.1, NAN, None, -INF], ()),
    ("d", DoubleType(), [1e7, INF, None, 1.5e-5], ()),
    ("d52", DecimalType(5, 2), [D("1.50"), D("-999.99"), None, D("0.00")], ()),
    ("d184", DecimalType(18, 4), [D("-12.3400"), D("12345678901234.5678"), None, D("0.0001")], ()),
    (
        "d3810",
        DecimalType(38, 10),
        [D("0E-10"), D("1E-10"), None, D("1234567890123456789012345678.0123456789")],
        (),
    ),
    ("str", StringType(), ['héllo,\t"q"\x07\b\f \\ x', "東京\n😀 a\\", None, ""], ()),
    ("bin", BinaryType(), [b"\x00\xffab", b"", None, bytes(range(1, 8))], ()),
    ("bool", BooleanType(), [True, False, None, True], ()),
    (
        "date",
        DateType(),
        [dt.date(2024, 2, 29), dt.date(1970, 1, 1), None, dt.date(9999, 12, 31)],
        (),
    ),
    (
        "old_date",
        DateType(),
        [dt.date(1, 1, 1), dt.date(1582, 10, 4), None, dt.date(1000, 6, 15)],
        ("orc",),  # refused in ORC: Spark would read them shifted (see docs/concepts/types.md)
    ),
    (
        "ts",
        TimestampType(),
        [
            dt.datetime(2024, 1, 2, 3, 4, 5, 123456, tzinfo=UTC),
            dt.datetime(1900, 1, 1, tzinfo=UTC),  # Paris was on local mean time: +00:09:21
            None,
            dt.datetime(1969, 12, 31, 23, 59, 59, tzinfo=UTC),
        ],
        (),
    ),
    (
        "ts_frac_1969",  # before 1970 with a fraction: refused in ORC (see docs/concepts/types.md)
        TimestampType(),
        [dt.datetime(1969, 12, 31, 23, 59, 59, 999500, tzinfo=UTC), None, None, None],
        ("orc",),
    ),
    (
        "ntz",
        TimestampNTZType(),
        [
            dt.datetime(2024, 1, 2, 3, 4, 5, 120000),
            dt.datetime(1, 1, 1),
            None,
            dt.datetime(2026, 3, 29, 2, 30),  # a wall clock Paris skips: fine without a zone
        ],
        ("orc",),  # ORC: see test_orc_timestamp_ntz_reads_back_as_timestamp...
    ),
    ("arr", ArrayType(IntegerType()), [[1, None, 3], [], None, [2**31 - 1]], ("csv",)),
    ("arr_s", ArrayType(StringType()), [["a", None], [], None, ['é,"']], ("csv",)),
    (
        "arr_ts",
        ArrayType(TimestampType()),
        [[dt.datetime(2024, 7, 1, 12, tzinfo=UTC)], [], None, [None]],
        ("csv",),
    ),
    (
        "st",
        StructType(
            [
                StructField("x", IntegerType()),
                StructField("y", StringType()),
                StructField("z", StructType([StructField("w", DoubleType())])),
            ]
        ),
        [
            {"x": 1, "y": "a", "z": {"w": 0.5}},
            {"x": None, "y": None, "z": None},
            None,
            {"x": 2, "y": None, "z": {"w": None}},
        ],
        ("csv",),
    ),
    (
        "m",
        MapType(StringType(), IntegerType()),
        [{"a": 1, "b": None}, {}, None, {"é": 2}],
        ("csv",),
    ),
    (  # Spark cannot read integer map keys back from its own JSON: compared as text below
        "mi",
        MapType(IntegerType(), DoubleType()),
        [{1: NAN, 2: 1e7}, {}, None, {-1: 0.1}],
        ("csv", "json"),
    ),
    ("nothing", NullType(), [None] * 4, ("parquet", "orc", "csv")),
]


def matrix(spark, fmt: str):
    """The type matrix as a Spark DataFrame, with the columns ``fmt`` can hold."""
    kept = [c for c in COLUMNS if fmt not in c[3]]
    schema = StructType([StructField(name, dtype) for name, dtype, _, _ in kept])
    rows = list(zip(*(values for _, _, values, _ in kept), strict=True))
    return spark.createDataFrame(rows, schema)


@contextmanager
def session_zone(spark, zone: str):
    """The session time zone set for the test, restored afterwards."""
    before = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", zone)
    try:
        yield
    finally:
        spark.conf.set("spark.sql.session.timeZone", before)


def spark_read(spark, fmt: str, path: str, schema: StructType | None = None):
    reader = spark.read.format(fmt)
    if schema is not None:
        reader = reader.schema(schema)
    if fmt == "csv":  # strings with newlines (Spark's own output needs it too)
        reader = reader.option("multiLine", True)
    return reader.load("file://" + path)


def values(df) -> list[str]:
    """Every row as text, by id; ``repr`` tells NaN, types and decimal scales apart."""
    return [repr(row) for row in df.orderBy("id").collect()]


def text_lines(root: str) -> list[str]:
    found = []
    for path in glob.glob(os.path.join(root, "**", "part-*"), recursive=True):
        with open(path, encoding="utf-8", newline="") as handle:
            found += handle.read().splitlines()
    return sorted(found)


def write_both(spark, df, fmt, dest, s3, tmp_path, **kwargs) -> tuple[str, str]:
    """Spark's own output (local) and ours (S3, copied locally); their local paths."""
    theirs = str(tmp_path / "spark")
    writer = df.coalesce(1).write.format(fmt)
    if kwargs.get("partition_by"):
        writer = writer.partitionBy(*kwargs["partition_by"])
    writer.save("file://" + theirs)
    write_committed(df, dest.url, format=fmt, **kwargs)
    return theirs, download(s3, dest.prefix, tmp_path / "ours")


def assert_same_as_spark(spark, fmt: str, schema: StructType, theirs: str, ours: str) -> None:
    if fmt in ("parquet", "orc", "json"):  # self-describing (JSON: Spark infers the schema)
        assert spark_read(spark, fmt, ours).schema == spark_read(spark, fmt, theirs).schema
    assert values(spark_read(spark, fmt, ours, schema)) == values(
        spark_read(spark, fmt, theirs, schema)
    )
    if fmt in ("csv", "json"):
        assert text_lines(ours) == text_lines(theirs)


@pytest.mark.parametrize("zone", ZONES)
@pytest.mark.parametrize("fmt", FORMATS)
def test_type_matrix_round_trips_as_spark_writes_it(spark, s3, dest, tmp_path, fmt, zone):
    with session_zone(spark, zone):
        df = matrix(spark, fmt)
        theirs, ours = write_both(spark, df, fmt, dest, s3, tmp_path)
        assert_same_as_spark(spark, fmt, df.schema, theirs, ours)


@pytest.mark.parametrize("fmt", FORMATS)
def test_arrow_input_writes_what_spark_writes_in_utc(spark, s3, dest, tmp_path, fmt):
    """The same rows as a pyarrow Table: same files as Spark's in session time zone UTC."""
    from pyspark.sql.pandas.types import to_arrow_schema

    with session_zone(spark, "UTC"):
        df = matrix(spark, fmt)
        theirs = str(tmp_path / "spark")
        df.coalesce(1).write.format(fmt).save("file://" + theirs)
    rows = zip(*(values for _, _, values, skip in COLUMNS if fmt not in skip), strict=True)
    table = pa.Table.from_pylist(
        [dict(zip(df.columns, row, strict=True)) for row in rows],
        schema=to_arrow_schema(df.schema, timezone="UTC"),
    )
    write_committed(table, dest.url, format=fmt, options={"tasks": 3})  # sliced, as tasks are
    ours = download(s3, dest.prefix, tmp_path / "ours")
    with session_zone(spark, "UTC"):
        assert_same_as_spark(spark, fmt, df.schema, theirs, ours)


def test_pandas_input_gets_the_file_schema_of_the_spark_path(spark, s3, dest):
    """The same pandas data through Spark (Arrow conversion) and in-process: same file schema."""
    frame = pd.DataFrame(
        {
            "i8": pd.Series([1, None], dtype="Int8"),
            "i16": pd.Series([1, 2], dtype="int16"),
            "i32": pd.Series([1, 2], dtype="int32"),
            "i64": [1, 2],
            "f32": pd.Series([0.5, None], dtype="float32"),
            "f64": [0.5, NAN],
            "flag": [True, False],
            "text": ["a", None],
            "raw": [b"a", None],
            "day": [dt.date(2024, 1, 1), None],
            # a declared type: Python Decimal objects become decimal(38, 18) in-process (a fixed
            # rule, so appends agree), while Spark's Arrow conversion infers from the values
            "amount": pd.Series([D("1.50"), D("-2.25")], dtype=pd.ArrowDtype(pa.decimal128(3, 2))),
            "ts": pd.to_datetime(["2026-10-25 00:30", "2026-10-25 01:30"]).tz_localize("UTC"),
            "ints": [[1, 2], []],
        }
    )
    frame["ts"] = frame["ts"].dt.tz_convert("Europe/Paris")
    through_spark = spark_frame_via_arrow(spark, frame)
    write_committed(through_spark, dest.url + "/spark")
    write_committed(frame, dest.url + "/local")

    def schema_of(sub: str) -> pa.Schema:
        key = next(k for k in visible_keys(s3, f"{dest.dir}{sub}/") if k.endswith(".parquet"))
        body = s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()
        return pq.read_schema(pa.BufferReader(body))

    assert schema_of("local").equals(schema_of("spark"), check_metadata=True)
    assert schema_of("local").field("ts").type == pa.timestamp("us", tz="UTC")


def spark_frame_via_arrow(spark, frame: pd.DataFrame):
    """``createDataFrame`` with Spark's Arrow conversion, which keeps pandas' dtypes."""
    key = "spark.sql.execution.arrow.pyspark.enabled"
    before = spark.conf.get(key)
    spark.conf.set(key, "true")
    try:
        return spark.createDataFrame(frame)
    finally:
        spark.conf.set(key, before)


@pytest.mark.parametrize("zone", ["Europe/Paris", "America/St_Johns"])
@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_text_formats_render_many_numbers_and_instants_as_spark(
    spark, s3, dest, tmp_path, fmt, zone
):
    """Hundreds of random doubles, floats and instants (1850-2100, any microsecond)."""
    rng = random.Random(12)
    start, span = dt.datetime(1850, 1, 1, tzinfo=UTC), dt.timedelta(days=250 * 365)
    rows = [
        (
            n,
            rng.uniform(-1, 1) * 10.0 ** rng.randint(-12, 25),
            rng.uniform(-1, 1) * 10.0 ** rng.randint(-8, 30),
            start + span * rng.random(),
        )
        for n in range(300)
    ]
    rows += [(300, 0.0, -0.0, FALL_BACK[0]), (301, -0.0, 0.0, FALL_BACK[1])]
    with session_zone(spark, zone):
        df = spark.createDataFrame(rows, "id int, d double, f float, ts timestamp")
        theirs, ours = write_both(spark, df, fmt, dest, s3, tmp_path)
    if java_major(spark) >= 19:
        assert text_lines(ours) == text_lines(theirs)
    else:  # Java 17's Double.toString sometimes prints a digit more than the shortest
        assert parsed_lines(ours, fmt) == parsed_lines(theirs, fmt)


def java_major(spark) -> int:
    version = spark.sparkContext._jvm.java.lang.System.getProperty("java.version")
    return int(version.split(".")[0])


def parsed_lines(root: str, fmt: str) -> list[tuple]:
    """(id, d, f, ts) of every line, numbers parsed: the same double and the same float,
    however many digits print them."""
    rows = []
    for line in text_lines(root):
        if fmt == "json":
            row = json.loads(line)
            fields = [row["id"], row["d"], row["f"], row["ts"]]
        else:
            fields = line.split(",")
        rows.append((fields[0], float(fields[1]), np.float32(fields[2]), fields[3]))
    return rows


# -- documented differences ------------------------------------------------------------------


def test_orc_timestamp_ntz_reads_back_as_timestamp_with_the_same_wall_clock(
    spark, s3, dest, tmp_path
):
    """pyarrow's ORC writer cannot set the attribute Spark marks timestamp_ntz with."""
    wall = dt.datetime(2024, 1, 2, 3, 4, 5, 120000)
    df = spark.createDataFrame([(1, wall)], "id int, ntz timestamp_ntz")
    with session_zone(spark, "Europe/Paris"):
        theirs, ours = write_both(spark, df, "orc", dest, s3, tmp_path)
        assert spark_read(spark, "orc", theirs).schema["ntz"].dataType == TimestampNTZType()
        back = spark_read(spark, "orc", ours)
        assert back.schema["ntz"].dataType == TimestampType()
        assert back.collect()[0].ntz == wall


def test_csv_keeps_the_whitespace_spark_trims(spark, s3, dest, tmp_path):
    texts = [" lead", "trail ", "\ttab\t", " "]
    df = spark.createDataFrame(list(enumerate(texts)), "id int, s string")
    theirs, ours = write_both(spark, df, "csv", dest, s3, tmp_path)
    schema = df.schema
    assert [r.s for r in spark_read(spark, "csv", ours, schema).orderBy("id").collect()] == texts
    trimmed = [r.s for r in spark_read(spark, "csv", theirs, schema).orderBy("id").collect()]
    assert trimmed[:3] == ["lead", "trail", "tab"]


# -- pandas indexes ---------------------------------------------------------------------------


def test_named_pandas_index_levels_become_columns(s3, dest, tmp_path, spark):
    index = pd.MultiIndex.from_tuples([("a", 1), ("b", 2)], names=["key", "n"])
    frame = pd.DataFrame({"value": [0.5, 1.5]}, index=index)
    write_committed(frame, dest.url)
    back = spark.read.parquet("file://" + download(s3, dest.prefix, tmp_path / "ours"))
    assert back.columns == ["value", "key", "n"]
    assert sorted(map(tuple, back.collect())) == [(0.5, "a", 1), (1.5, "b", 2)]


def test_unnamed_pandas_index_is_dropped(s3, dest, tmp_path, spark):
    frame = pd.DataFrame({"value": [1, 2, 3]}, index=[10, 20, 30])
    write_committed(frame[frame.value > 1], dest.url)
    back = spark.read.parquet("file://" + download(s3, dest.prefix, tmp_path / "ours"))
    assert back.columns == ["value"]


# -- refusals: a typed error before anything is uploaded -------------------------------------


def _empty_struct_table() -> pa.Table:
    return pa.table({"id": [1], "e": pa.array([{}], pa.struct([]))})


LOCAL_REFUSALS = [
    pytest.param(pa.table({"a": [1], "A": [2]}), {}, "duplicate", id="duplicate-names"),
    pytest.param(
        pa.table({"id": [1], "b": [b"x"]}), {"partition_by": "b"}, "partition", id="binary-part"
    ),
    pytest.param(
        pa.table({"id": [1], "s": [{"x": 1}]}), {"partition_by": "s"}, "partition", id="struct-part"
    ),
    pytest.param(
        pa.table({"id": [1], "a": [[1]]}), {"partition_by": "a"}, "partition", id="list-part"
    ),
    pytest.param(
        pa.table({"id": [1], "m": pa.array([[("k", 1)]], pa.map_(pa.string(), pa.int64()))}),
        {"partition_by": "m"},
        "partition",
        id="map-part",
    ),
    pytest.param(pd.DataFrame(index=range(3)), {}, "no columns", id="zero-columns"),
    pytest.param(_empty_struct_table(), {}, "empty struct", id="empty-struct"),
    pytest.param(
        pd.DataFrame({"id": [1], "wait": pd.to_timedelta([5], unit="s")}),
        {},
        "duration",
        id="duration",
    ),
    pytest.param(pa.table({"t": pa.array([1], pa.time64("us"))}), {}, "time64", id="time"),
    pytest.param(
        pa.table({"iv": pa.array([(1, 2, 3)], pa.month_day_nano_interval())}),
        {},
        "interval",
        id="interval",
    ),
    pytest.param(
        pa.table({"x": pa.array([D("1")], pa.decimal256(50, 0))}), {}, "38 digits", id="dec256"
    ),
    pytest.param(pd.DataFrame({"id": [1], "n": [None]}), {}, "only nulls", id="null-type-parquet"),
    pytest.param(
        pd.DataFrame({"id": [1], "n": [None]}),
        {"format": "orc"},
        "only nulls",
        id="null-type-orc",
    ),
    pytest.param(
        pa.table({"id": [1], "a": [[1]]}), {"format": "csv"}, "CSV cannot", id="csv-nested"
    ),
    pytest.param(
        pa.table({"s": pa.array([(1, 2)], pa.struct([("x", pa.int8()), ("x", pa.int8())]))}),
        {"format": "json"},
        "duplicate fields",
        id="struct-duplicate-fields",
    ),
    pytest.param(
        pd.DataFrame({"v": [1]}, index=pd.MultiIndex.from_tuples([("a", 1)], names=["key", None])),
        {},
        "index",
        id="multiindex-partly-named",
    ),
]


def assert_nothing_uploaded(s3, dest) -> None:
    assert pending_uploads(s3, dest.dir) == []
    assert visible_keys(s3, dest.dir) == []
    assert list_keys(s3, dest.dir) == []


@pytest.mark.parametrize(("data", "kwargs", "words"), LOCAL_REFUSALS)
def test_local_input_refused_before_any_upload(s3, dest, data, kwargs, words):
    with pytest.raises(InvalidArgumentError, match=words):
        write_committed(data, dest.url, **kwargs)
    assert_nothing_uploaded(s3, dest)


SPARK_REFUSALS = [
    pytest.param(
        lambda s: s.range(2).select("id", F.col("id").alias("ID")), {}, "duplicate", id="dup"
    ),
    pytest.param(
        lambda s: s.createDataFrame([(1, b"a")], "i int, b binary"),
        {"partition_by": "b"},
        "partition",
        id="binary-part",
    ),
    pytest.param(
        lambda s: s.createDataFrame([(1, (1,))], "i int, s struct<x:int>"),
        {"partition_by": "s"},
        "partition",
        id="struct-part",
    ),
    pytest.param(
        lambda s: s.range(2).withColumn("n", F.lit(None)),
        {"partition_by": "n"},
        "partition",
        id="void-part",
    ),
    pytest.param(lambda s: s.range(3).select(), {}, "no columns", id="zero-columns"),
    pytest.param(
        lambda s: s.range(2).withColumn("e", F.struct()), {}, "empty struct", id="empty-struct"
    ),
    pytest.param(
        lambda s: s.sql("select 1 as i, interval '1' day as iv"), {}, "interval", id="day-time"
    ),
    pytest.param(
        lambda s: s.sql("select 1 as i, interval '1' year as iv"), {}, "interval", id="year-month"
    ),
    pytest.param(
        lambda s: s.sql("select 1 as i, array(interval '1' day) as iv"),
        {},
        "interval",
        id="nested-interval",
    ),
    pytest.param(lambda s: s.sql("select 1 as i, time'12:34:56' as t"), {}, "time", id="time"),
    pytest.param(
        lambda s: s.sql("""select 1 as i, parse_json('{"a": 1}') as v"""),
        {},
        "variant",
        id="variant",
    ),
    pytest.param(
        lambda s: s.createDataFrame([(1, [1])], "i int, a array<int>"),
        {"format": "csv"},
        "CSV cannot",
        id="csv-nested",
    ),
]


@pytest.mark.parametrize(("make", "kwargs", "words"), SPARK_REFUSALS)
def test_spark_input_refused_before_any_upload(spark, s3, dest, make, kwargs, words):
    with pytest.raises(InvalidArgumentError, match=words):
        write_committed(make(spark), dest.url, **kwargs)
    assert_nothing_uploaded(s3, dest)


def test_null_type_is_written_to_json_as_spark_writes_it(spark, s3, dest, tmp_path):
    df = spark.range(2).withColumn("n", F.lit(None))
    theirs, ours = write_both(spark, df, "json", dest, s3, tmp_path)
    assert text_lines(ours) == text_lines(theirs) == ['{"id":0}', '{"id":1}']


def test_json_integer_map_keys_written_as_spark_writes_them(spark, s3, dest, tmp_path):
    """Spark's JSON reader cannot read integer map keys back; the lines still match Spark's."""
    rows = [(0, {1: NAN, 2: 1e7}), (1, {}), (2, None), (3, {-1: 0.1})]
    df = spark.createDataFrame(rows, "id int, mi map<int,double>")
    theirs, ours = write_both(spark, df, "json", dest, s3, tmp_path)
    assert text_lines(ours) == text_lines(theirs)
    assert '{"id":0,"mi":{"1":"NaN","2":1.0E7}}' in text_lines(ours)


ZONED = pa.timestamp("us", "UTC")
ORC_MISREAD = [
    pytest.param(
        dt.datetime(1969, 12, 31, 23, 59, 59, 500000, tzinfo=UTC), ZONED, "1970", id="1969-frac"
    ),
    pytest.param(dt.datetime(1582, 10, 14, tzinfo=UTC), ZONED, "1582", id="julian-timestamp"),
    pytest.param(dt.date(1000, 1, 1), pa.date32(), "1582", id="julian-date"),
]


@pytest.mark.parametrize(("value", "kind", "words"), ORC_MISREAD)
@pytest.mark.parametrize("engine", ["local", "spark"])
def test_orc_refuses_values_spark_would_misread(spark, s3, dest, engine, value, kind, words):
    """Java's ORC reader shifts or rejects them in files pyarrow wrote: refused, never written."""
    table = pa.table({"id": [1, 2], "v": pa.array([None, value], kind)})
    data = spark.createDataFrame(table.to_pandas()) if engine == "spark" else table
    with pytest.raises(InvalidArgumentError, match=words):
        write_committed(data, dest.url, format="orc")
    assert_nothing_uploaded(s3, dest)
