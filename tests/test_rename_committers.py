"""The manifest committer and the classic FileOutputCommitter (v1, v2) on rename-capable stores,
and the classic committer on S3, where each rename is a COPY plus a DELETE."""

from __future__ import annotations

import inspect
import math
import os
import uuid

import fsspec
import pandas as pd
import pyarrow.dataset as ds
import pytest
from conftest import BUCKET, list_keys, read_back, rows_of

from s3commit_sdk import CommitError, ConflictError, StoreError, TaskFailedError, write_committed
from s3commit_sdk.committers.rename_base import RenameCommitter
from s3commit_sdk.store.rename import LocalStore, RenameStore
from s3commit_sdk.testing.faulty_store import FaultPlan, FaultyStore, faulty_rename_store

VARIANTS = [
    ("manifest", {}),
    ("file", {"algorithm.version": 1}),
    ("file", {"algorithm.version": 2}),
]
IDS = ["manifest", "file-v1", "file-v2"]


def frame(days: dict[str, int], start: int = 0) -> pd.DataFrame:
    rows, n = [], start
    for day, count in days.items():
        for _ in range(count):
            rows.append((n, f"name {n}", day))
            n += 1
    return pd.DataFrame(rows, columns=["id", "name", "day"])


def as_rows(df: pd.DataFrame) -> list[tuple]:
    return sorted(tuple(str(v) for v in r) for r in df[sorted(df.columns)].itertuples(index=False))


@pytest.fixture(params=["file", "memory"])
def target(request, tmp_path):
    """A destination URL and a pyarrow-readable (filesystem, path) for it."""
    if request.param == "file":
        root = str(tmp_path / "out dir")
        yield f"file://{root}", None, root
    else:
        root = f"/s3commit-tests/{uuid.uuid4().hex}"
        yield f"memory://{root}", fsspec.filesystem("memory"), root
        fsspec.filesystem("memory").rm(root, recursive=True)


def read(fs, root) -> list[tuple]:
    return rows_of(ds.dataset(root, filesystem=fs, partitioning="hive").to_table())


def temporary_left(fs, root) -> bool:
    fs = fs or fsspec.filesystem("file")
    return fs.exists(f"{root}/_temporary")


@pytest.mark.parametrize(("committer", "options"), VARIANTS, ids=IDS)
def test_read_back_in_process(target, committer, options):
    url, fs, root = target
    data = frame({"d1": 30, "d 2": 20})
    result = write_committed(
        data, url, committer=committer, partition_by=["day"], options={**options, "tasks": 3}
    )
    assert read(fs, root) == as_rows(data)
    assert result.rows == 50 and not temporary_left(fs, root)
    assert all(f.path.startswith(url.split("://")[0] + "://") for f in result.files)
    success = (fs or fsspec.filesystem("file")).cat_file(f"{root}/_SUCCESS")
    assert (success == b"") == (committer == "file")  # classic: Hadoop's 0-byte marker


@pytest.mark.parametrize(("committer", "options"), VARIANTS, ids=IDS)
def test_spark_on_file_with_a_task_failing_its_first_attempt(spark, tmp_path, committer, options):
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType

    def flaky(value):
        from pyspark import TaskContext

        ctx = TaskContext.get()
        if ctx.partitionId() == 1 and ctx.attemptNumber() == 0:
            raise RuntimeError("first attempt fails")
        return value

    df = spark.range(0, 300, numPartitions=3).withColumn("day", F.col("id") % 3)
    root = str(tmp_path / "spark")
    result = write_committed(
        df.withColumn("id", F.udf(flaky, LongType())("id")),
        f"file://{root}",
        committer=committer,
        partition_by=["day"],
        options=options,
    )
    assert result.rows == 300
    assert read(None, root) == sorted((str(i % 3), str(i)) for i in range(300))
    assert not temporary_left(None, root)


def test_spark_rejects_memory_destinations(spark):
    with pytest.raises(ValueError, match="memory://"):
        write_committed(spark.range(3), "memory://x/y", committer="manifest")


def test_s3_committers_need_s3(tmp_path):
    with pytest.raises(ValueError, match="s3://"):
        write_committed(frame({"a": 1}), f"file://{tmp_path}", committer="magic")


