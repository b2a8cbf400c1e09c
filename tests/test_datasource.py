"""The ``s3commit`` Spark data source on a classic session: writes, save modes, failures, reads.

The same scenarios under Spark Connect run in their own process: tests/test_connect.py.
"""

from __future__ import annotations

import datetime as dt
import io
import os
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import BUCKET, download, list_keys, pending_uploads, read_back, rows_of, visible_keys
from pyspark.errors import PySparkException
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType

from s3commit_sdk import InvalidArgumentError, read_result, register, write_committed
from s3commit_sdk.partitions import column_type, infer_type, typed_value, unescape

COMMITTERS = ("directory", "partitioned", "magic")
SCHEMA = "id int, city string, day date, amount double"


def sample(spark, n: int = 60, partitions: int = 3, day0: int = 1):
    rows = [
        (i, ["Zürich", "a=b", "x/y", None][i % 4], dt.date(2026, 11, day0 + i % 3), i * 0.5)
        for i in range(n)
    ]
    return spark.createDataFrame(rows, SCHEMA).repartition(partitions)


def rows(df) -> list[tuple]:
    return rows_of(pa.Table.from_pylist([r.asDict() for r in df.collect()]))


class Native:
    """``df.write`` / ``spark.read`` with format s3commit on the test's S3 server.

    Spark runs the data source in Python workers its JVM started with the environment of the
    moment: the endpoint of a server started later reaches them as options.
    """

    def __init__(self, spark, s3_server) -> None:
        self.spark = spark
        env = s3_server.env
        self.options = {
            "endpoint": s3_server.endpoint,
            "access.key": env["AWS_ACCESS_KEY_ID"],
            "secret.key": env["AWS_SECRET_ACCESS_KEY"],
        }

    def save(self, df, url: str, mode: str = "append", **options: str) -> None:
        writer = df.write.format("s3commit").mode(mode)
        for key, value in {**self.options, **options}.items():
            writer = writer.option(key, value)
        writer.save(url)

    def load(self, url: str, schema: str | None = None, **options: str):
        reader = self.spark.read.format("s3commit")
        if schema:
            reader = reader.schema(schema)
        for key, value in {**self.options, **options}.items():
            reader = reader.option(key, value)
        return reader.load(url)


@pytest.fixture
def native(spark, s3_server):
    register(spark)
    return Native(spark, s3_server)


@pytest.mark.parametrize("committer", COMMITTERS)
def test_each_committer_writes_and_reads_back(native, s3_server, s3, dest, committer):
    df = sample(native.spark)
    native.save(df, dest.url, committer=committer, partition_by="day")
    assert read_back(s3_server, dest.prefix) == rows(df)
    result = read_result(dest.url)
    assert (result.committer, result.rows, result.destination) == (committer, 60, dest.url)
    data_keys = [k for k in visible_keys(s3, dest.dir) if not k.endswith("/_SUCCESS")]
    assert sorted(f.key for f in result.files) == data_keys
    assert result.phases["job_setup"] > 0 and result.phases["tasks"] > 0
    back = native.load(dest.url)
    assert back.schema.simpleString() == "struct<id:int,city:string,amount:double,day:date>"
    assert rows(back) == rows(df)
    assert list_keys(s3, dest.dir + "__s3commit/") == []


def test_append_adds_and_overwrite_of_one_partition_keeps_the_others(native, s3, dest):
    first = sample(native.spark, 60, day0=1)  # days 1, 2, 3
    native.save(first, dest.url, partition_by="day")
    native.save(
        sample(native.spark, 30, day0=1), dest.url, partition_by="day"
    )  # append: days 1-3 again
    assert native.load(dest.url).count() == 90
    kept = {k for k in visible_keys(s3, dest.dir) if "day=2026-11-01" not in k}
    fresh = sample(native.spark, 9, day0=1).filter("day = date'2026-11-01'")
    native.save(fresh, dest.url, mode="overwrite", partition_by="day")  # replaces day 1 only
    after = set(visible_keys(s3, dest.dir))
    assert kept <= after
    back = native.load(dest.url)
    assert back.filter("day = date'2026-11-01'").count() == 3
    assert back.count() == 3 + 60  # days 2 and 3 of both appends stay


