"""``conflict_mode="fail"`` per partition is found before the data is written, and every
``ConflictError`` says what is visible.

The partitioned committer (and magic, Delta, when partitioned) checks a partition when a task
attempt opens its first file there: a conflict stops the task before it uploads (or, for magic,
initiates an upload) for that partition, the job is aborted and the destination is unchanged.
The S3 requests are counted by the fault proxy, which sits between boto3 and the S3 server.
"""

from __future__ import annotations

import ast
import io
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest
from conftest import BUCKET, list_keys, pending_uploads

import s3commit_sdk
from s3commit_sdk import ConflictError, write_committed
from s3commit_sdk.progress import TextProgress

NOTHING_CHANGED = "Nothing changed at the destination"


def days(*names: str, rows: int = 10) -> pd.DataFrame:
    """Rows of each day in turn: a task opens the days' partitions in this order."""
    return pd.DataFrame(
        {"id": range(rows * len(names)), "day": [d for d in names for _ in range(rows)]}
    )


def snapshot(s3, prefix: str) -> dict[str, str]:
    """Every object under ``prefix``, hidden ones too, with its ETag."""
    found = {}
    for key in list_keys(s3, prefix):
        found[key] = s3.head_object(Bucket=BUCKET, Key=key)["ETag"]
    return found


def assert_refused_and_unchanged(error: ConflictError, s3, dest, before: dict[str, str]) -> None:
    assert error.visible == "nothing"
    assert error.destination == dest.url and error.job_id
    assert NOTHING_CHANGED in str(error) and "partition day=a " in str(error)
    assert snapshot(s3, dest.dir) == before  # no file, no hidden metadata, nothing replaced
    assert pending_uploads(s3, dest.dir) == []


# -- every ConflictError the SDK raises --------------------------------------------------------
def conflict_error_calls() -> list[tuple[str, int, set[str]]]:
    """Each ``ConflictError(...)`` call in the package: file, line, keywords given."""
    package = Path(s3commit_sdk.__file__).parent
    calls = []
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "ConflictError":
                keywords = {k.arg for k in node.keywords if k.arg}
                calls.append((str(path.relative_to(package)), node.lineno, keywords))
    return calls


def test_every_conflict_error_the_sdk_raises_says_what_is_visible():
    calls = conflict_error_calls()
    assert len(calls) >= 3  # the destination, a partition, a Delta table
    for where, line, keywords in calls:
        assert {"visible", "destination"} <= keywords, f"{where}:{line} lacks {keywords}"


CONFLICTS = [
    # committer, format, partitioned: the job-setup checks and the per-partition ones
    ("directory", "parquet", False),
    ("partitioned", "parquet", True),
    ("magic", "parquet", False),
    ("magic", "parquet", True),
    ("directory", "delta", False),
    ("partitioned", "delta", True),
    ("magic", "delta", True),
]


@pytest.mark.parametrize(
    ("committer", "fmt", "partitioned"),
    CONFLICTS,
    ids=[f"{c}-{f}-{'partitioned' if p else 'whole'}" for c, f, p in CONFLICTS],
)
def test_every_conflict_says_nothing_changed(s3, dest, committer, fmt, partitioned):
    kwargs = {
        "committer": committer,
        "format": fmt,
        "partition_by": ["day"] if partitioned else None,
        "progress": False,
    }
    write_committed(days("a"), dest.url, **kwargs)
    before = snapshot(s3, dest.dir)
    with pytest.raises(ConflictError) as info:
        write_committed(days("a"), dest.url, conflict_mode="fail", **kwargs)
    error = info.value
    assert error.visible == "nothing" and error.destination == dest.url
    assert "already holds data" in str(error) and NOTHING_CHANGED in str(error)
    assert snapshot(s3, dest.dir) == before
    assert pending_uploads(s3, dest.dir) == []


