"""Recovery trusts nothing it did not write (issue 27): a journal crafted under ``__s3commit/``
next to real jobs the SDK created is refused by ``recover`` and ``abort`` (API and CLI) with a
``JournalTrustError`` naming the journal, the field and the fault, before any request changed
the store: the bucket's listing (objects and multipart uploads) is what it was before.

The destination holds a Delta table an earlier job committed (its files, ``_SUCCESS``, the first
log entry) and two Delta jobs set up with their tasks run, not committed: their alive markers,
saved pendingsets and pending uploads are what a crafted journal would turn recovery against.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd
import pytest
from conftest import BUCKET, list_keys, pending_uploads

from s3commit_sdk import write_committed
from s3commit_sdk.api import new_job
from s3commit_sdk.cli import main as cli
from s3commit_sdk.committers import make_committer
from s3commit_sdk.engines.local import to_arrow
from s3commit_sdk.errors import JournalTrustError
from s3commit_sdk.formats import Journal, PendingSet
from s3commit_sdk.journal_trust import check_journal, check_pendingset
from s3commit_sdk.paths import parse_s3_url
from s3commit_sdk.recovery import abort, recover
from s3commit_sdk.runner import execute_task

MARKER = "__s3commit/COMMIT_IN_PROGRESS"
LOG_ENTRY = "_delta_log/00000000000000000000.json"


def frame(n: int, tag: str) -> pd.DataFrame:
    return pd.DataFrame(
        {"id": range(n), "name": [f"{tag}{i}" for i in range(n)], "day": ["d1", "d2"] * (n // 2)}
    )


def running_job(url: str, committer: str, tag: str):
    """A Delta append set up and its one task run, not committed: (committer, messages)."""
    data = to_arrow(frame(10, tag))
    job = new_job(
        url,
        committer=committer,
        partition_by=["day"],
        conflict_mode="append",
        format="delta",
        options=None,
        schema=data.schema,
        conf=None,
    )
    job_committer = make_committer(job)
    job_committer.setup_job()
    return job_committer, [execute_task(job, 0, 0, data.to_batches(), data.schema)]


@dataclass
class Scene:
    """What the SDK itself made at the destination, by job."""

    dest: object
    earlier: str  # the committed job
    earlier_file: str  # one of its data files
    running: str  # a running job (partitioned)
    running_upload: dict  # {"Key", "UploadId"} of one of its pending uploads
    running_pendingset: str
    other: str  # a second running job (magic)
    other_upload: dict


@pytest.fixture
def scene(s3, dest):
    done = write_committed(
        frame(20, "old"), dest.url, format="delta", partition_by=["day"], progress=False
    )
    jobs = [running_job(dest.url, "partitioned", "new"), running_job(dest.url, "magic", "other")]
    try:
        uploads = {u["Key"]: u for u in pending_uploads(s3, dest.dir)}
        running, other = (c.job.job_id for c, _ in jobs)
        pendingsets = [k for k in list_keys(s3, f"{dest.dir}__s3commit/{running}/tasks/")]
        yield Scene(
            dest,
            done.success["jobId"],
            done.files[0].key,
            running,
            next(u for k, u in uploads.items() if running in k),
            pendingsets[0],
            other,
            next(u for k, u in uploads.items() if other in k),
        )
    finally:
        for committer, messages in jobs:
            committer.abort_job(messages)


def listing(s3, dest) -> list:
    """The bucket under the destination as a listing shows it: every object, every upload."""
    objects = []
    for key in list_keys(s3, dest.dir):
        head = s3.head_object(Bucket=BUCKET, Key=key)
        objects.append((key, head["ContentLength"], head["ETag"], head["LastModified"]))
    uploads = sorted((u["Key"], u["UploadId"]) for u in pending_uploads(s3, dest.dir))
    return [objects, uploads]


def head(s3, key: str) -> tuple[int, str]:
    info = s3.head_object(Bucket=BUCKET, Key=key)
    return info["ContentLength"], info["ETag"]


def commit(scene: Scene, key: str, upload_id: str, job: str, *, etags=None, length=1) -> dict:
    return {
        "uri": f"s3a://{BUCKET}/{key}",
        "bucket": BUCKET,
        "destinationKey": key,
        "uploadId": upload_id,
        "etags": etags or ['"' + hashlib.md5(b"x").hexdigest() + '"'],
        "length": length,
        "rows": 1,
        "partition": {"day": "d1"},
        "jobId": job,
        "taskId": "task_00000",
    }


def journal(scene: Scene, job: str, commits: list[dict], **changes) -> dict:
    doc = {
        "jobId": job,
        "destination": scene.dest.url,
        "bucket": BUCKET,
        "committer": "partitioned",
        "conflictMode": "append",
        "format": "parquet",
        "partitionBy": ["day"],
        "markSuccess": True,
        "commits": commits,
        "replaced": [],
    }
    doc.update(changes)
    return doc


def own_key(scene: Scene, job: str) -> str:
    """A key named as the job's own tasks name their files."""
    return f"{scene.dest.dir}day=d1/part-00000-{job}.c000.snappy.parquet"


