"""The staging committers upload a file from the moment the writer closes it, while the task
writes the next one; what they start early stays pending until job commit, and an attempt that
fails aborts all of it.

Each test drives one task attempt in-process with a generator of batches, so the test decides
what happens between two files: it waits there for what the store (or the fault proxy) shows.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator

import pyarrow as pa
import pytest
from conftest import BUCKET, pending_uploads, read_back, visible_keys

from s3commit_sdk import StoreError
from s3commit_sdk.committers import make_committer
from s3commit_sdk.protocol import JobContext
from s3commit_sdk.runner import execute_task
from s3commit_sdk.testing.faultproxy import hold, internal_error

ROWS_PER_FILE = 10
#: (committer, partition columns): a flat directory job, and a partitioned one rolling its files
JOBS = [("directory", ()), ("partitioned", ("day",))]


def rows(start: int, count: int) -> pa.RecordBatch:
    return pa.record_batch({"id": list(range(start, start + count)), "day": ["d1"] * count})


def staging_job(url: str, committer: str, partition_by: tuple[str, ...], **options) -> JobContext:
    options = {"max_records_per_file": ROWS_PER_FILE, **options}
    return JobContext.on_s3(url, committer, options, partition_by=partition_by)


def wait_until(condition: Callable[[], bool], what: str, timeout: float = 60) -> None:
    """Until ``condition()`` holds: the event a test waits for, observed from outside."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"no {what} within {timeout} s"
        time.sleep(0.02)


def parts_sent(s3, prefix: str) -> int:
    """Parts the store holds of the pending uploads under ``prefix``."""
    uploads = pending_uploads(s3, prefix)
    return sum(
        len(s3.list_parts(Bucket=BUCKET, Key=u["Key"], UploadId=u["UploadId"]).get("Parts", []))
        for u in uploads
    )


@pytest.mark.parametrize(("committer", "partition_by"), JOBS)
def test_a_closed_file_is_uploaded_while_the_task_writes_the_next(
    s3_server, s3, dest, committer, partition_by
):
    """The writer holds its second file open until the store shows the first file's upload with
    its part: had the upload waited for task commit, it never would. The upload started early
    stays pending (nothing visible) until job commit, which commits every row."""
    job = staging_job(dest.url, committer, partition_by)
    driver = make_committer(job)
    driver.setup_job()
    seen: dict[str, object] = {}

    def batches() -> Iterator[pa.RecordBatch]:
        yield rows(0, ROWS_PER_FILE)  # the first file, full
        yield rows(ROWS_PER_FILE, 1)  # the second file: the first one rolled and closed
        wait_until(lambda: parts_sent(s3, dest.dir) >= 1, "part of the first file's upload")
        seen["uploads"] = [u["Key"].rsplit("/", 1)[-1] for u in pending_uploads(s3, dest.dir)]
        seen["visible"] = visible_keys(s3, dest.dir)
        yield rows(ROWS_PER_FILE + 1, ROWS_PER_FILE - 1)

    commit = execute_task(job, 0, 0, batches())
    sep = "." if partition_by else "-"
    assert seen == {"uploads": [f"part-00000-{job.job_id}{sep}c000.snappy.parquet"], "visible": []}
    assert [c["rows"] for c in commit.payload["commits"]] == [ROWS_PER_FILE, ROWS_PER_FILE]
    assert len(pending_uploads(s3, dest.dir)) == 2 and visible_keys(s3, dest.dir) == []
    driver.commit_job([commit], {})
    expected = sorted(("d1", str(i)) for i in range(2 * ROWS_PER_FILE))
    assert read_back(s3_server, dest.prefix) == expected


@pytest.mark.fault
@pytest.mark.parametrize("failure", [RuntimeError("the input failed"), KeyboardInterrupt()])
@pytest.mark.parametrize(("committer", "partition_by"), JOBS)
def test_a_failure_while_writing_a_later_file_aborts_the_uploads_started(
    proxy, s3, dest, tmp_path, committer, partition_by, failure
):
    """The first file's part is held in flight by the proxy when the input fails (an error, or
    Ctrl-C landing in the writer) while the task writes its second file: the attempt aborts the
    upload it started, nothing is pending or visible, and its local files are gone."""
    options = {"endpoint": proxy.endpoint, "buffer.dir": str(tmp_path)}
    job = staging_job(dest.url, committer, partition_by, **options)
    driver = make_committer(job)
    driver.setup_job()
    proxy.set_rules([hold("UploadPart")])
    failing = threading.Event()

    def release_once_failing() -> None:
        failing.wait(60)
        proxy.release()

    releaser = threading.Thread(target=release_once_failing, daemon=True)
    releaser.start()

    def batches() -> Iterator[pa.RecordBatch]:
        yield rows(0, ROWS_PER_FILE)
        yield rows(ROWS_PER_FILE, 1)  # the first file closed: its upload starts
        wait_until(lambda: proxy.counts.get("UploadPart", 0) >= 1, "part held in flight")
        failing.set()
        raise failure

    with pytest.raises(type(failure)):
        execute_task(job, 0, 0, batches())
    releaser.join(60)
    assert proxy.counts.get("CreateMultipartUpload") == 1
    assert proxy.counts.get("AbortMultipartUpload") == 1
    assert pending_uploads(s3, dest.dir) == [] and visible_keys(s3, dest.dir) == []
    assert os.listdir(tmp_path) == []  # the attempt's directory, removed
    driver.abort_job([])


@pytest.mark.fault
@pytest.mark.parametrize(("committer", "partition_by"), JOBS)
def test_a_failing_early_upload_fails_the_task_typed_and_leaves_nothing(
    proxy, s3, dest, tmp_path, committer, partition_by
):
    """The first file's only part fails (retries off) while the task goes on writing: the task
    stops at its next file with the store's typed error, long before its input ends, and
    leaves no upload pending, nothing visible and no local file."""
    options = {"endpoint": proxy.endpoint, "buffer.dir": str(tmp_path), "retry.max-attempts": 1}
    job = staging_job(dest.url, committer, partition_by, **options)
    driver = make_committer(job)
    driver.setup_job()
    proxy.set_rules([internal_error("UploadPart", occurrences=[1])])
    files = 200
    consumed = []

    def batches() -> Iterator[pa.RecordBatch]:
        for i in range(files):
            consumed.append(i)
            yield rows(i * ROWS_PER_FILE, ROWS_PER_FILE)

    with pytest.raises(StoreError, match="InternalError"):
        execute_task(job, 0, 0, batches())
    assert len(consumed) < files  # stopped early, not at task commit
    assert proxy.counts.get("AbortMultipartUpload") == proxy.counts.get("CreateMultipartUpload")
    assert pending_uploads(s3, dest.dir) == [] and visible_keys(s3, dest.dir) == []
    assert os.listdir(tmp_path) == []
    driver.abort_job([])
