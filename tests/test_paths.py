"""Destination URLs and Hive-style partition directories, checked against Spark's own output."""

from __future__ import annotations

import contextlib
import datetime as dt
import decimal
import os

import pandas as pd
import pyarrow as pa
import pytest
from conftest import download, list_keys, pending_uploads, visible_keys

from s3commit_sdk import write_committed
from s3commit_sdk.errors import InvalidArgumentError, InvalidPathError, S3CommitError
from s3commit_sdk.paths import (
    HIVE_DEFAULT_PARTITION,
    MAX_KEY_BYTES,
    NAME_ROOM,
    S3Location,
    is_hidden,
    parse_destination,
    parse_s3_url,
    partition_dir,
)

# -- parse_s3_url ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("s3://bucket/tables/events", S3Location("s3", "bucket", "tables/events")),
        ("s3a://bucket/tables/events", S3Location("s3a", "bucket", "tables/events")),
        ("s3://bucket/tables/events/", S3Location("s3", "bucket", "tables/events")),
        ("s3://bucket", S3Location("s3", "bucket", "")),
        ("s3://bucket/", S3Location("s3", "bucket", "")),
        ("s3://my-bucket.data/a b/Zürich", S3Location("s3", "my-bucket.data", "a b/Zürich")),
    ],
)
def test_parse_s3_url_accepts(url, expected):
    assert parse_s3_url(url) == expected


@pytest.mark.parametrize(
    "url",
    [
        "s3:///x",  # no bucket
        "s3://",  # no bucket
        "s3a:///x",
        "/tmp/x",  # a local path
        "gs://b/x",  # another store
        "file:///x",
        "hdfs://nn/x",
        "s3://b/a//c",  # empty segment
        "s3://b/a/../c",  # parent segment
        "s3://b/..",
        "s3://b/a/./c",
        "",
        "   ",
    ],
)
def test_parse_s3_url_rejects(url):
    with pytest.raises(InvalidPathError) as info:
        parse_s3_url(url)
    # InvalidPathError is an argument error: callers catching ValueError see it too.
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value, S3CommitError)


def test_parse_s3_url_rejection_messages_say_what_is_wrong():
    with pytest.raises(ValueError, match="no bucket"):
        parse_s3_url("s3:///x")
    with pytest.raises(ValueError, match="scheme"):
        parse_s3_url("gs://b/x")
    with pytest.raises(ValueError, match="//"):
        parse_s3_url("s3://b/a//c")
    with pytest.raises(ValueError, match=r"\.\."):
        parse_s3_url("s3://b/a/../c")


@pytest.mark.parametrize("url", ["s3://b/a\\b", "s3a://b/tables\\events/x", "s3://b/trailing\\"])
def test_a_backslash_in_an_s3_destination_is_refused_saying_why(url):
    """Some S3 servers store '\\' in a key as '/': the files would be listed under other names."""
    for parse in (parse_s3_url, parse_destination):
        with pytest.raises(InvalidPathError, match="backslash") as info:
            parse(url)
        assert "'/'" in str(info.value) and "other names" in str(info.value)
    # in a partition value it is escaped as Spark escapes it, so no key carries it
    assert partition_dir(["city"], ["back\\slash"]) == "city=back%5Cslash"


def test_dir_prefix_has_trailing_slash_and_keeps_siblings_apart():
    loc = parse_s3_url("s3://bucket/out/ds1")
    assert loc.dir_prefix == "out/ds1/"
    sibling = parse_s3_url("s3://bucket/out/ds10")
    assert not sibling.key("part-0").startswith(loc.dir_prefix)
    assert loc.key("a=1/part-0") == "out/ds1/a=1/part-0"
    assert loc.relative("out/ds1/a=1/part-0") == "a=1/part-0"
    with pytest.raises(InvalidPathError):
        loc.relative("out/ds10/part-0")
    # A destination at the bucket root has the empty prefix.
    assert parse_s3_url("s3://bucket").dir_prefix == ""
    assert parse_s3_url("s3a://bucket/x/").url() == "s3a://bucket/x"


