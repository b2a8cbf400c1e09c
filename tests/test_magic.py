"""The magic committer: delayed-completion streams, per-job magic trees, conflict modes."""

from __future__ import annotations

import gc
import logging
import os
import threading
import time

import pandas as pd
import pyarrow as pa
import pytest
from conftest import BUCKET, list_keys, pending_uploads, read_back, visible_keys
from pyspark.sql import functions as F
from pyspark.sql.types import LongType

from s3commit_sdk import (
    ConflictError,
    InvalidArgumentError,
    StoreError,
    options,
    write_committed,
)
from s3commit_sdk.committers import make_committer
from s3commit_sdk.committers.magic import DelayedCompletionStream, PartQueue, magic_to_final
from s3commit_sdk.options import part_size_for, resolve_options
from s3commit_sdk.paths import parse_s3_url
from s3commit_sdk.protocol import JobContext
from s3commit_sdk.runner import execute_task
from s3commit_sdk.store import S3Settings, S3Store
from s3commit_sdk.testing.faultproxy import internal_error

FIVE_MIB = 5 * 1024 * 1024


def frame(n: int, start: int = 0) -> pd.DataFrame:
    return pd.DataFrame({"id": range(start, start + n), "name": [f"n{i}" for i in range(n)]})


def as_rows(df: pd.DataFrame) -> list[tuple]:
    return sorted(tuple(str(v) for v in r) for r in df[sorted(df.columns)].itertuples(index=False))


def magic_keys(s3, dest) -> list[str]:
    return [k for k in list_keys(s3, dest.dir) if "/__magic/" in k]


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("append", lambda a, b: pd.concat([a, b])),
        ("replace", lambda a, b: b),
    ],
)
def test_directory_semantics_without_partitions(s3, s3_server, dest, mode, expected):
    first, second = frame(40), frame(25, 1000)
    write_committed(first, dest.url, committer="magic", conflict_mode=mode)
    result = write_committed(second, dest.url, committer="magic", conflict_mode=mode)
    assert read_back(s3_server, dest.prefix) == as_rows(expected(first, second))
    assert result.success["committer"] == "magic"
    assert result.success["bytes"] == sum(f.size for f in result.files) > 0
    assert magic_keys(s3, dest) == []


def test_fail_without_partitions_raises_at_job_setup(s3, dest):
    write_committed(frame(10), dest.url, committer="magic", conflict_mode="fail")
    before = visible_keys(s3, dest.dir)
    with pytest.raises(ConflictError, match="already holds data"):
        write_committed(frame(10, 100), dest.url, committer="magic", conflict_mode="fail")
    assert visible_keys(s3, dest.dir) == before and magic_keys(s3, dest) == []


def test_large_file_streams_in_parts_byte_identical_to_staging(s3, dest):
    """A ~17 MiB file goes up as 4 parts of 5 MiB; its bytes equal the staging committer's."""
    blobs = pa.table({"blob": [os.urandom(1024 * 1024) for _ in range(17)]})
    options = {"multipart.size": "5M", "tasks": 1}
    magic = write_committed(blobs, dest.url + "/magic", committer="magic", options=options)
    staged = write_committed(blobs, dest.url + "/staged", committer="directory", options=options)
    (m,), (d,) = magic.files, staged.files
    assert m.size > 3 * FIVE_MIB and m.size == d.size
    assert s3.head_object(Bucket=BUCKET, Key=m.key)["ETag"].endswith('-4"')
    body = s3.get_object(Bucket=BUCKET, Key=m.key)["Body"].read()
    assert body == s3.get_object(Bucket=BUCKET, Key=d.key)["Body"].read()
    assert len(body) == m.size


def _job(dest_url: str, **options) -> JobContext:
    return JobContext.on_s3(dest_url, "magic", {"multipart.size": "5M", **options})