def test_overwrite_with_the_directory_committer_replaces_everything(native, s3, dest):
    native.save(sample(native.spark, 60), dest.url, committer="directory", partition_by="day")
    small = sample(native.spark, 4, partitions=1)
    native.save(small, dest.url, mode="overwrite", committer="directory")
    assert rows(native.load(dest.url)) == rows(small)
    assert all("day=" not in k for k in visible_keys(s3, dest.dir))


def test_explicit_conflict_mode_wins_over_the_save_mode(native, s3, dest):
    native.save(sample(native.spark, 6), dest.url, committer="directory")
    before = list_keys(s3, dest.dir)
    with pytest.raises(PySparkException, match="ConflictError"):
        native.save(
            sample(native.spark, 6),
            dest.url,
            "overwrite",
            committer="directory",
            conflict_mode="fail",
        )
    assert list_keys(s3, dest.dir) == before


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"committer": "nope"}, "unknown committer"),
        ({"partitionBy": "day"}, "UnknownOptionError"),
        ({"partition_by": "missing"}, "not in the data"),
        ({"format": "avro"}, "unknown format"),
        ({"multipart.size": "1M"}, "at least 5 MiB"),
        ({"conflict_mode": "sometimes"}, "unknown conflict_mode"),
    ],
)
def test_bad_options_fail_before_any_upload(native, s3, dest, options, words):
    with pytest.raises(PySparkException, match=words):
        native.save(sample(native.spark, 6), dest.url, **options)
    assert list_keys(s3, dest.dir) == []


def test_a_failing_task_leaves_nothing_visible_or_pending(native, s3, dest):
    s3.put_object(Bucket=BUCKET, Key=dest.dir + "day=2026-11-01/existing.parquet", Body=b"x")

    def fail_in_partition_2(value):
        from pyspark import TaskContext

        if TaskContext.get().partitionId() == 2:
            time.sleep(1.0)  # the other tasks have uploaded by then
            raise RuntimeError("injected failure")
        return value

    bad = sample(native.spark).withColumn("id", F.udf(fail_in_partition_2, IntegerType())("id"))
    with pytest.raises(PySparkException, match="injected failure"):
        native.save(bad, dest.url, "overwrite", committer="magic", partition_by="day")
    assert visible_keys(s3, dest.dir) == [dest.dir + "day=2026-11-01/existing.parquet"]
    assert list_keys(s3, dest.dir + "__s3commit/") == []
    assert [k for k in list_keys(s3, dest.dir) if "__magic" in k] == []
    assert pending_uploads(s3, dest.dir) == []


def test_write_committed_takes_a_credentials_provider(spark, s3_server, dest, tmp_path):
    def provider():
        (tmp_path / str(os.getpid())).touch()  # which processes built a store with it
        return {"access_key": "sandbox", "secret_key": "sandbox"}

    df = sample(spark, 12)
    result = write_committed(df, dest.url, credentials_provider=provider, progress=False)
    assert result.rows == 12
    assert read_back(s3_server, dest.prefix) == rows(df)
    callers = {int(p.name) for p in tmp_path.iterdir()}
    assert os.getpid() in callers and len(callers) >= 2  # the driver and the tasks' workers


def test_a_credentials_provider_that_cannot_be_imported_fails_before_any_upload(spark, s3, dest):
    with pytest.raises(InvalidArgumentError, match="cannot be imported"):
        write_committed(sample(spark, 6), dest.url, credentials_provider="no_such_module:f")
    assert list_keys(s3, dest.dir) == []


# -- the reader -------------------------------------------------------------------------------
AWKWARD = [  # (column, raw directory values of two files): every inference branch of Spark's
    ("i", ["1", "-7"]),
    ("l", ["2147483648", "3"]),
    ("big", ["12345678901234567890", "1"]),
    ("dbl", ["1.5", "2"]),
    ("ts", ["2026-11-01 10%3A00%3A00", "2026-11-02 00%3A00%3A00.5"]),
    ("d", ["2026-11-01", "2026-11-03"]),
    ("mixed", ["2026-11-01", "2026-11-01 10%3A00%3A00"]),
    ("s", ["x%2Fy", "007"]),
    ("n", ["__HIVE_DEFAULT_PARTITION__", "__HIVE_DEFAULT_PARTITION__"]),
]