@pytest.mark.parametrize(
    ("relpath", "hidden"),
    [
        ("part-0.parquet", False),
        ("year=2024/part-0.parquet", False),
        ("_SUCCESS", True),
        (".part-0.crc", True),
        ("__s3commit/job/journal.json", True),
        ("__magic/job/x", True),
        ("year=2024/_temporary/x", True),
        ("year=2024/.hidden/x", True),
        ("a_b/c.d", False),
        ("year=2024/", False),
    ],
)
def test_is_hidden(relpath, hidden):
    assert is_hidden(relpath) is hidden


# -- partition directories vs Spark ----------------------------------------------------------


def _leaf_partition_dirs(root: str) -> set[str]:
    """Relative paths of every directory Spark wrote a data file into."""
    found = set()
    for directory, _subdirs, files in os.walk(root):
        if any(name.startswith("part-") for name in files):
            found.add(os.path.relpath(directory, root))
    return found


def _assert_same_dirs(ours: set[str], spark_dirs: set[str]) -> None:
    assert ours == spark_dirs, (
        f"only ours: {sorted(ours - spark_dirs)}; only Spark's: {sorted(spark_dirs - ours)}"
    )


# A partition column whose name itself needs escaping.
CITY = "city name=ü%"

STRINGS = [
    "plain",
    "with space",
    " leading and trailing ",
    "Zürich",
    "東京",
    "emoji 😀",
    "a=b",
    "a/b",
    "100%",
    "a%2Fb",
    "12:30:00",
    "#tag",
    "why?",
    'say "hi"',
    "it's",
    "star*",
    "back\\slash",
    "{brace}",
    "[bracket]",
    "caret^",
    "tab\there",
    "ctrl\x01char",
    "del\x7f",
    "<lt>|gt",
    "tilde~plus+amp&comma,semi;",
    "_underscore",
    ".dot",
    None,
    "",
]


def test_partition_dir_matches_spark(spark, tmp_path):
    from pyspark.sql.types import (
        BooleanType,
        DateType,
        IntegerType,
        StringType,
        StructField,
        StructType,
    )

    ints = [0, -7, 2024, 2**31 - 1, None]
    dates = [dt.date(2024, 2, 29), dt.date(1970, 1, 1), dt.date(9999, 12, 31), None]
    bools = [True, False, None]
    rows = [
        (n, text, ints[n % len(ints)], dates[n % len(dates)], bools[n % len(bools)])
        for n, text in enumerate(STRINGS)
    ]
    schema = StructType(
        [
            StructField("id", IntegerType()),
            StructField(CITY, StringType()),
            StructField("n", IntegerType()),
            StructField("day", DateType()),
            StructField("flag", BooleanType()),
        ]
    )
    columns = [CITY, "n", "day", "flag"]
    root = str(tmp_path / "out")
    df = spark.createDataFrame(rows, schema).repartition(2)
    df.write.partitionBy(*columns).parquet("file://" + root)

    spark_dirs = _leaf_partition_dirs(root)
    ours = {partition_dir(columns, list(row[1:])) for row in rows}
    assert len(spark_dirs) == len(rows)  # every row is its own partition
    _assert_same_dirs(ours, spark_dirs)
    # Spark writes null and "" both as the default partition (two rows here).
    defaults = [
        d for d in spark_dirs if d.startswith(f"city name%3Dü%25={HIVE_DEFAULT_PARTITION}/")
    ]
    assert len(defaults) == 2, defaults


def test_partition_dir_single_column_each_escaped_char_matches_spark(spark, tmp_path):
    """One directory per ASCII character (and a few others), partitioned by a string column."""
    from pyspark.sql.types import IntegerType, StringType, StructField, StructType

    chars = [chr(c) for c in range(1, 128)] + ["é", "ß", "中", "\u00a0", "\u2028"]
    rows = [(n, f"x{ch}y") for n, ch in enumerate(chars)]
    schema = StructType([StructField("id", IntegerType()), StructField("c", StringType())])
    root = str(tmp_path / "chars")
    spark.createDataFrame(rows, schema).coalesce(1).write.partitionBy("c").parquet("file://" + root)
    spark_dirs = _leaf_partition_dirs(root)
    assert len(spark_dirs) == len(rows)
    _assert_same_dirs({partition_dir(["c"], [value]) for _, value in rows}, spark_dirs)