@pytest.mark.fault
def test_writer_raising_mid_file_leaves_no_pending_upload(s3, dest):
    """The task fails after two parts were uploaded: its stream aborts its own upload."""
    job = _job(dest.url)
    driver = make_committer(job)
    driver.setup_job()

    def batches():
        for _ in range(12):
            yield pa.record_batch({"blob": [os.urandom(1024 * 1024)]})
        raise RuntimeError("writer failed mid-file")

    uploads_seen = []

    def watching():  # observe the upload while it is still open, through the real server
        for i, batch in enumerate(batches()):
            if i == 11:
                uploads_seen.extend(pending_uploads(s3, dest.dir))
            yield batch

    with pytest.raises(RuntimeError, match="mid-file"):
        execute_task(job, partition=0, attempt=0, batches=watching())
    assert len(uploads_seen) == 1  # the upload really was in progress
    assert pending_uploads(s3, dest.dir) == []
    assert visible_keys(s3, dest.dir) == []
    driver.abort_job([])
    assert list_keys(s3, dest.dir) == []


def test_magic_to_final_applies_the_base_rule():
    location = parse_s3_url("s3://b/out/ds1")
    magic = "out/ds1/__magic/job-1/task_00000_0/__base/day=1/part-0.parquet"
    assert magic_to_final(location, magic) == "out/ds1/day=1/part-0.parquet"
    with pytest.raises(ValueError):
        magic_to_final(location, "out/ds10/__magic/job-1/t/__base/x")


def test_only_pendingsets_live_in_the_job_tree(s3, dest):
    """No ``.pending`` per file: the attempt keeps its uploads in memory until task commit."""
    result = write_committed(
        frame(30), dest.url, committer="magic", options={"magic.cleanup": "false", "tasks": 2}
    )
    assert len(result.files) == 2
    tree = magic_keys(s3, dest)
    prefix = f"{dest.dir}__magic/job-{result.job_id}/"
    assert sorted(tree) == [prefix + "task_00000.pendingset", prefix + "task_00001.pendingset"]
    s3.delete_objects(Bucket=BUCKET, Delete={"Objects": [{"Key": k} for k in tree]})


@pytest.mark.fault
def test_concurrent_jobs_keep_their_magic_trees_apart(s3, s3_server, dest):
    """Three jobs at once, on sibling destinations of one bucket: none touches another's."""
    targets = [dest.url + "/ds1", dest.url + "/ds10", dest.url + "/other"]
    frames = [frame(50, 0), frame(50, 1000), frame(50, 2000)]
    results, errors = [None] * 3, []

    def run(i: int) -> None:
        try:
            results[i] = write_committed(
                frames[i],
                targets[i],
                committer="magic",
                conflict_mode="append",
                options={"tasks": 3},
            )
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    for target, data in zip(["ds1", "ds10", "other"], frames, strict=True):
        assert read_back(s3_server, f"{dest.prefix}/{target}") == as_rows(data)
    assert magic_keys(s3, dest) == []


@pytest.mark.fault
def test_spark_task_failing_first_attempt_is_exactly_once(spark, s3_server, dest):
    df = spark.range(0, 300, numPartitions=3).withColumn("name", F.concat(F.lit("n"), "id"))

    def flaky(value):
        from pyspark import TaskContext

        ctx = TaskContext.get()
        if ctx.partitionId() == 1 and ctx.attemptNumber() == 0:
            raise RuntimeError("first attempt fails")
        return value

    flaky_df = df.withColumn("id", F.udf(flaky, LongType())("id"))
    result = write_committed(flaky_df, dest.url, committer="magic")
    assert result.rows == 300
    expected = sorted((str(i), f"n{i}") for i in range(300))
    assert read_back(s3_server, dest.prefix) == expected


