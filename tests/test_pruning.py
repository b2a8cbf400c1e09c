"""Partition pruning keeps exactly the directories Spark keeps rows of (issue 27, item 1).

For every partitionable type and every filter shape the Python data source pushdown offers, the
ids ``spark.read.format("s3commit")`` returns with pushdown on are compared with Spark's own
evaluation of the same filter over the same rows (the read with pushdown off), null and NaN
directories included; and the read scans only the directories holding a matching row, or none.
The same comparison runs once on Spark Connect (this file is also the Connect child's script).
"""

from __future__ import annotations

import datetime as dt
import decimal
import io
import math
import uuid
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql.datasource import (
    EqualNullSafe,
    EqualTo,
    GreaterThan,
    In,
    IsNotNull,
    IsNull,
    LessThan,
    Not,
    StringStartsWith,
)

from s3commit_sdk.paths import HIVE_DEFAULT_PARTITION, escape_partition_value
from s3commit_sdk.pruning import UNKNOWN, compare, may_match, partition_values, truth

NAN = float("nan")


@dataclass(frozen=True)
class Case:
    """One partition column: its raw directory values, the type read (None: inferred), and the
    filters, each a SQL condition Spark pushes as one or more of the data source's filters."""

    name: str
    raws: tuple[str | None, ...]
    conditions: tuple[str, ...]
    type: str | None = None


INT_FILTERS = (
    "p = 7",
    "p > 0",
    "p >= 7",
    "p < 0",
    "p <= 0",
    "p <=> 7",
    "p <=> null",
    "p in (0, 7)",
    "p in (1, null)",
    "p is null",
    "p is not null",
    "p != 7",
    "not (p in (0, 7))",
    "not (p <=> 7)",
    "p = 3",
    "p = 7 and id >= 0",
)
CASES = (
    Case("int", ("-5", "0", "7", "2147483647", None), INT_FILTERS),
    Case("long", ("3000000000", "-1", None), ("p > 0", "p = 3000000000", "p < 3000000000")),
    Case("tinyint", ("1", "-3", "7", None), INT_FILTERS, "tinyint"),
    Case("smallint", ("1", "-3", "7", None), INT_FILTERS, "smallint"),
    Case(
        "double",
        ("1.5", "NaN", "-Infinity", "Infinity", "-0.0", "0.0", "2.5", None),
        (
            "p > 1.0",
            "p >= double('NaN')",
            "p = double('NaN')",
            "p < double('NaN')",
            "p <= double('Infinity')",
            "p > double('Infinity')",
            "p <=> double('NaN')",
            "p in (1.5, double('NaN'))",
            "p = 0.0",
            "p = -0.0",
            "p < 0.0",
            "p > double('-Infinity')",
            "not (p = double('NaN'))",
            "p != 1.5",
            "p is null",
            "p is not null",
        ),
    ),
    Case(
        "float",
        ("0.1", "NaN", "1.5", None),
        (
            "p = float(0.1)",
            "p > float(1.0)",
            "p = float('NaN')",
            "p < float('NaN')",
            "p in (float(0.1), float(2))",
            "p != float(1.5)",
        ),
        "float",
    ),
    Case(
        "decimal-inferred",
        ("12345678901234567890", "1", None),
        ("p > 2", "p = 12345678901234567890", "p in (1, 5)", "p <= 1"),
    ),
    Case(
        "decimal",
        ("1.23", "1.5", "-0.01", None),
        ("p > 1.3", "p = 1.5", "p <= 1.23", "p in (1.23, 9)", "p < 0", "p != 1.5"),
        "decimal(10,2)",
    ),
    Case(
        "string",
        ("a", "ab", "b", "Zürich", "a=b", "é", "z", None),
        (
            "p = 'ab'",
            "p > 'a'",
            "p < 'b'",
            "p >= 'Z'",
            "p > 'z'",
            "p like 'a%'",
            "p like '%b'",
            "p like '%ü%'",
            "p in ('a', 'é')",
            "p <=> 'b'",
            "not (p like 'a%')",
            "p != 'a'",
            "p is null",
        ),
    ),
    Case(
        "boolean",
        ("true", "false", None),
        ("p", "not p", "p = false", "p <=> true", "p is null", "p > false", "p in (true)"),
        "boolean",
    ),
    Case(
        "date",
        ("2026-11-01", "2026-11-02", "1999-12-31", None),
        (
            "p > date'2026-11-01'",
            "p = date'2026-11-02'",
            "p in (date'1999-12-31')",
            "p <= date'2026-11-01'",
            "p != date'2026-11-01'",
        ),
    ),
    Case(
        "timestamp",
        ("2026-11-01 10:00:00", "2026-11-01 10:00:00.5", "2026-11-02 00:00:00", None),
        (
            "p > timestamp'2026-11-01 10:00:00'",
            "p = timestamp'2026-11-01 10:00:00.5'",
            "p < timestamp'2026-11-02 00:00:00'",
            "p in (timestamp'2026-11-02 00:00:00')",
            "p >= timestamp'2026-11-01 10:00:00+01:00'",
        ),
    ),
)
#: the Connect run: the shapes of the issue's report (NaN above every double; an empty prune)
CONNECT_CASES = (CASES[4],)
CONNECT_EXTRA = {"double": ("p > 10.0 and p < 20.0",)}