def test_manifest_partition_conflict_modes(target):
    url, fs, root = target
    first, second = frame({"d1": 10, "d2": 10}), frame({"d2": 5, "d3": 5}, 100)
    write_committed(first, url, committer="manifest", partition_by=["day"])
    with pytest.raises(ConflictError, match="day=d2"):
        write_committed(second, url, committer="manifest", partition_by=["day"])
    assert read(fs, root) == as_rows(first) and not temporary_left(fs, root)
    write_committed(
        second, url, committer="manifest", partition_by=["day"], conflict_mode="replace"
    )
    assert read(fs, root) == as_rows(pd.concat([first[first.day == "d1"], second]))
    write_committed(first, url, committer="manifest", partition_by=["day"], conflict_mode="append")
    expected = pd.concat([first[first.day == "d1"], second, first])
    assert read(fs, root) == as_rows(expected)


def test_injected_rename_failure_names_what_became_visible(tmp_path):
    root = f"/s3commit-tests/{uuid.uuid4().hex}"
    url = f"memory://{root}"
    # 3 tasks save 3 manifests (renames 1-3); the job's 2nd file rename fails
    with (
        faulty_rename_store(FaultPlan(fail_rename_at={5})),
        pytest.raises(CommitError, match="2 of 4 renames had started") as info,
    ):
        write_committed(
            frame({"d1": 9, "d2": 9}),
            url,
            committer="manifest",
            partition_by=["day"],
            options={"tasks": 3, "threads": 1},
        )
    fs = fsspec.filesystem("memory")
    # the one file that had become visible was removed again, and the error says so
    assert [p for p in fs.find(root) if "_temporary" not in p] == []
    assert "nothing of it is visible" in str(info.value)
    assert not fs.exists(f"{root}/_temporary")
    fs.rm(root, recursive=True)


@pytest.mark.parametrize("version", [1, 2])
def test_classic_replace_replaces_the_old_data(target, version):
    """v2 merges at task commit, so the old files go at job commit, never before."""
    url, fs, root = target
    options = {"algorithm.version": version}
    write_committed(frame({"d1": 20}), url, committer="file", options=options)
    second = frame({"d2": 4}, 100)
    result = write_committed(
        second, url, committer="file", options=options, conflict_mode="replace"
    )
    assert read(fs, root) == as_rows(second) and result.success["replacedObjects"] >= 1
    assert not temporary_left(fs, root)


def test_classic_v1_rename_failure_at_job_commit_aborts(target):
    """One merge for every task: a failed rename undoes all of them and the job is aborted."""
    url, fs, root = target
    old = frame({"d1": 5}, 100)
    write_committed(old, url, committer="file")
    # 3 tasks rename their attempt directory (renames 1-3); the job's 2nd merge rename fails
    with (
        faulty_rename_store(FaultPlan(fail_rename_at={5})),
        pytest.raises(CommitError, match="2 of 3 renames had started") as info,
    ):
        write_committed(
            frame({"d1": 9}),
            url,
            committer="file",
            conflict_mode="replace",
            options={"tasks": 3, "threads": 1},
        )
    assert "nothing of it is visible" in str(info.value)
    assert read(fs, root) == as_rows(old) and not temporary_left(fs, root)


@pytest.mark.parametrize(("committer", "options"), VARIANTS, ids=IDS)
def test_any_job_commit_failure_aborts(target, monkeypatch, committer, options):
    """A failure in a job-commit step without its own guard (here: writing _SUCCESS)."""
    url, fs, root = target

    def failing(self, *args, **kwargs):
        raise StoreError("injected failure finishing the job")

    monkeypatch.setattr(RenameCommitter, "finish", failing)
    with pytest.raises(StoreError, match="injected"):
        write_committed(frame({"d1": 9}), url, committer=committer, options={**options, "tasks": 3})
    assert not temporary_left(fs, root)


def test_interrupt_during_job_commit_renames_rolls_back(tmp_path, monkeypatch):
    """v1 on file://: task commit renames directories, job commit renames files."""
    root = tmp_path / "out"
    real, renamed = LocalStore.rename, []

    def rename(self, source, target):
        renamed.append(target)
        if len(renamed) == 2:
            raise KeyboardInterrupt
        real(self, source, target)

    monkeypatch.setattr(LocalStore, "rename", rename)
    with pytest.raises(KeyboardInterrupt) as info:
        write_committed(frame({"d1": 9}), f"file://{root}", committer="file", options={"tasks": 3})
    assert "nothing of it is visible" in "\n".join(info.value.__notes__)
    assert [p for p in root.rglob("*") if p.is_file()] == []
    assert not temporary_left(None, str(root))