def put_parquet(s3, key: str, table: pa.Table, **kwargs) -> None:
    sink = io.BytesIO()
    pq.write_table(table, sink, **kwargs)
    s3.put_object(Bucket=BUCKET, Key=key, Body=sink.getvalue())


def test_partition_discovery_matches_spark_own_reader(native, s3, dest, tmp_path):
    for file in range(2):
        directory = "/".join(f"{name}={values[file]}" for name, values in AWKWARD)
        put_parquet(s3, f"{dest.dir}{directory}/part-{file}.parquet", pa.table({"v": [file]}))
    s3.put_object(Bucket=BUCKET, Key=dest.dir + "_SUCCESS", Body=b"{}")
    s3.put_object(Bucket=BUCKET, Key=dest.dir + ".hidden/x.parquet", Body=b"junk")
    spark_own = native.spark.read.parquet(download(s3, dest.prefix, tmp_path / "copy"))
    ours = native.load(dest.url)
    assert ours.schema.simpleString() == spark_own.schema.simpleString()
    assert sorted(map(tuple, ours.collect())) == sorted(map(tuple, spark_own.collect()))


def test_inference_of_single_values():
    assert [infer_type(v) for v in ["007", "1e3", " 1.5", "NaN", "1.0"]] == [
        pa.int32(),
        pa.decimal128(4, 0),
        pa.float64(),
        pa.float64(),
        pa.float64(),
    ]
    assert column_type([None, None]) == pa.null()
    assert column_type(["1", "x"]) == pa.string()
    assert unescape("a%3Db%2F%zz") == "a=b/%zz"
    assert typed_value("2026-11-01 10:00:00", pa.timestamp("us", "UTC"), "Europe/Zurich") == (
        dt.datetime(2026, 11, 1, 9, tzinfo=dt.timezone.utc)
    )


@pytest.mark.parametrize("pushdown", ["false", "true"])
def test_partition_filters_read_only_matching_partitions(native, s3, dest, pushdown):
    df = sample(native.spark, 60)
    native.save(df, dest.url, committer="partitioned", partition_by="day,city")
    native.spark.conf.set("spark.sql.python.filterPushdown.enabled", pushdown)
    try:
        back = native.load(dest.url).filter("day = date'2026-11-02' AND city IN ('x/y', 'a=b')")
        expected = df.filter("day = date'2026-11-02' AND city IN ('x/y', 'a=b')")
        assert rows(back) == rows(expected)
        visible = [k for k in visible_keys(s3, dest.dir) if not k.endswith("/_SUCCESS")]
        matching = [
            k
            for k in visible
            if "/day=2026-11-02/" in k and ("/city=x%2Fy/" in k or "/city=a%3Db/" in k)
        ]
        assert 0 < len(matching) < len(visible)
        scanned = back.rdd.getNumPartitions()
        assert scanned == (len(matching) if pushdown == "true" else len(visible))
    finally:
        native.spark.conf.unset("spark.sql.python.filterPushdown.enabled")


def test_large_parquet_files_split_by_row_group_and_columns_are_chosen(native, s3, dest):
    n = 3000
    payload = pa.array([i.to_bytes(4, "big") * 1000 for i in range(n)], pa.binary())
    table = pa.table({"id": pa.array(range(n), pa.int64()), "blob": payload})
    put_parquet(  # 12 MiB in 6 row groups: read by ranges, in two splits of 5 MiB or more
        s3,
        dest.dir + "k=1/big.parquet",
        table,
        row_group_size=500,
        compression="none",
        use_dictionary=False,
    )
    back = native.load(dest.url, maxPartitionBytes="5M")
    assert back.rdd.getNumPartitions() >= 2
    assert back.count() == n
    only = native.load(dest.url, schema="id long, k int")
    assert sorted(r.id for r in only.collect()) == list(range(n))
    assert {r.k for r in only.collect()} == {1}


@pytest.mark.parametrize("fmt", ["orc", "csv", "json"])
def test_text_and_orc_formats_read_back_with_a_schema(native, dest, fmt):
    df = sample(native.spark, 30)
    native.save(df, dest.url, committer="magic", partition_by="day", format=fmt)
    back = native.load(dest.url, schema=SCHEMA, format=fmt)
    assert rows(back) == rows(df)