def test_nothing_visible_while_the_job_runs(spark, s3, s3_server, dest, tmp_path):
    """The last task blocks until the test has seen uploads in progress and no data object."""
    release = tmp_path / "release"
    df = spark.range(0, 400, numPartitions=4)

    def gate(value):
        from pyspark import TaskContext

        if TaskContext.get().partitionId() == 3:
            deadline = time.time() + 60
            while not os.path.exists(str(release)) and time.time() < deadline:
                time.sleep(0.05)
        return value

    gated = df.withColumn("id", F.udf(gate, LongType())("id"))
    outcome = {}
    job = threading.Thread(
        target=lambda: outcome.setdefault("r", write_committed(gated, dest.url, committer="magic"))
    )
    job.start()
    try:
        deadline = time.time() + 60
        seen = []
        while time.time() < deadline and len(seen) < 3:
            seen = pending_uploads(s3, dest.dir)
            time.sleep(0.1)
        assert len(seen) >= 3  # three tasks have uploaded their files, uncompleted
        assert visible_keys(s3, dest.dir) == []
    finally:
        release.touch()
        job.join(120)
    assert outcome["r"].rows == 400
    assert read_back(s3_server, dest.prefix) == sorted((str(i),) for i in range(400))


@pytest.mark.parametrize("committer", ["magic", "directory"])
def test_record_batch_reader_streams_through_one_task(s3_server, dest, committer):
    batches = [pa.record_batch({"id": list(range(i, i + 10))}) for i in range(0, 50, 10)]
    reader = pa.RecordBatchReader.from_batches(batches[0].schema, iter(batches))
    result = write_committed(reader, dest.url, committer=committer)
    assert [f.rows for f in result.files] == [50]
    assert read_back(s3_server, dest.prefix) == sorted((str(i),) for i in range(50))


@pytest.mark.timeout(60)
@pytest.mark.fault
def test_failed_part_upload_and_failed_abort_do_not_deadlock(proxy, s3, dest):
    """The first part upload and the first upload abort fail, retries off: the task fails
    typed, its other streams are aborted all the same, and no stream waits for a part that no
    worker will run (the task's frames are collected with the error, as in a real driver)."""
    days = ["d1", "d2", "d3"]
    job = JobContext.on_s3(
        dest.url,
        "magic",
        {"endpoint": proxy.endpoint, "retry.max-attempts": 1},
        partition_by=("day",),
    )
    driver = make_committer(job)
    driver.setup_job()
    table = pa.table({"id": range(30), "day": days * 10})
    proxy.set_rules(
        [
            internal_error("UploadPart", occurrences=[1]),  # the first file's only part
            internal_error("AbortMultipartUpload", occurrences=[1]),
        ]
    )
    # The task's frames outlive the error in reference cycles; in a driver the cyclic GC later
    # frees them, thread pool and streams together. Do that here on a watched thread: a stream
    # left open would wait in its finalizer for a part that the pool's exited workers never run.
    # Logging is off meanwhile, since pytest's log capture would keep the frames alive.
    gc.disable()
    logging.disable(logging.CRITICAL)
    try:
        with pytest.raises(StoreError, match="InternalError"):
            execute_task(job, partition=0, attempt=0, batches=table.to_batches())
        collector = threading.Thread(target=gc.collect, daemon=True)
        collector.start()
        collector.join(30)
    finally:
        logging.disable(logging.NOTSET)
        gc.enable()
    assert not collector.is_alive(), "a stream finalizer is stuck waiting for an upload part"
    assert proxy.counts["CreateMultipartUpload"] == len(days)
    assert proxy.counts["AbortMultipartUpload"] == len(days)  # every stream, the failed one too
    assert len(pending_uploads(s3, dest.dir)) == 1  # only the upload whose abort failed
    driver.abort_job([])
    assert pending_uploads(s3, dest.dir) == []
    assert list_keys(s3, dest.dir) == []


