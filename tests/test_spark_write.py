"""The Spark engine end to end: read-back, formats, naming, failures, awkward names."""

from __future__ import annotations

import datetime as dt
import re
import time

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.dataset as ds
import pytest
from conftest import BUCKET, download, list_keys, pending_uploads, read_back, rows_of, visible_keys
from pyspark.sql import functions as F
from pyspark.sql.types import DateType, IntegerType, StringType, StructField, StructType

from s3commit_sdk import TaskFailedError, write_committed

SCHEMA = StructType(
    [
        StructField("id", IntegerType()),
        StructField("city", StringType()),
        StructField("day", DateType()),
        StructField("note", StringType()),
    ]
)
CITIES = ["Zürich", "東京", "New York", "a=b", "x/y", "100%", None, ""]


def sample(spark, n: int = 200, partitions: int = 4):
    rows = [
        (i, CITIES[i % len(CITIES)], dt.date(2026, 11, 1 + i % 3), f"note {i}") for i in range(n)
    ]
    return spark.createDataFrame(rows, SCHEMA).repartition(partitions)


def expected_rows(df, partition_by: str | None = "city") -> list[tuple]:
    """The rows as a reader sees them: an empty partition value reads back as null."""
    rows = [r.asDict() for r in df.collect()]
    for row in rows:
        if partition_by and row[partition_by] == "":
            row[partition_by] = None
    return rows_of(pa.Table.from_pylist(rows))


def read_with_spark(spark, s3, dest, tmp_path):
    """Spark cannot reach S3 here (no hadoop-aws jars), so it reads an exact local copy."""
    local = download(s3, dest.prefix, tmp_path / "copy")
    spark.conf.set("spark.sql.sources.partitionColumnTypeInference.enabled", "false")
    try:
        return spark.read.parquet(local)
    finally:
        spark.conf.unset("spark.sql.sources.partitionColumnTypeInference.enabled")


def test_read_back_through_spark_and_pyarrow(spark, s3, s3_server, dest, tmp_path):
    df = sample(spark)
    result = write_committed(df, dest.url, partition_by=["city"], conflict_mode="fail")
    expected = expected_rows(df)
    assert result.rows == 200
    assert read_back(s3_server, dest.prefix) == expected
    back = read_with_spark(spark, s3, dest, tmp_path)
    assert sorted(back.columns) == ["city", "day", "id", "note"]
    assert rows_of(pa.Table.from_pylist([r.asDict() for r in back.collect()])) == expected
    # every committed file is listed with its real size and ETag
    for f in result.files:
        head = s3.head_object(Bucket=BUCKET, Key=f.key)
        assert (head["ContentLength"], head["ETag"]) == (f.size, f.etag)
        assert f.path == f"s3://{BUCKET}/{f.key}"
    assert sorted(f.key for f in result.files) == visible_keys(s3, dest.dir)
    assert sum(f.rows for f in result.files) == 200


def test_partition_directories_use_spark_escaping(spark, s3, dest, tmp_path):
    df = sample(spark, n=40, partitions=2)
    write_committed(df, dest.url, partition_by=["city"])
    ours = {k[len(dest.dir) :].split("/")[0] for k in visible_keys(s3, dest.dir)}
    spark_dir = tmp_path / "spark"
    df.write.partitionBy("city").parquet(str(spark_dir))
    theirs = {p.name for p in spark_dir.iterdir() if not p.name.startswith(("_", "."))}
    assert ours == theirs
    assert "city=__HIVE_DEFAULT_PARTITION__" in ours and "city=a%3Db" in ours


def test_file_names_follow_spark(spark, s3, dest):
    result = write_committed(sample(spark, 30, 2), dest.url, committer="directory")
    job = result.job_id
    for f in result.files:
        assert re.fullmatch(rf"{dest.dir}part-\d{{5}}-{job}-c000\.snappy\.parquet", f.key)
    partitioned = write_committed(
        sample(spark, 30, 2), dest.url + "/p", partition_by=["day"], conflict_mode="fail"
    )
    for f in partitioned.files:
        name = f.key.rsplit("/", 1)[1]
        assert re.fullmatch(rf"part-\d{{5}}-{partitioned.job_id}\.c000\.snappy\.parquet", name)


