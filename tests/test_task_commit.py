"""The task-commit message is one type: encoded once on the executor, decoded once on the
driver, and a malformed one is a typed error that leaves nothing behind."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from conftest import list_keys, pending_uploads

from s3commit_sdk import PendingSetError
from s3commit_sdk.api import new_job
from s3commit_sdk.committers import make_committer
from s3commit_sdk.formats import PendingSet
from s3commit_sdk.protocol import JobContext, TaskCommit
from s3commit_sdk.runner import execute_task

BATCH = pa.record_batch({"id": list(range(10)), "day": ["a", "b"] * 5})


def job_on(committer: str, url: str) -> JobContext:
    """The job ``write_committed`` would run for ``BATCH``, partitioned by day."""
    return new_job(
        url,
        committer=committer,
        partition_by=["day"],
        conflict_mode=None,
        format="parquet",
        options=None,
        schema=BATCH.schema,
        conf=None,
    )


@pytest.mark.parametrize("committer", ["directory", "partitioned", "magic", "manifest", "file"])
def test_every_committers_message_survives_the_wire_and_commits(committer, dest, s3, tmp_path):
    """What the engines send between processes decodes to what the task returned, and the
    job commits from the decoded messages with the summary's counts."""
    url = dest.url if committer in ("directory", "partitioned", "magic") else f"file://{tmp_path}"
    job = job_on(committer, url)
    driver = make_committer(job)
    driver.setup_job()
    sent = [execute_task(job, i, 0, [BATCH], BATCH.schema) for i in range(2)]
    received = [TaskCommit.decode(m.encode()) for m in sent]
    assert received == sent
    assert [m.attempt_id for m in received] == ["task_00000_0", "task_00001_0"]
    assert [(m.summary.files, m.summary.rows) for m in received] == [(2, 10), (2, 10)]
    outcome = driver.commit_job(received, {})
    assert len(outcome.files) == 4
    assert sum(f["rows"] for f in outcome.files) == 20
    assert sum(f["size"] for f in outcome.files) == sum(m.summary.bytes for m in received)
    assert pending_uploads(s3, dest.dir) == []


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        "[]",
        '{"task_id": "task_00000", "attempt_id": "task_00000_0", "summary": {}}',
        '{"task_id": "t", "attempt_id": "t_0", "summary": {"files": 1, "extra": 2}, "payload": {}}',
        '{"task_id": "t", "attempt_id": "t_0", "summary": {}, "payload": []}',
    ],
    ids=["not-json", "not-an-object", "no-payload", "unknown-summary-field", "payload-list"],
)
def test_a_malformed_message_is_a_typed_error(text):
    with pytest.raises(PendingSetError, match="malformed task commit message"):
        TaskCommit.decode(text)


def test_a_message_a_job_cannot_read_aborts_it_and_leaves_nothing(dest, s3):
    """A payload that is not a pendingset fails job commit typed; the job's uploads (named by
    the other, good message) are aborted and nothing is visible."""
    job = job_on("directory", dest.url)
    driver = make_committer(job)
    driver.setup_job()
    good, bad = (execute_task(job, i, 0, [BATCH], BATCH.schema) for i in range(2))
    broken = TaskCommit(bad.task_id, bad.attempt_id, bad.summary, {"manifest": "x"})
    assert len(pending_uploads(s3, dest.dir)) == 4
    with pytest.raises(PendingSetError, match="malformed pendingset"):
        driver.commit_job([good, broken], {})
    assert pending_uploads(s3, dest.dir) == [] and list_keys(s3, dest.dir) == []


def test_a_pendingset_saved_by_an_earlier_version_still_loads():
    """Saved pendingsets once carried the task summary's fields; `s3commit recover` of a job
    written before must still read them."""
    doc = {
        "jobId": "j",
        "taskId": "task_00000",
        "taskAttemptId": "task_00000_0",
        "commits": [],
        "taskDurationSeconds": 0.0,
        "taskWriteSeconds": 0.0,
        "taskFiles": 0,
        "taskBytes": 0,
        "taskRows": 0,
    }
    loaded = PendingSet.from_json(json.dumps(doc))
    assert (loaded.taskAttemptId, loaded.commits) == ("task_00000_0", [])
    with pytest.raises(PendingSetError, match="malformed pendingset"):
        PendingSet.from_json(json.dumps({**doc, "unknown": 1}))