# -- the evaluator alone -------------------------------------------------------------------------
def test_nan_sorts_above_every_double_and_equals_itself():
    assert compare(NAN, math.inf) == 1 and compare(NAN, NAN) == 0 and compare(-0.0, 0.0) == 0
    assert truth(GreaterThan(("d",), 1.0), {"d": NAN}) is True
    assert truth(EqualTo(("d",), NAN), {"d": NAN}) is True
    assert truth(In(("d",), [1.0, NAN]), {"d": NAN}) is True
    assert truth(LessThan(("d",), NAN), {"d": math.inf}) is True


def test_nulls_follow_three_valued_logic():
    null = {"p": None}
    assert truth(EqualTo(("p",), 1), null) is None
    assert truth(Not(EqualTo(("p",), 1)), null) is None
    assert truth(EqualNullSafe(("p",), None), null) is True
    assert truth(EqualNullSafe(("p",), 1), null) is False
    assert truth(IsNull(("p",)), null) is True and truth(IsNotNull(("p",)), null) is False
    assert truth(In(("p",), [2, None]), {"p": 1}) is None
    assert truth(In(("p",), [1, None]), {"p": 1}) is True
    assert not may_match([EqualTo(("p",), 1)], null)  # null: the row is filtered out


def test_what_cannot_be_decided_is_kept():
    assert truth(EqualTo(("q",), 1), {"p": 1}) is UNKNOWN  # not a partition column
    assert truth(EqualTo(("p", "x"), 1), {"p": 1}) is UNKNOWN  # a nested field
    assert truth(EqualTo(("p",), True), {"p": 1}) is UNKNOWN  # a literal of another type
    aware = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    assert truth(GreaterThan(("p",), aware), {"p": dt.datetime(2026, 1, 1)}) is UNKNOWN
    assert truth(StringStartsWith(("p",), "a"), {"p": 1}) is UNKNOWN
    assert may_match([Not(EqualTo(("q",), 1))], {"p": 1})


def test_values_are_the_ones_the_reader_returns():
    types = {"f": pa.float32(), "d": pa.decimal128(10, 2), "n": pa.float64(), "b": pa.bool_()}
    values = partition_values(
        ("f", "d", "n", "b", "x"), ("0.1", "1.2", "NaN", "tRue", "1"), types, "UTC"
    )
    assert values["f"] == float(pa.scalar(0.1, pa.float32()).as_py()) != 0.1  # float32
    assert values["d"].as_tuple() == decimal.Decimal("1.20").as_tuple()  # decimal(10,2)
    assert math.isnan(values["n"]) and values["b"] is True
    assert "x" not in values  # not a column of the read: unknown
    unreadable = {"i": pa.int32(), "d": pa.decimal128(10, 2)}  # the read would fail too
    assert partition_values(("i", "d"), ("x", "1.234"), unreadable, "UTC") == {}


# -- against Spark -------------------------------------------------------------------------------
def put_directories(client, bucket: str, prefix: str, raws) -> dict[int, str | None]:
    """One Parquet file of two ids per directory ``p=<raw>``; returns each id's raw value."""
    owners: dict[int, str | None] = {}
    for index, raw in enumerate(raws):
        shown = HIVE_DEFAULT_PARTITION if raw is None else escape_partition_value(raw)
        ids = [2 * index, 2 * index + 1]
        sink = io.BytesIO()
        pq.write_table(pa.table({"id": pa.array(ids, pa.int64())}), sink)
        client.put_object(
            Bucket=bucket, Key=f"{prefix}/p={shown}/part-{index}.parquet", Body=sink.getvalue()
        )
        owners.update(dict.fromkeys(ids, raw))
    return owners