# -- the crafted journals: (marker job or None, journal job, document, field refused) ---------
Craft = Callable[[Scene, object], tuple[str | None, str, dict, str]]


def earlier_jobs_file(scene: Scene, s3) -> tuple[str | None, str, dict, str]:
    """abort deleted an earlier job's committed file: a journal of a new job naming it."""
    job = str(uuid.uuid4())
    size, _ = head(s3, scene.earlier_file)
    entry = commit(scene, scene.earlier_file, "gone-upload", job, length=size)
    return job, job, journal(scene, job, [entry]), "commits[0].destinationKey"


def running_jobs_upload(scene: Scene, s3) -> tuple[str | None, str, dict, str]:
    """recover completed another running job's pending upload, named by its own key."""
    job = str(uuid.uuid4())
    upload = scene.running_upload
    entry = commit(scene, upload["Key"], upload["UploadId"], job)
    return job, job, journal(scene, job, [entry]), "commits[0].destinationKey"


def upload_of_another_key(scene: Scene, s3) -> tuple[str | None, str, dict, str]:
    """A key named for the journal's job, with another running job's upload id."""
    job = str(uuid.uuid4())
    entry = commit(scene, own_key(scene, job), scene.other_upload["UploadId"], job)
    return job, job, journal(scene, job, [entry]), "commits[0].uploadId"


def etags_not_md5(scene: Scene, s3) -> tuple[str | None, str, dict, str]:
    """Under the earlier job's own directory, its own file, the right size and part ETags that
    are no MD5s: only the size could be checked, so abort took the file for the job's."""
    size, _ = head(s3, scene.earlier_file)
    entry = commit(scene, scene.earlier_file, "gone-upload", scene.earlier, etags=['"x"'])
    entry["length"] = size
    return scene.earlier, scene.earlier, journal(scene, scene.earlier, [entry]), "commits[0].etags"


def replacing(target: Callable[[Scene], str]) -> Craft:
    """recover deleted a running job's alive marker, its pendingset and the first Delta log
    entry: a journal of a new job whose replace deletes ``target``."""

    def craft(scene: Scene, s3) -> tuple[str | None, str, dict, str]:
        job = str(uuid.uuid4())
        doc = journal(scene, job, [], conflictMode="replace", replaced=[target(scene)])
        return job, job, doc, "replaced[0]"

    return craft


def lone_delta_journal(scene: Scene, s3) -> tuple[str | None, str, dict, str]:
    """A Delta journal with no marker behind it (no alive marker, no transaction)."""
    job = str(uuid.uuid4())
    entry = commit(scene, own_key(scene, job), "no-such-upload", job)
    return None, job, journal(scene, job, [entry], format="delta"), "format"


def alive(scene: Scene) -> str:
    return f"{scene.dest.dir}__s3commit/{scene.running}/alive"


CASES: dict[str, Craft] = {
    "earlier-jobs-file": earlier_jobs_file,
    "running-jobs-upload": running_jobs_upload,
    "upload-of-another-key": upload_of_another_key,
    "etags-not-md5": etags_not_md5,
    "replaced-alive-marker": replacing(alive),
    "replaced-pendingset": replacing(lambda scene: scene.running_pendingset),
    "replaced-delta-log": replacing(lambda scene: scene.dest.dir + LOG_ENTRY),
    "replaced-success": replacing(lambda scene: scene.dest.dir + "_SUCCESS"),
    "replaced-sibling": replacing(lambda scene: scene.dest.prefix + "-sibling/part-00000.parquet"),
    "lone-delta-journal": lone_delta_journal,
}


def put_json(s3, key: str, doc: dict) -> None:
    s3.put_object(Bucket=BUCKET, Key=key, Body=json.dumps(doc).encode())