def test_partition_dir_timestamps_and_decimals_match_spark(spark, tmp_path):
    """Timestamps (session time zone UTC) and decimals as Arrow hands them over (column scale)."""
    from pyspark.sql.types import (
        DecimalType,
        IntegerType,
        StructField,
        StructType,
        TimestampType,
    )

    utc = dt.timezone.utc
    rows = [
        (1, dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=utc), decimal.Decimal("1.50")),
        (2, dt.datetime(2024, 1, 2, 3, 4, 5, 120000, tzinfo=utc), decimal.Decimal("-0.01")),
        (3, dt.datetime(1999, 12, 31, 23, 59, 59, 999999, tzinfo=utc), decimal.Decimal("100.00")),
        (4, dt.datetime(2024, 1, 2, tzinfo=utc), decimal.Decimal("0.00")),
        (5, None, None),
    ]
    schema = StructType(
        [
            StructField("id", IntegerType()),
            StructField("ts", TimestampType()),
            StructField("amount", DecimalType(10, 2)),
        ]
    )
    root = str(tmp_path / "ts")
    spark.createDataFrame(rows, schema).write.partitionBy("ts", "amount").parquet("file://" + root)
    spark_dirs = _leaf_partition_dirs(root)
    assert len(spark_dirs) == len(rows)
    _assert_same_dirs({partition_dir(["ts", "amount"], list(row[1:])) for row in rows}, spark_dirs)


def test_partition_dir_doubles_match_spark(spark, tmp_path):
    """Spark renders doubles like Java (``1.0E7``, ``1.5E-5``), not like Python's repr."""
    from pyspark.sql.types import DoubleType, IntegerType, StructField, StructType

    values = [1.0, 0.1, -2.5, 0.001, 1e7, 9999999.0, 123456789.125, 1.5e-5, 1e21, None]
    schema = StructType([StructField("id", IntegerType()), StructField("x", DoubleType())])
    root = str(tmp_path / "dbl")
    spark.createDataFrame(list(enumerate(values)), schema).write.partitionBy("x").parquet(
        "file://" + root
    )
    spark_dirs = _leaf_partition_dirs(root)
    assert len(spark_dirs) == len(values)
    _assert_same_dirs({partition_dir(["x"], [v]) for v in values}, spark_dirs)


def test_partition_dir_null_and_empty_are_default_partition():
    assert partition_dir(["a", "b"], [None, ""]) == (
        f"a={HIVE_DEFAULT_PARTITION}/b={HIVE_DEFAULT_PARTITION}"
    )
    assert partition_dir(["a=b", "c/d"], ["x/y", "1=2"]) == "a%3Db=x%2Fy/c%2Fd=1%3D2"
    assert partition_dir(["flag", "n", "day"], [False, 0, dt.date(2024, 1, 5)]) == (
        "flag=false/n=0/day=2024-01-05"
    )
    with pytest.raises(ValueError):
        partition_dir(["a", "b"], ["only one"])


# -- every partitionable type, end to end, against Spark's partitionBy -----------------------

UTC = dt.timezone.utc
D = decimal.Decimal
NAN, INF = float("nan"), float("inf")