def compare_with_spark(spark, load, case: Case, owners, extra=(), scans=None) -> list[str]:
    """Every condition of ``case`` read with pushdown off (Spark's evaluation) and on (ours);
    the mismatches, as text: other ids, or (where ``scans`` counts a read's input partitions)
    other than one directory scanned per directory holding a matching row (one, empty, if
    none)."""
    problems = []
    for condition in (*case.conditions, *extra):
        spark.conf.set("spark.sql.python.filterPushdown.enabled", "false")
        expected = sorted(r.id for r in load().filter(condition).collect())
        spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
        try:
            pushed = load().filter(condition)
            got = sorted(r.id for r in pushed.collect())
            scanned = scans(pushed) if scans else None
        finally:
            spark.conf.unset("spark.sql.python.filterPushdown.enabled")
        directories = len({owners[i] for i in expected} if expected else ())
        if got != expected:
            problems.append(f"{case.name}: {condition}: pushdown gave {got}, Spark {expected}")
        elif scanned is not None and scanned != max(1, directories):
            problems.append(
                f"{case.name}: {condition}: scanned {scanned} directories, {directories} match"
            )
    return problems


@pytest.fixture
def native(spark, s3_server):
    from test_datasource import Native

    from s3commit_sdk import register

    register(spark)
    return Native(spark, s3_server)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_pruning_keeps_what_spark_keeps(native, s3_server, s3, dest, case):
    from conftest import BUCKET

    owners = put_directories(s3, BUCKET, dest.prefix, case.raws)
    schema = f"id long, p {case.type}" if case.type else None
    load = lambda: native.load(dest.url, schema)  # noqa: E731
    scans = lambda df: df.rdd.getNumPartitions()  # noqa: E731
    assert compare_with_spark(native.spark, load, case, owners, scans=scans) == []


def test_a_filter_matching_no_partition_reads_no_rows(native, s3, dest):
    from conftest import BUCKET

    put_directories(s3, BUCKET, dest.prefix, ("1.5", "NaN", None))
    native.spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    try:
        empty = native.load(dest.url).filter("p > 10.0 and p < 20.0")
        assert empty.collect() == [] and empty.rdd.getNumPartitions() == 1
        assert sorted(r.id for r in native.load(dest.url).filter("p > 1.0").collect()) == [
            0,
            1,
            2,
            3,
        ]
    finally:
        native.spark.conf.unset("spark.sql.python.filterPushdown.enabled")


@pytest.mark.cluster
@pytest.mark.long  # a Connect server of its own: over a minute on 2 cores
def test_pruning_on_spark_connect(s3_server, s3, tmp_path):
    from conftest import BUCKET, run_connect_child

    prefix = f"t/pruning-connect-{uuid.uuid4().hex[:8]}"
    for case in CONNECT_CASES:
        put_directories(s3, BUCKET, f"{prefix}/{case.name}", case.raws)
    spec = {"base": f"s3://{BUCKET}/{prefix}", "out": str(tmp_path / "out.json")}
    results = run_connect_child(Path(__file__), spec, s3_server, tmp_path, timeout=600)
    assert results == {case.name: [] for case in CONNECT_CASES}


def connect_main(spec: dict) -> dict:
    """The Connect child: the comparison of each Connect case, on a local Connect server."""
    from s3commit_sdk.testing.sandbox import local_spark

    spark = local_spark("local[2]", connect=True)
    results = {}
    for case in CONNECT_CASES:
        owners = {2 * i + k: raw for i, raw in enumerate(case.raws) for k in (0, 1)}
        url = f"{spec['base']}/{case.name}"
        results[case.name] = compare_with_spark(
            spark,
            lambda url=url: spark.read.format("s3commit").load(url),
            case,
            owners,
            CONNECT_EXTRA.get(case.name, ()),
        )
    spark.stop()
    return results


if __name__ == "__main__":
    from connect_scenarios import run_as_child

    run_as_child(connect_main)