def test_unique_filenames_off(spark, s3, dest):
    result = write_committed(
        sample(spark, 30, 2), dest.url, options={"staging.unique-filenames": "false"}
    )
    assert all(result.job_id not in f.key for f in result.files)
    assert {f.key.rsplit("/", 1)[1] for f in result.files} == {
        "part-00000-c000.snappy.parquet",
        "part-00001-c000.snappy.parquet",
    }


def test_rolling_by_max_records_per_file(spark, s3_server, dest):
    df = sample(spark, 100, 1)
    result = write_committed(df, dest.url, options={"max_records_per_file": 30})
    names = sorted(f.key.rsplit("-", 1)[1] for f in result.files)
    assert names == [f"c00{i}.snappy.parquet" for i in range(4)]
    assert sorted(f.rows for f in result.files) == [10, 30, 30, 30]
    assert read_back(s3_server, dest.prefix) == expected_rows(df, partition_by=None)


@pytest.mark.parametrize("fmt", ["orc", "csv", "json"])
def test_other_formats_read_back(spark, s3, s3_server, dest, fmt):
    df = sample(spark, 60, 2).select("id", "city", "note")
    result = write_committed(df, dest.url, partition_by=["city"], format=fmt)
    ext = {"orc": ".snappy.orc", "csv": ".csv", "json": ".json"}[fmt]
    assert all(f.key.endswith(ext) for f in result.files)
    headerless = pacsv.ReadOptions(column_names=["id", "note"])  # as Spark's, no header line
    dataset = ds.dataset(
        f"{BUCKET}/{dest.prefix}",
        filesystem=s3_server.arrow_fs(),
        format=ds.CsvFileFormat(read_options=headerless) if fmt == "csv" else fmt,
        partitioning=ds.HivePartitioning.discover(infer_dictionary=False),
    )
    assert rows_of(dataset.to_table()) == expected_rows(df)


def test_empty_dataframe_writes_schema_only(spark, s3, s3_server, dest, tmp_path):
    empty = spark.createDataFrame([], SCHEMA)
    result = write_committed(empty, dest.url, committer="directory")
    assert result.rows == 0
    assert len(result.files) == 1  # like Spark: one file that carries the schema
    back = read_with_spark(spark, s3, dest, tmp_path)
    assert back.count() == 0 and sorted(back.columns) == ["city", "day", "id", "note"]
    assert result.success["files"][0]["rows"] == 0


def test_empty_partitioned_dataframe_writes_nothing_visible(spark, s3, dest):
    result = write_committed(spark.createDataFrame([], SCHEMA), dest.url, partition_by=["city"])
    assert result.files == [] and visible_keys(s3, dest.dir) == []
    assert result.success["rows"] == 0


def _fail_when(partition: int, attempts: tuple[int, ...], delay: float = 0.0):
    """A UDF that fails the chosen attempts of one task, after ``delay`` seconds."""

    def check(value):
        from pyspark import TaskContext

        context = TaskContext.get()
        if context.partitionId() == partition and context.attemptNumber() in attempts:
            time.sleep(delay)
            raise RuntimeError(f"injected failure in attempt {context.attemptNumber()}")
        return value

    return F.udf(check, IntegerType())


@pytest.mark.fault
def test_task_failing_first_attempt_gives_exactly_once_output(spark, s3_server, dest):
    df = sample(spark, 120, 3)
    flaky = df.withColumn("id", _fail_when(1, (0,))("id"))
    result = write_committed(flaky, dest.url, partition_by=["day"])
    assert result.rows == 120
    assert read_back(s3_server, dest.prefix) == expected_rows(df, partition_by=None)


@pytest.mark.fault
def test_task_failing_every_attempt_leaves_nothing(spark, s3, dest):
    # one existing object that must survive untouched
    s3.put_object(Bucket=BUCKET, Key=dest.dir + "day=2026-11-01/existing.parquet", Body=b"x")
    # the failing task is slow, so the other tasks have committed (uploads pending) by then
    df = sample(spark, 120, 3).withColumn("id", _fail_when(2, (0, 1, 2), delay=1.0)("id"))
    with pytest.raises(TaskFailedError, match="injected failure"):
        write_committed(df, dest.url, partition_by=["day"], conflict_mode="replace")
    assert visible_keys(s3, dest.dir) == [dest.dir + "day=2026-11-01/existing.parquet"]
    assert list_keys(s3, dest.dir + "__s3commit/") == []
    assert pending_uploads(s3, dest.dir) == []


