"""An engine and a running task attempt talk through the attempt's handle, passed explicitly:
the writers report what they have written after every batch and stop, aborting their output,
before the next batch once the engine cancelled the attempt."""

from __future__ import annotations

import os
import signal
import threading

import pyarrow as pa
import pytest
from conftest import list_keys, pending_uploads, visible_keys

from s3commit_sdk import write_committed
from s3commit_sdk.attempt_handle import AttemptHandle
from s3commit_sdk.committers import make_committer
from s3commit_sdk.errors import TaskCancelledError
from s3commit_sdk.protocol import JobContext
from s3commit_sdk.runner import execute_task


def magic_job(url: str) -> JobContext:
    return JobContext.on_s3(url, "magic", {"multipart.size": "5M"})


def test_the_handle_gets_rows_and_bytes_after_every_batch(s3, dest):
    job = magic_job(dest.url)
    driver = make_committer(job)
    driver.setup_job()
    reports: list[tuple[int, int]] = []
    batches = [pa.record_batch({"id": list(range(n, n + 100))}) for n in (0, 100, 200)]
    handle = AttemptHandle(lambda rows, written: reports.append((rows, written)))
    commit = execute_task(job, 0, 0, batches, handle=handle)
    assert [rows for rows, _ in reports] == [100, 200, 300] == [100, 200, commit.summary.rows]
    sizes = [written for _, written in reports]
    assert sizes == sorted(sizes) and sizes[-1] <= commit.summary.bytes
    driver.abort_job([commit])
    assert pending_uploads(s3, dest.dir) == []


def test_a_cancelled_attempt_stops_before_its_next_batch_and_aborts_its_uploads(s3, dest):
    job = magic_job(dest.url)
    driver = make_committer(job)
    driver.setup_job()
    cancel = threading.Event()
    pulled, open_uploads = [], []

    def batches():
        for i in range(12):
            pulled.append(i)
            if i == 7:  # the engine cancels while the attempt is streaming its file
                open_uploads.extend(pending_uploads(s3, dest.dir))
                cancel.set()
            yield pa.record_batch({"blob": [os.urandom(1024 * 1024)]})

    with pytest.raises(TaskCancelledError, match="task_00000_0 stopped after 7 rows"):
        execute_task(job, 0, 0, batches(), handle=AttemptHandle(cancel=cancel))
    assert pulled == list(range(8))  # nothing was read after the cancelled batch
    assert len(open_uploads) == 1  # the stream's upload really was in progress
    assert pending_uploads(s3, dest.dir) == [] and visible_keys(s3, dest.dir) == []
    driver.abort_job([])
    assert list_keys(s3, dest.dir) == []


def test_ctrl_c_cancels_the_local_engines_running_task(s3, dest):
    """Ctrl-C lands in the driver's thread while the task reads a stream; the engine sets the
    attempt's cancel flag and the task stops before its next batch instead of reading on."""
    schema = pa.schema([("id", pa.int64())])
    handled = threading.Event()
    pulled = []
    endless = 1_000_000  # batches: the stream ends only when the task stops reading it

    def on_sigint(signum, frame) -> None:
        handled.set()
        raise KeyboardInterrupt

    def batches():  # read by the task, in its own thread
        for i in range(endless):
            pulled.append(i)
            if i == 1:  # Ctrl-C once the task is writing, then wait until it landed
                signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
                assert handled.wait(60)
            yield pa.record_batch({"id": [i]}, schema=schema)

    events = []
    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        with pytest.raises(KeyboardInterrupt):
            write_committed(
                pa.RecordBatchReader.from_batches(schema, batches()),
                dest.url,
                committer="magic",
                progress=events.append,
            )
    finally:
        signal.signal(signal.SIGINT, previous)
    assert 2 <= len(pulled) < endless  # the task stopped reading
    assert events[-1].phase == "failed" and events[-1].failure.interrupted
    assert pending_uploads(s3, dest.dir) == [] and visible_keys(s3, dest.dir) == []
