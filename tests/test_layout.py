"""The hidden layout is an on-disk format, and one cleanup path removes one job's part of it.

Keys written by one release must be found by the next one's ``recover`` / ``abort``, so they are
pinned here byte for byte; the cleanup shared by job abort and recovery refuses anything that is
not the job's own.
"""

from __future__ import annotations

import pytest
from conftest import BUCKET, list_keys, pending_uploads

from s3commit_sdk import layout
from s3commit_sdk.committers.cleanup import release, remove_job_files
from s3commit_sdk.formats import CommitMarker, Journal
from s3commit_sdk.options import resolve_options
from s3commit_sdk.paths import parse_destination
from s3commit_sdk.recovery import plan_abort
from s3commit_sdk.store import S3Settings, S3Store

JOB = "0b1e8f0e-1111-4222-8333-444455556666"
OTHER = "9f2c7d1a-2222-4333-8444-555566667777"


def test_every_hidden_key_is_spelled_as_before():
    s3 = parse_destination("s3://b/out/ds1")
    local = parse_destination("file:///data/out")
    assert {
        "hidden": layout.hidden_prefix(s3),
        "marker": layout.marker_key(s3),
        "job": layout.job_prefix(s3, JOB),
        "alive": layout.alive_key(s3, JOB),
        "journal": layout.journal_key(s3, JOB),
        "staging": layout.staging_pendingset_key(s3, JOB, "attempt_1"),
        "magic": layout.magic_job_prefix(s3, JOB),
        "magic file": layout.magic_file_key(s3, JOB, "attempt_1", "day=1/part-0.parquet"),
        "magic set": layout.magic_pendingset_key(s3, JOB, "task_3"),
        "temporary": layout.temporary_dir(local),
        "classic": layout.classic_attempt_dir(local, JOB, "attempt_1"),
        "classic task": layout.classic_task_dir(local, JOB, "task_3"),
        "manifest": layout.manifest_job_dir(local, JOB),
        "manifest root": layout.manifest_job_root(local, JOB),
    } == {
        "hidden": "out/ds1/__s3commit/",
        "marker": "out/ds1/__s3commit/COMMIT_IN_PROGRESS",
        "job": f"out/ds1/__s3commit/{JOB}/",
        "alive": f"out/ds1/__s3commit/{JOB}/alive",
        "journal": f"out/ds1/__s3commit/{JOB}/journal.json",
        "staging": f"out/ds1/__s3commit/{JOB}/tasks/attempt_1.pendingset",
        "magic": f"out/ds1/__magic/job-{JOB}/",
        "magic file": f"out/ds1/__magic/job-{JOB}/attempt_1/__base/day=1/part-0.parquet",
        "magic set": f"out/ds1/__magic/job-{JOB}/task_3.pendingset",
        "temporary": "/data/out/_temporary",
        "classic": f"/data/out/_temporary/{JOB}/_temporary/attempt_1",
        "classic task": f"/data/out/_temporary/{JOB}/task_3",
        "manifest": f"/data/out/_temporary/manifest_{JOB}/00",
        "manifest root": f"/data/out/_temporary/manifest_{JOB}",
    }
    magic = layout.magic_file_key(s3, JOB, "attempt_1", "day=1/part-0.parquet")
    assert layout.magic_to_final(s3, magic) == "out/ds1/day=1/part-0.parquet"
    assert layout.job_of_journal(s3, layout.journal_key(s3, JOB)) == JOB
    assert layout.job_of_journal(s3, layout.alive_key(s3, JOB)) is None


def test_every_hidden_key_is_hidden_from_readers():
    s3 = parse_destination("s3://b/out")
    keys = [
        layout.marker_key(s3),
        layout.probe_key(s3),
        layout.alive_key(s3, JOB),
        layout.journal_key(s3, JOB),
        layout.staging_pendingset_key(s3, JOB, "a"),
        layout.magic_file_key(s3, JOB, "a", "part-0.parquet"),
        layout.magic_pendingset_key(s3, JOB, "t"),
        layout.classic_attempt_dir(s3, JOB, "a") + "/part-0.parquet",
        layout.manifest_job_dir(s3, JOB) + "/tasks/a/part-0.parquet",
        s3.key(layout.SUCCESS_MARKER),
    ]
    assert [k for k in keys if not layout.is_hidden(s3.relative(k))] == []


@pytest.fixture
def store(s3_server):
    return S3Store(S3Settings.resolve(resolve_options(None)))


def test_cleanup_touches_no_other_jobs_files(s3, dest, store):
    location = parse_destination(dest.url)
    other = [layout.alive_key(location, OTHER), layout.magic_pendingset_key(location, OTHER, "t")]
    for key in [*other, layout.marker_key(location)]:
        s3.put_object(Bucket=BUCKET, Key=key, Body=b"x")
    data = location.key("part-00000-x.parquet")
    upload = s3.create_multipart_upload(Bucket=BUCKET, Key=data)["UploadId"]
    for hidden in ([other[0]], [other[1]], [data]):
        with pytest.raises(ValueError, match="not a file of job"):
            remove_job_files(store, location, JOB, uploads={upload: data}, hidden=hidden, threads=2)
    with pytest.raises(ValueError, match="not a file of job"):
        release(store, location, JOB, [layout.journal_key(location, OTHER)])
    outside = f"{dest.prefix}-sibling/part-0.parquet"
    with pytest.raises(ValueError, match="not a file of job"):
        remove_job_files(store, location, JOB, uploads={upload: outside}, hidden=[], threads=2)
    assert len(pending_uploads(s3, dest.dir)) == 1  # refused before any request
    assert remove_job_files(store, location, JOB, uploads={upload: data}, hidden=[], threads=2)
    assert pending_uploads(s3, dest.dir) == []
    assert list_keys(s3, dest.dir) == sorted([*other, layout.marker_key(location)])
    s3.delete_objects(
        Bucket=BUCKET, Delete={"Objects": [{"Key": k} for k in list_keys(s3, dest.dir)]}
    )


def test_abort_of_a_delta_job_leaves_a_marker_it_never_took(s3, dest):
    """A Delta job takes no marker: rolling it back must not release one another job took."""
    location = parse_destination(dest.url)
    journal = Journal(
        jobId=JOB,
        destination=dest.url,
        bucket=BUCKET,
        committer="directory",
        conflictMode="append",
        format="delta",
        partitionBy=[],
        markSuccess=True,
        commits=[],
        replaced=[],
    )
    s3.put_object(Bucket=BUCKET, Key=layout.journal_key(location, JOB), Body=journal.to_json())
    s3.put_object(Bucket=BUCKET, Key=layout.alive_key(location, JOB), Body=JOB.encode())
    plan = plan_abort(dest.url)
    assert plan.job_id == JOB
    marker = CommitMarker(OTHER, layout.journal_key(location, OTHER)).to_json()
    s3.put_object(Bucket=BUCKET, Key=layout.marker_key(location), Body=marker.encode())
    plan.carry_out()
    assert list_keys(s3, dest.dir) == [layout.marker_key(location)]  # the job's files are gone
    s3.delete_object(Bucket=BUCKET, Key=layout.marker_key(location))
