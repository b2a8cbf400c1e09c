"""Exclusive job commit: a journal and a per-destination marker created with If-None-Match."""

from __future__ import annotations

import copy
import dataclasses
import json
import threading
import time

import pandas as pd
import pytest
from conftest import BUCKET, list_keys, marker_writer, pending_uploads, read_back, visible_keys

from s3commit_sdk import ConcurrentCommitError, write_committed

pytestmark = pytest.mark.fault

COMMITTERS = ("directory", "partitioned", "magic")


def frame(n: int, start: int = 0) -> pd.DataFrame:
    return pd.DataFrame({"id": range(start, start + n), "day": ["d1", "d2"] * (n // 2)})


def as_rows(df: pd.DataFrame) -> list[tuple]:
    return sorted(tuple(str(v) for v in r) for r in df[sorted(df.columns)].itertuples(index=False))


def marker_key(dest) -> str:
    return dest.dir + "__s3commit/COMMIT_IN_PROGRESS"


@pytest.mark.parametrize("committer", COMMITTERS)
def test_unfinished_commit_blocks_new_jobs(s3, dest, committer):
    other = {
        "jobId": "11111111-2222-3333-4444-555555555555",
        "journal": "x",
        "hostname": "elsewhere",
        "started": 0,
    }
    s3.put_object(Bucket=BUCKET, Key=marker_key(dest), Body=json.dumps(other).encode())
    try:
        with pytest.raises(ConcurrentCommitError) as info:
            write_committed(frame(10), dest.url, committer=committer, conflict_mode="append")
        message = str(info.value)
        assert other["jobId"] in message and "elsewhere" in message
        assert f"s3commit recover {dest.url}" in message and f"s3commit abort {dest.url}" in message
        assert visible_keys(s3, dest.dir) == [] and pending_uploads(s3, dest.dir) == []
    finally:
        s3.delete_object(Bucket=BUCKET, Key=marker_key(dest))


@pytest.mark.parametrize("committer", COMMITTERS)
def test_marker_appearing_during_the_job_aborts_its_commit(spark, s3, s3_server, dest, committer):
    """Another commit starts after this job's setup: this job must not intermingle output."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType

    other = {"jobId": "other-job", "journal": "x", "hostname": "h", "started": 0}
    key = marker_key(dest)
    grab_marker = marker_writer(s3_server, BUCKET, key, other)
    df = spark.range(0, 20, numPartitions=2).withColumn("id", F.udf(grab_marker, LongType())("id"))
    try:
        with pytest.raises(ConcurrentCommitError, match="other-job"):
            write_committed(df, dest.url, committer=committer)
        assert visible_keys(s3, dest.dir) == []
        assert pending_uploads(s3, dest.dir) == []
        assert list_keys(s3, dest.dir) == [key]  # no journal or metadata of ours is left
    finally:
        s3.delete_object(Bucket=BUCKET, Key=key)


def test_two_racing_jobs_never_intermingle(s3, s3_server, dest):
    frames = [frame(40, 0), frame(40, 1000)]
    outcomes: list = [None, None]

    def run(i: int) -> None:
        try:
            outcomes[i] = write_committed(
                frames[i],
                dest.url,
                committer="magic",
                conflict_mode="replace",
                options={"tasks": 2},
            )
        except ConcurrentCommitError as exc:
            outcomes[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [i for i, o in enumerate(outcomes) if not isinstance(o, Exception)]
    assert winners  # at least one committed; a loser raised ConcurrentCommitError
    # replace mode: the output is exactly one job's rows, never a mix
    assert read_back(s3_server, dest.prefix) in [as_rows(frames[i]) for i in winners]
    assert [k for k in list_keys(s3, dest.dir) if "__s3commit" in k or "__magic" in k] == []


def test_journal_and_marker_are_gone_after_commit(s3, dest):
    write_committed(frame(10), dest.url, committer="partitioned", partition_by=["day"])
    assert [k for k in list_keys(s3, dest.dir) if "/__" in k] == []


def test_marker_create_that_landed_but_was_not_acknowledged(proxy, s3, s3_server, dest):
    """The conditional PUT of the marker reaches S3, the client sees a 500 and retries into a
    412 on its own marker: the job must recognise it and commit, leaving no marker behind."""
    from s3commit_sdk.committers.exclusive import honours_conditional_create
    from s3commit_sdk.paths import parse_s3_url
    from s3commit_sdk.store import S3Settings
    from s3commit_sdk.testing.faultproxy import internal_error

    # the once-per-process check of the endpoint first, so that it makes no request below
    assert honours_conditional_create(S3Settings(proxy.endpoint), parse_s3_url(dest.url))
    # PutObject 1 is the task's pendingset, 2 the marker, 3 the journal
    proxy.set_rules([internal_error("PutObject", occurrences=[2], after=True)])
    data = frame(10)
    result = write_committed(
        data, dest.url, committer="directory", options={"endpoint": proxy.endpoint, "tasks": 1}
    )
    assert [e.operation for e in proxy.events] == ["PutObject"]
    assert result.rows == 10 and read_back(s3_server, dest.prefix) == as_rows(data)
    assert [k for k in list_keys(s3, dest.dir) if "/__" in k] == []


@pytest.mark.parametrize("committer", COMMITTERS)
@pytest.mark.parametrize(
    "tamper",
    [
        lambda doc: doc["commits"][0].update(destinationKey="elsewhere/evil.parquet"),
        lambda doc: doc.update(jobId="another-job"),
        lambda doc: doc["commits"][0].update(etags=[]),
        lambda doc: doc.update(taskAttemptId="task_00000_0"),  # the other task's attempt
    ],
    ids=["outside-destination", "foreign-job", "no-parts", "other-attempt"],
)
def test_tampered_pendingset_is_rejected_and_its_uploads_aborted(s3, dest, committer, tamper):
    """Job commit validates every task's pendingset; a bad one aborts the whole job."""
    import pyarrow as pa

    from s3commit_sdk import PendingSetError
    from s3commit_sdk.committers import make_committer
    from s3commit_sdk.protocol import JobContext
    from s3commit_sdk.runner import execute_task

    job = JobContext.on_s3(dest.url, committer)
    driver = make_committer(job)
    driver.setup_job()
    batch = pa.record_batch({"id": list(range(10))})
    messages = [execute_task(job, i, 0, [batch]) for i in range(2)]
    assert len(pending_uploads(s3, dest.dir)) == 2
    doc = copy.deepcopy(messages[1].payload)
    tamper(doc)
    with pytest.raises(PendingSetError):
        driver.commit_job([messages[0], dataclasses.replace(messages[1], payload=doc)], {})
    assert pending_uploads(s3, dest.dir) == [] and list_keys(s3, dest.dir) == []


@pytest.mark.parametrize("committer", COMMITTERS)
def test_racing_replaces_leave_exactly_one_jobs_data(proxy, s3, s3_server, dest, committer):
    """Job B's first commit request (held 1.5 s, as a throttled and retried PUT would be)
    straddles job A's whole replace commit. Before the fix B listed what to replace before it
    took the marker, deleted only that, and both jobs' data stayed visible."""
    import pyarrow as pa

    from s3commit_sdk.committers import make_committer
    from s3commit_sdk.committers.exclusive import honours_conditional_create
    from s3commit_sdk.protocol import JobContext
    from s3commit_sdk.runner import execute_task
    from s3commit_sdk.testing.faultproxy import delay

    partition_by = () if committer == "directory" else ("day",)
    write_committed(frame(4, 0), dest.url, committer="partitioned", partition_by=["day"])

    def prepared(endpoint: str | None, start: int):
        options = {"endpoint": endpoint} if endpoint else {}
        job = JobContext.on_s3(dest.url, committer, options, "replace", partition_by)
        honours_conditional_create(job.settings, job.location)  # before the rules below
        driver = make_committer(job)
        driver.setup_job()
        batch = pa.record_batch({"id": list(range(start, start + 4)), "day": ["d1", "d2"] * 2})
        return driver, [execute_task(job, 0, 0, [batch], batch.schema)]

    job_a, messages_a = prepared(None, 100)
    job_b, messages_b = prepared(proxy.endpoint, 200)
    proxy.reset()
    proxy.set_rules([delay(1500, "PutObject", occurrences=[1])])
    outcome: dict[str, object] = {}

    def commit_b() -> None:
        try:
            outcome["b"] = job_b.commit_job(messages_b, {})
        except ConcurrentCommitError as exc:
            outcome["b"] = exc

    thread = threading.Thread(target=commit_b)
    thread.start()
    time.sleep(0.3)  # B's held request is in flight
    job_a.commit_job(messages_a, {})
    thread.join(60)
    ids = sorted(int(r[1]) for r in read_back(s3_server, dest.prefix))  # (day, id)
    if isinstance(outcome["b"], ConcurrentCommitError):
        assert ids == list(range(100, 104))  # B left nothing behind
    else:
        assert ids == list(range(200, 204))  # B replaced A's data, all of it
    assert pending_uploads(s3, dest.dir) == []
    assert [k for k in list_keys(s3, dest.dir) if "/__" in k] == []