def _partition_matrix(spark):
    """One column per partitionable Spark type; each row is its own partition (row 2: nulls)."""
    from pyspark.sql.types import (
        BooleanType,
        ByteType,
        DateType,
        DecimalType,
        DoubleType,
        FloatType,
        IntegerType,
        LongType,
        ShortType,
        StringType,
        StructField,
        StructType,
        TimestampNTZType,
        TimestampType,
    )

    columns = [
        ("b", ByteType(), [1, -128, None, 127, 0]),
        ("s", ShortType(), [2, -32768, None, 32767, 0]),
        ("i", IntegerType(), [3, -(2**31), None, 2**31 - 1, 0]),
        ("l", LongType(), [4, -(2**63), None, 2**63 - 1, 0]),
        ("f", FloatType(), [0.1, NAN, None, -INF, 3.4e38]),
        ("d", DoubleType(), [1e7, INF, None, 1.5e-5, 123456789.125]),
        ("d52", DecimalType(5, 2), [D("1.50"), D("-999.99"), None, D("0.00"), D("0.01")]),
        ("d184", DecimalType(18, 4), [D("-12.3400"), D("1E+13"), None, D("0.0001"), D("1")]),
        ("d3810", DecimalType(38, 10), [D("0E-10"), D("1E-10"), None, D("12.5"), D("-1E-7")]),
        ("str", StringType(), ["a b", "é/=%:", None, "", "東京"]),
        ("bool", BooleanType(), [True, False, None, True, False]),
        (
            "day",
            DateType(),
            [
                dt.date(2024, 2, 29),
                dt.date(1, 1, 1),
                None,
                dt.date(9999, 12, 31),
                dt.date(1582, 10, 4),
            ],
        ),
        (
            "ts",
            TimestampType(),
            [
                dt.datetime(2024, 1, 2, 3, 4, 5, 120000, tzinfo=UTC),
                dt.datetime(1900, 1, 1, tzinfo=UTC),  # local mean time in Paris: +00:09:21
                None,
                dt.datetime(2026, 10, 25, 0, 30, tzinfo=UTC),  # 02:30 (+02:00) in Paris
                dt.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
            ],
        ),
        (
            "ntz",
            TimestampNTZType(),
            [
                dt.datetime(2024, 1, 2, 3, 4, 5, 1),
                dt.datetime(1, 1, 1),
                None,
                dt.datetime(2026, 3, 29, 2, 30),
                dt.datetime(2000, 1, 1),
            ],
        ),
    ]
    schema = StructType(
        [StructField("id", IntegerType())] + [StructField(n, t) for n, t, _ in columns]
    )
    rows = [(n, *row) for n, row in enumerate(zip(*(v for _, _, v in columns), strict=True))]
    return spark.createDataFrame(rows, schema), [name for name, _, _ in columns]


def _our_partition_dirs(s3, dest) -> set[str]:
    return {key[len(dest.dir) :].rsplit("/", 1)[0] for key in visible_keys(s3, dest.dir)}


@contextlib.contextmanager
def _session_zone(spark, zone: str):
    before = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", zone)
    try:
        yield
    finally:
        spark.conf.set("spark.sql.session.timeZone", before)


@pytest.mark.parametrize("zone", ["UTC", "Europe/Paris"])
def test_every_partitionable_type_renders_as_spark_renders_it(spark, s3, dest, tmp_path, zone):
    with _session_zone(spark, zone):
        df, columns = _partition_matrix(spark)
        root = str(tmp_path / "spark")
        df.write.partitionBy(*columns).parquet("file://" + root)
        write_committed(df, dest.url, partition_by=columns)
    spark_dirs = _leaf_partition_dirs(root)
    assert len(spark_dirs) == df.count()
    _assert_same_dirs(_our_partition_dirs(s3, dest), spark_dirs)


def test_arrow_input_partitions_as_spark_in_utc(spark, s3, dest, tmp_path):
    """The same values as a pyarrow Table name the same directories as Spark's in UTC."""
    from pyspark.sql.pandas.types import to_arrow_schema

    with _session_zone(spark, "UTC"):
        df, columns = _partition_matrix(spark)
        root = str(tmp_path / "spark")
        df.write.partitionBy(*columns).parquet("file://" + root)
        table = pa.Table.from_pylist(
            [row.asDict() for row in df.collect()], to_arrow_schema(df.schema, timezone="UTC")
        )
    write_committed(table, dest.url, partition_by=columns)
    _assert_same_dirs(_our_partition_dirs(s3, dest), _leaf_partition_dirs(root))


# -- instants that differ never share a directory ------------------------------------------