def test_streams_sharing_reused_part_buffers_upload_exactly_what_was_written(s3_server, s3, dest):
    """Two streams of one task share a queue whose part buffers are reused, written in chunks
    that straddle part boundaries: each completed object holds exactly its own bytes."""
    store = S3Store(S3Settings.resolve(resolve_options({"endpoint": s3_server.endpoint})))
    parts = PartQueue(FIVE_MIB, 2)
    sources = {dest.dir + name: os.urandom(3 * FIVE_MIB + 12345) for name in ("a.bin", "b.bin")}
    streams = {key: DelayedCompletionStream(store, BUCKET, key, parts) for key in sources}
    chunk = 3 * 1024 * 1024 + 7
    for offset in range(0, 3 * FIVE_MIB + 12345, chunk):
        for key, stream in streams.items():
            stream.write(sources[key][offset : offset + chunk])
    try:
        for key, stream in streams.items():
            stream.close()
            assert len(stream.etags) == 4
            store.complete(BUCKET, key, stream.upload_id, stream.etags)
    finally:
        parts.shutdown()
    for key, data in sources.items():
        assert s3.get_object(Bucket=BUCKET, Key=key)["Body"].read() == data
    assert pending_uploads(s3, dest.dir) == []


@pytest.mark.timeout(60)
@pytest.mark.fault
def test_stream_dropped_open_on_its_pool_worker_waits_for_nothing(proxy, s3, dest):
    """The last reference to an open stream dies on its pool's only worker, as when the cyclic
    GC runs there: its finalizer must neither upload a part nor wait for that very worker."""
    options = resolve_options({"endpoint": proxy.endpoint, "retry.max-attempts": 1})
    store = S3Store(S3Settings.resolve(options))
    parts = PartQueue(FIVE_MIB, 1)
    key = dest.dir + "dropped.bin"
    held = [DelayedCompletionStream(store, BUCKET, key, parts)]
    held[0].write(b"unfinished")
    upload_id = held[0].upload_id
    try:
        # FutureTimeout: the worker waits for itself
        parts.pool.submit(held.clear).result(timeout=20)
    finally:
        parts.pool.shutdown(wait=False, cancel_futures=True)
        s3.abort_multipart_upload(Bucket=BUCKET, Key=key, UploadId=upload_id)
    assert proxy.counts.get("UploadPart", 0) == 0


# -- S3's limit of 10,000 parts per upload --------------------------------------------------------
MIB = 1024 * 1024


def test_part_size_grows_to_fit_s3_part_limit_and_refuses_what_cannot():
    assert part_size_for(600 * 1024 * MIB, 64 * MIB) == 64 * MIB  # 9,600 parts
    assert part_size_for(1024 * 1024 * MIB, 64 * MIB) == 105 * MIB  # 1 TiB: 9,987 parts
    assert part_size_for(0, 5 * MIB) == 5 * MIB
    with pytest.raises(InvalidArgumentError, match="10000 parts of at most 5 GiB"):
        part_size_for(49 * 1024 * 1024 * MIB, 64 * MIB)


@pytest.fixture
def three_parts_at_most(monkeypatch):
    """S3's limit lowered to 3 parts: the same code path as 10,000 parts of 64 MiB, on 20 MiB."""
    monkeypatch.setattr(options, "MAX_PARTS", 3)
    return pa.table({"blob": [os.urandom(MIB) for _ in range(20)]})


def write_in_5m_parts(table: pa.Table, dest, committer: str):
    return write_committed(
        table,
        dest.url,
        committer=committer,
        options={"multipart.size": "5M", "tasks": 1},
        progress=False,
    )


def test_staging_raises_the_part_size_of_a_file_over_the_part_limit(s3, dest, three_parts_at_most):
    write_in_5m_parts(three_parts_at_most, dest, "directory")
    (key,) = visible_keys(s3, dest.dir)
    head = s3.head_object(Bucket=BUCKET, Key=key)
    assert head["ETag"].strip('"').endswith("-3") and head["ContentLength"] > 20 * MIB


def test_magic_stops_a_file_at_the_part_limit_and_leaves_nothing(s3, dest, three_parts_at_most):
    with pytest.raises(InvalidArgumentError, match=r"limit of 3 parts of multipart\.size=5242880"):
        write_in_5m_parts(three_parts_at_most, dest, "magic")
    assert list_keys(s3, dest.dir) == [] and pending_uploads(s3, dest.dir) == []