def test_manifest_load_failure_makes_nothing_visible():
    root = f"/s3commit-tests/{uuid.uuid4().hex}"
    url = f"memory://{root}"
    with (
        faulty_rename_store(FaultPlan(fail_read_containing="task_00001")),
        pytest.raises(CommitError, match="loading the task manifests failed"),
    ):
        write_committed(frame({"d1": 9}), url, committer="manifest", options={"tasks": 3})
    fs = fsspec.filesystem("memory")
    assert not fs.exists(root) or fs.find(root) == []


def recording(reached: list[str], name: str, real):
    def call(*args):
        reached.append(name)
        return real(*args)

    return call


def test_the_faulty_store_forwards_every_store_operation(tmp_path):
    """Wrapped, a store must act as itself: each operation of the interface reaches the wrapped
    store's own, never the interface's default (which would bypass what the store does)."""
    operations = {n for n, _ in inspect.getmembers(RenameStore, inspect.isfunction) if n[0] != "_"}
    inner, reached = LocalStore(), []
    for name in operations:
        setattr(inner, name, recording(reached, name, getattr(inner, name)))
    source, target = tmp_path / "source", tmp_path / "target"
    (source / "d").mkdir(parents=True)
    (source / "d" / "f").write_bytes(b"1")
    calls = {
        "open_write": (f"{tmp_path}/w/opened",),
        "read_bytes": (f"{source}/d/f",),
        "write_bytes": (f"{tmp_path}/w/written", b"2"),
        "rename": (f"{tmp_path}/w/written", f"{tmp_path}/w/renamed"),
        "rename_dir": (f"{source}/d", f"{target}/d"),
        "mkdirs": (f"{tmp_path}/m",),
        "delete": (f"{tmp_path}/m",),
        "list_files": (str(target),),
        "exists": (str(target),),
        "etag": (f"{target}/d/f",),
        "count": ("list",),
    }
    assert set(calls) == operations  # a new operation needs a line here and in FaultyStore
    faulty = FaultyStore(inner, FaultPlan())
    for name, args in calls.items():
        reached.clear()
        result = getattr(faulty, name)(*args)
        if name == "open_write":
            result.close()
        assert reached[:1] == [name], f"FaultyStore.{name} does not reach the wrapped store's"
    assert faulty.plan.renames == 2  # rename_dir counts as one rename of the plan
    assert [p for p, _ in inner.list_files(str(target))] == [f"{target}/d/f"]


@pytest.mark.parametrize(("committer", "options"), VARIANTS, ids=IDS)
def test_nothing_of_temporary_remains_after_abort(spark, tmp_path, committer, options):
    from pyspark.sql import functions as F

    root = str(tmp_path / "aborted")
    df = spark.range(0, 30, numPartitions=3).withColumn(
        "x", F.expr("raise_error('boom')").cast("string")
    )
    with pytest.raises(TaskFailedError):
        write_committed(df, f"file://{root}", committer=committer, options=options)
    assert not os.path.exists(f"{root}/_temporary")


def test_classic_v1_on_s3_copies_and_deletes_every_file(s3, s3_server, dest):
    data = frame({"d1": 20, "d2": 40, "d3": 20})  # two tasks, two partitions each
    with pytest.warns(UserWarning, match="neither safe nor fast"):
        result = write_committed(
            data, dest.url, committer="file", partition_by=["day"], options={"tasks": 2}
        )
    files = len(result.files)
    assert files == 4 and read_back(s3_server, dest.prefix) == as_rows(data)
    assert [k for k in list_keys(s3, dest.dir) if "_temporary" in k] == []
    requests = result.requests
    # every file: 1 PUT by its task, then renamed twice (task commit, job commit) = COPY + DELETE
    assert requests["CopyObject"] == 2 * files
    renames_and_cleanup = requests["DeleteObjects"]
    assert renames_and_cleanup >= 2 * files
    assert requests["PutObject"] == files + 1  # the data, then the 0-byte _SUCCESS
    assert "CreateMultipartUpload" not in requests
    head = s3.head_object(Bucket=BUCKET, Key=dest.dir + "_SUCCESS")
    assert head["ContentLength"] == 0


def test_classic_v2_on_s3_copies_once(s3, s3_server, dest):
    data = frame({"d1": 40})
    with pytest.warns(UserWarning):
        result = write_committed(
            data, dest.url, committer="file", options={"tasks": 2, "algorithm.version": 2}
        )
    assert result.requests["CopyObject"] == len(result.files) == 2
    assert read_back(s3_server, dest.prefix) == as_rows(data)
    assert math.isclose(result.bytes, sum(f.size for f in result.files))