# -- found when the partition's first file is opened -------------------------------------------
@pytest.mark.parametrize("committer", ["partitioned", "magic"])
def test_an_existing_partition_stops_the_task_before_any_upload(proxy, s3, dest, committer):
    write_committed(days("a"), dest.url, committer=committer, partition_by=["day"], progress=False)
    before = snapshot(s3, dest.dir)
    proxy.reset()
    text = io.StringIO()
    with pytest.raises(ConflictError) as info:
        write_committed(
            days("a", "b"),
            dest.url,
            committer=committer,
            partition_by=["day"],
            conflict_mode="fail",
            options={"endpoint": proxy.endpoint, "tasks": 1},
            progress=TextProgress(stream=text),
        )
    counts = proxy.counts
    # the task checked day=a before its first file there: nothing was uploaded, nor initiated
    assert counts.get("CreateMultipartUpload", 0) == 0 and counts.get("UploadPart", 0) == 0
    assert counts["ListObjectsV2"] >= 1  # the look at day=a
    assert_refused_and_unchanged(info.value, s3, dest, before)
    log = text.getvalue()
    assert "FAILED" in log and NOTHING_CHANGED in log
    assert f"Visible of this job at {dest.url}: nothing." in log
    failed = next(line for line in log.splitlines() if "FAILED after" in line)
    assert "ConflictError: partition day=a" in failed  # the cause on the status line itself


def test_magic_aborts_the_partitions_it_opened_before_the_conflict(proxy, s3, dest):
    """Day b (new) is opened first and its upload initiated; day a (existing) is refused
    before its upload is initiated, and the task's abort aborts day b's."""
    kwargs = {"committer": "magic", "partition_by": ["day"], "progress": False}
    write_committed(days("a"), dest.url, **kwargs)
    before = snapshot(s3, dest.dir)
    proxy.reset()
    with pytest.raises(ConflictError) as info:
        write_committed(
            days("b", "a"),
            dest.url,
            conflict_mode="fail",
            options={"endpoint": proxy.endpoint, "tasks": 1, "task.max-attempts": 1},
            **kwargs,
        )
    counts = proxy.counts
    assert counts["CreateMultipartUpload"] == 1 == counts["AbortMultipartUpload"]  # day b's
    assert counts.get("UploadPart", 0) == 0
    assert_refused_and_unchanged(info.value, s3, dest, before)


def test_the_rest_of_the_input_is_never_read(s3, dest):
    """A stream into an existing partition stops at the batch that opens it: the batches after
    it are never computed."""
    write_committed(days("a"), dest.url, partition_by=["day"], progress=False)
    before = snapshot(s3, dest.dir)
    schema = pa.schema([("id", pa.int64()), ("day", pa.string())])
    read = []

    def batches():
        for n in range(100):
            read.append(n)
            yield pa.record_batch({"id": [n], "day": ["a"]}, schema=schema)

    with pytest.raises(ConflictError) as info:
        write_committed(
            pa.RecordBatchReader.from_batches(schema, batches()),
            dest.url,
            committer="partitioned",
            partition_by=["day"],
            conflict_mode="fail",
            progress=False,
        )
    assert read == [0]
    assert_refused_and_unchanged(info.value, s3, dest, before)


def test_each_partition_is_looked_at_once_per_attempt(s3, dest):
    """Files rolled within a partition (``max_records_per_file``) do not list it again: fail
    costs one listing per partition over append."""
    listings = {}
    for mode in ("append", "fail"):
        result = write_committed(
            days("a", "b", rows=30),
            f"{dest.url}/{mode}",
            committer="partitioned",
            partition_by=["day"],
            conflict_mode=mode,
            options={"tasks": 1, "max_records_per_file": 10},
            progress=False,
        )
        assert len(result.files) == 6
        listings[mode] = result.requests["ListObjectsV2"]
    assert listings["fail"] == listings["append"] + 2


def test_an_existing_partition_stops_the_spark_task_before_any_upload(spark, proxy, s3, dest):
    frame = spark.createDataFrame(days("a", "b"))
    kwargs = {"committer": "partitioned", "partition_by": ["day"], "progress": False}
    write_committed(spark.createDataFrame(days("a")), dest.url, **kwargs)
    before = snapshot(s3, dest.dir)
    proxy.reset()
    with pytest.raises(ConflictError) as info:
        write_committed(
            frame.coalesce(1),
            dest.url,
            conflict_mode="fail",
            options={"endpoint": proxy.endpoint},
            **kwargs,
        )
    counts = proxy.counts
    assert counts.get("CreateMultipartUpload", 0) == 0 and counts.get("UploadPart", 0) == 0
    assert_refused_and_unchanged(info.value, s3, dest, before)