@pytest.mark.fault
def test_sibling_prefix_uploads_survive(spark, s3, dest):
    """A pending upload under .../ds10/ is not touched by jobs on .../ds1 ("A Zero-Rename
    Committer", "Testing")."""
    sibling = s3.create_multipart_upload(Bucket=BUCKET, Key=dest.prefix + "/ds10/part-0")
    s3.put_object(Bucket=BUCKET, Key=dest.prefix + "/ds10/data.parquet", Body=b"keep")
    ds1 = f"{dest.url}/ds1"
    try:
        df = sample(spark, 40, 2)
        write_committed(df, ds1, partition_by=["day"])
        write_committed(
            df,
            ds1,
            partition_by=["day"],
            conflict_mode="replace",
            options={"abort.pending.uploads": "all"},
        )
        write_committed(df, ds1, committer="directory", conflict_mode="replace")
        uploads = pending_uploads(s3, dest.prefix + "/ds10/")
        assert [u["UploadId"] for u in uploads] == [sibling["UploadId"]]
        assert dest.prefix + "/ds10/data.parquet" in visible_keys(s3, dest.dir)
    finally:
        s3.abort_multipart_upload(
            Bucket=BUCKET, Key=dest.prefix + "/ds10/part-0", UploadId=sibling["UploadId"]
        )


def test_abort_pending_uploads_all_cleans_stale_uploads_of_the_destination(spark, s3, dest):
    stale = s3.create_multipart_upload(Bucket=BUCKET, Key=dest.dir + "old/part-0")
    write_committed(sample(spark, 20, 1), dest.url, options={"abort.pending.uploads": "all"})
    assert stale["UploadId"] not in [u["UploadId"] for u in pending_uploads(s3, dest.dir)]


def test_job_scoped_cleanup_keeps_other_jobs_uploads(spark, s3, dest):
    other = s3.create_multipart_upload(Bucket=BUCKET, Key=dest.dir + "other-job/part-0")
    try:
        write_committed(sample(spark, 20, 1), dest.url)
        assert [u["UploadId"] for u in pending_uploads(s3, dest.dir)] == [other["UploadId"]]
    finally:
        s3.abort_multipart_upload(
            Bucket=BUCKET, Key=dest.dir + "other-job/part-0", UploadId=other["UploadId"]
        )


@pytest.mark.parametrize("suffix", ["with space/ünïcödé 東京", "a=b/c d=e"])
@pytest.mark.fault
def test_awkward_destination_paths(spark, s3_server, dest, suffix):
    df = sample(spark, 40, 2)
    url = f"{dest.url}/{suffix}"
    result = write_committed(df, url, partition_by=["city"], conflict_mode="replace")
    assert result.destination == url
    prefix = f"{dest.prefix}/{suffix}"
    assert all(f.key.startswith(prefix + "/") for f in result.files)
    assert read_back(s3_server, prefix) == expected_rows(df)
    again = write_committed(df, url, partition_by=["city"], conflict_mode="replace")
    assert read_back(s3_server, prefix) == expected_rows(df)
    assert again.success["replacedObjects"] == len(result.files)


def test_spark_conf_sets_defaults_and_options_win(spark, dest):
    key = "spark.hadoop.fs.s3a.committer.staging.unique-filenames"
    spark.conf.set(key, "false")
    spark.conf.set("spark.hadoop.fs.s3a.committer.name", "magic")  # Hadoop's own key: ignored
    try:
        by_conf = write_committed(sample(spark, 20, 1), dest.url + "/a")
        by_option = write_committed(
            sample(spark, 20, 1), dest.url + "/b", options={"staging.unique-filenames": True}
        )
    finally:
        spark.conf.unset(key)
        spark.conf.unset("spark.hadoop.fs.s3a.committer.name")
    assert [f.key.rsplit("/", 1)[1] for f in by_conf.files] == ["part-00000-c000.snappy.parquet"]
    assert all(by_option.job_id in f.key for f in by_option.files)
