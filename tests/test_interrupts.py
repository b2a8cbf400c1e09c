"""Ctrl-C at each step of job commit, and persistent faults on each cleanup request.

Ctrl-C: a real driver process (tests/crash_driver.py) writes through the fault proxy, which
holds the chosen request for a moment; when it arrives the test sends SIGINT, as a terminal or
Jupyter's Kernel > Interrupt does. Before the first completion the job must be aborted (nothing
visible, nothing pending, no marker); during completions rolled back; after the last one, left
for `s3commit recover`, which the error's note names. Cleanup faults: every file is complete, so
the error says the data is visible and the destination locked, and `recover` finishes the job.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest
from conftest import BUCKET, list_keys, pending_uploads, read_back
from crash_driver import data, run

from s3commit_sdk import CommitError
from s3commit_sdk.committers import make_committer
from s3commit_sdk.committers.exclusive import honours_conditional_create
from s3commit_sdk.protocol import JobContext
from s3commit_sdk.recovery import recover
from s3commit_sdk.runner import execute_task
from s3commit_sdk.testing.faultproxy import delay, internal_error

pytestmark = pytest.mark.fault

DRIVER = Path(__file__).with_name("crash_driver.py")
MARKER = "__s3commit/COMMIT_IN_PROGRESS"
OLD_DAYS, NEW_DAYS = ["d1", "d2"], ["d2", "d3"]
# (operation, occurrence) that the SIGINT meets, in a replace job with 3 tasks x 2 days and
# threads=1. DeleteObjects 1 removes the driver process's conditional-PUT probe, 2 is the
# replace delete, 3 the metadata cleanup; the replace listing is the first ListObjectsV2.
STEPS = {
    "before-completions": ("ListObjectsV2", 1),
    "after-2-of-6-completions": ("CompleteMultipartUpload", 3),
    "before-replace-deletes": ("DeleteObjects", 2),
    "during-cleanup": ("DeleteObjects", 3),
}
ROLLED_BACK = ("before-completions", "after-2-of-6-completions")


def visible_state(s3, dest) -> dict[str, str]:
    rel = len(dest.dir)
    return {
        k: s3.head_object(Bucket=BUCKET, Key=k)["ETag"]
        for k in list_keys(s3, dest.dir)
        if not any(seg[:1] in "_." for seg in k[rel:].split("/"))
    }


def hidden(s3, dest) -> list[str]:
    return [k for k in list_keys(s3, dest.dir) if "/__" in k]


def interrupt(proxy, job_spec: dict, operation: str, occurrence: int) -> str:
    """Run the driver, SIGINT it when the request arrives (held 1.5 s); its stderr."""
    proxy.set_rules([delay(1500, operation, occurrences=[occurrence])])
    env = {**os.environ, "PYTHONPATH": str(DRIVER.parent)}
    child = subprocess.Popen(
        [sys.executable, str(DRIVER), json.dumps(job_spec)],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while proxy.counts.get(operation, 0) < occurrence:
            assert child.poll() is None, "the driver ended before the interrupt point"
            assert time.monotonic() < deadline, f"no {operation} #{occurrence} within 60 s"
            time.sleep(0.01)
        child.send_signal(signal.SIGINT)
        _, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        proxy.reset()
    assert child.returncode != 0 and "KeyboardInterrupt" in err
    return err


def expected_rows() -> list[tuple]:
    old, new = data(1, OLD_DAYS), data(2, NEW_DAYS)
    merged = [*old[old.day == "d1"].itertuples(index=False), *new.itertuples(index=False)]
    return sorted((r.day, str(r.id), r.name) for r in merged)  # read_back sorts the columns


@pytest.mark.parametrize("committer", ["partitioned", "magic"])
@pytest.mark.parametrize("step", list(STEPS))
def test_ctrl_c_during_job_commit(proxy, s3, s3_server, dest, committer, step, tmp_path):
    buffer = tmp_path / "buffer"  # the staging committer's local copies: none may stay behind
    options = {"tasks": 3, "threads": 1, "buffer.dir": str(buffer)}
    run({"dest": dest.url, "committer": committer, "seed": 1, "days": OLD_DAYS, "options": options})
    before = visible_state(s3, dest)
    job_spec = {
        "dest": dest.url,
        "committer": committer,
        "seed": 2,
        "days": NEW_DAYS,
        "options": {**options, "endpoint": proxy.endpoint},
    }
    err = interrupt(proxy, job_spec, *STEPS[step])
    assert not buffer.exists() or list(buffer.iterdir()) == []
    if step in ROLLED_BACK:
        assert re.search(r"nothing of (it|this job) is visible", err, re.I)
        assert visible_state(s3, dest) == before
        assert hidden(s3, dest) == [] and pending_uploads(s3, dest.dir) == []
        return
    # every file was complete: the destination stays locked until recover finishes the job
    assert f"s3commit recover {dest.url}" in err
    assert list_keys(s3, dest.dir + MARKER)
    report = recover(dest.url)
    assert report.job_id is not None
    assert read_back(s3_server, dest.prefix) == expected_rows()
    assert hidden(s3, dest) == [] and pending_uploads(s3, dest.dir) == []


CLEANUP_FAULTS = {
    # the rules are set after the tasks ran: requests of job commit only, retries off
    "pending-upload-listing": internal_error("ListMultipartUploads"),
    "batch-delete": internal_error("DeleteObjects"),
    "success-put": internal_error("PutObject", occurrences=[3]),  # marker, journal, _SUCCESS
    "release": internal_error("DeleteObjects", occurrences=[3]),  # alive, metadata, release
}


@pytest.mark.parametrize("fault", list(CLEANUP_FAULTS))
def test_persistent_fault_after_the_last_completion(proxy, s3, s3_server, dest, fault):
    job = JobContext.on_s3(
        dest.url,
        "partitioned",
        {"endpoint": proxy.endpoint, "retry.max-attempts": 1},
        partition_by=("day",),
    )
    assert honours_conditional_create(job.settings, job.location)  # checked once, here
    driver = make_committer(job)
    driver.setup_job()
    batch = pa.record_batch({"id": [1, 2, 3, 4], "day": ["a", "b", "a", "b"]})
    messages = [execute_task(job, i, 0, [batch], batch.schema) for i in range(2)]
    proxy.reset()
    proxy.set_rules([CLEANUP_FAULTS[fault]])
    with pytest.raises(CommitError) as info:
        driver.commit_job(messages, {})
    message = str(info.value)
    assert "every file is complete and visible" in message
    assert f"s3commit recover {dest.url}" in message and "stays locked" in message
    assert len(visible_state(s3, dest)) == 4  # 2 tasks x 2 partitions, all visible
    assert list_keys(s3, dest.dir + MARKER)
    proxy.reset()
    assert recover(dest.url).job_id == job.job_id
    assert sorted(r[1] for r in read_back(s3_server, dest.prefix)) == sorted(
        ["1", "2", "3", "4"] * 2
    )
    success = json.loads(s3.get_object(Bucket=BUCKET, Key=dest.dir + "_SUCCESS")["Body"].read())
    assert success["jobId"] == job.job_id
    assert hidden(s3, dest) == [] and pending_uploads(s3, dest.dir) == []