@pytest.mark.parametrize("case", CASES)
def test_a_crafted_journal_is_refused_and_nothing_changes(case, scene, s3, capsys):
    dest = scene.dest
    assert LOG_ENTRY in [k[len(dest.dir) :] for k in list_keys(s3, dest.dir)]
    marker_job, job, doc, field = CASES[case](scene, s3)
    journal_key = f"{dest.dir}__s3commit/{job}/journal.json"
    put_json(s3, journal_key, doc)
    if marker_job is not None:
        put_json(s3, dest.dir + MARKER, {"jobId": marker_job, "journal": journal_key})
    try:
        before = listing(s3, dest)
        assert before[1], "the running jobs' uploads are pending"
        for act in (recover, abort):
            with pytest.raises(JournalTrustError) as refused:
                act(dest.url)
            error = refused.value
            assert (error.journal_key, error.field) == (journal_key, field), str(error)
            assert error.problem and error.problem in str(error)
            assert "Nothing was changed" in str(error) and error.visible == "unchanged"
            assert error.destination == dest.url and error.job_id == job
            assert listing(s3, dest) == before
        assert refused.value.remedy is None  # abort's: only the operator can tell
        for command in ("recover", "abort"):
            assert cli([command, dest.url]) == 1
            err = capsys.readouterr().err
            assert f"{field} " in err and journal_key in err and "Nothing was changed" in err
            assert listing(s3, dest) == before
    finally:
        s3.delete_objects(
            Bucket=BUCKET,
            Delete={"Objects": [{"Key": journal_key}, {"Key": dest.dir + MARKER}]},
        )


def test_a_pendingset_naming_another_jobs_upload_stops_recover(scene, s3):
    """The journal is the running job's own, as its commit would have written it; a pendingset
    saved beside its tasks' names the other running job's upload, which the resumed commit's
    clean-up would have aborted. recover refuses before completing anything."""
    dest, job = scene.dest, scene.running
    saved = PendingSet.from_json(
        s3.get_object(Bucket=BUCKET, Key=scene.running_pendingset)["Body"].read()
    )
    doc = journal(scene, job, [json.loads(c.to_json()) for c in saved.commits])
    journal_key = f"{dest.dir}__s3commit/{job}/journal.json"
    evil_key = f"{dest.dir}__s3commit/{job}/tasks/attempt_evil.pendingset"
    evil = json.loads(saved.to_json())
    evil["taskAttemptId"] = "attempt_evil"
    evil["commits"] = [
        commit(scene, scene.other_upload["Key"], scene.other_upload["UploadId"], job)
    ]
    put_json(s3, journal_key, doc)
    put_json(s3, evil_key, evil)
    put_json(s3, dest.dir + MARKER, {"jobId": job, "journal": journal_key})
    try:
        before = listing(s3, dest)
        with pytest.raises(JournalTrustError) as refused:
            recover(dest.url)
        assert (refused.value.journal_key, refused.value.field) == (
            evil_key,
            "commits[0].destinationKey",
        )
        assert refused.value.remedy == f"s3commit abort {dest.url}"
        assert listing(s3, dest) == before
        assert cli(["recover", dest.url]) == 1
        assert listing(s3, dest) == before
    finally:
        s3.delete_objects(
            Bucket=BUCKET,
            Delete={"Objects": [{"Key": k} for k in (journal_key, evil_key, dest.dir + MARKER)]},
        )


@pytest.mark.parametrize("fmt", ["parquet", "delta"])
@pytest.mark.parametrize("committer", ["directory", "partitioned", "magic"])
def test_what_every_committer_writes_is_trusted(committer, fmt, s3, dest):
    """The checks accept every committer's own names (the job UUID where each puts it) and
    saved pendingsets, in both formats."""
    data = to_arrow(frame(10, "x"))
    job = new_job(
        dest.url,
        committer=committer,
        partition_by=["day"],
        conflict_mode="append",
        format=fmt,
        options=None,
        schema=data.schema,
        conf=None,
    )
    job_committer = make_committer(job)
    job_committer.setup_job()
    messages = [execute_task(job, 0, 0, data.to_batches(), data.schema)]
    try:
        location = parse_s3_url(dest.url)
        commits = [c for m in messages for c in PendingSet.from_dict(m.payload).commits]
        assert commits and all(job.job_id in c.destinationKey for c in commits)
        written = Journal(
            job.job_id, dest.url, BUCKET, committer, "append", fmt, ["day"], True, commits, []
        )
        check_journal(written, "journal", location, job.job_id)
        saved = [k for k in list_keys(s3, dest.dir) if k.endswith(".pendingset")]
        assert saved
        for key in saved:
            body = s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()
            check_pendingset(PendingSet.from_json(body), key, location, job.job_id)
    finally:
        job_committer.abort_job(messages)