FALL_BACK = [  # the night Paris puts its clocks back: both are 02:30 on the wall
    dt.datetime(2026, 10, 25, 0, 30, tzinfo=UTC),
    dt.datetime(2026, 10, 25, 1, 30, tzinfo=UTC),
]


def test_pandas_instants_partition_in_utc_and_read_back_exactly(spark, s3, dest, tmp_path):
    frame = pd.DataFrame({"id": [1, 2], "ts": pd.to_datetime(FALL_BACK).tz_convert("Europe/Paris")})
    write_committed(frame, dest.url, partition_by="ts")
    assert _our_partition_dirs(s3, dest) == {
        "ts=2026-10-25 00%3A30%3A00",
        "ts=2026-10-25 01%3A30%3A00",
    }
    with _session_zone(spark, "UTC"):
        back = spark.read.parquet("file://" + download(s3, dest.prefix, tmp_path / "ours"))
        instants = sorted(row.ts.replace(tzinfo=UTC) for row in back.collect())
    assert instants == FALL_BACK


def test_spark_refuses_the_second_instant_of_a_repeated_hour(spark, s3, dest, tmp_path):
    """Spark itself writes both instants into one directory and reads one instant back."""
    with _session_zone(spark, "Europe/Paris"):
        df = spark.createDataFrame([(1, FALL_BACK[0]), (2, FALL_BACK[1])], "id int, ts timestamp")
        root = str(tmp_path / "spark")
        df.write.partitionBy("ts").parquet("file://" + root)
        assert _leaf_partition_dirs(root) == {"ts=2026-10-25 02%3A30%3A00"}
        with pytest.raises(InvalidArgumentError, match="clocks go back"):
            write_committed(df, dest.url, partition_by="ts")
    assert pending_uploads(s3, dest.dir) == [] and list_keys(s3, dest.dir) == []


# -- characters and lengths S3 keys cannot carry -------------------------------------------


@pytest.mark.fault
def test_nul_in_a_partition_value_is_escaped_and_reads_back(spark, s3, dest, tmp_path):
    frame = pd.DataFrame({"id": [1, 2], "p": ["a\x00b", "plain"]})
    write_committed(frame, dest.url, partition_by="p")
    assert _our_partition_dirs(s3, dest) == {"p=a%00b", "p=plain"}
    back = spark.read.parquet("file://" + download(s3, dest.prefix, tmp_path / "ours"))
    assert sorted(row.p for row in back.collect()) == ["a\x00b", "plain"]


@pytest.mark.parametrize(
    "url",
    [
        "s3://b/a\x00b",
        "s3://b/tab\there",
        "s3://b/del\x7f",
        "s3://b/x\ufffe",
        "s3://b/" + "x" * (MAX_KEY_BYTES - NAME_ROOM),
        "s3://b/" + "é" * ((MAX_KEY_BYTES - NAME_ROOM) // 2),
        "file:///tmp/a\x00b",
    ],
)
@pytest.mark.fault
def test_destinations_s3_cannot_carry_are_refused(url):
    with pytest.raises(InvalidPathError, match=r"U\+|bytes"):
        parse_destination(url)


def test_longest_destination_leaves_room_for_the_files():
    longest = "s3://b/" + "x" * (MAX_KEY_BYTES - NAME_ROOM - 1)
    assert len(parse_s3_url(longest).dir_prefix.encode()) == MAX_KEY_BYTES - NAME_ROOM


@pytest.mark.parametrize("engine", ["local", "spark"])
@pytest.mark.fault
def test_partition_key_over_1024_bytes_is_refused_naming_it(spark, s3, dest, engine):
    frame = pd.DataFrame({"id": [1, 2], "p": ["short", "ü" * 500]})
    data = spark.createDataFrame(frame) if engine == "spark" else frame
    with pytest.raises(InvalidPathError, match="1024") as info:
        write_committed(data, dest.url, partition_by="p")
    assert "p=üüü" in str(info.value) and dest.prefix in str(info.value)
    assert pending_uploads(s3, dest.dir) == [] and visible_keys(s3, dest.dir) == []
