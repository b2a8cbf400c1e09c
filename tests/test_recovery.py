"""A driver killed at each step of job commit: ``recover`` rolls forward, ``abort`` rolls back.

The driver runs in a subprocess that talks to S3 through the fault-injecting proxy. The proxy
holds the n-th request of one operation; once it arrives the test SIGKILLs the driver, so the
request never lands. Then recovery must reach exactly the state of a clean run (byte for byte)
or of no run at all, with zero pending uploads either way, and be idempotent.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import BUCKET, list_keys, pending_uploads, read_back
from crash_driver import data, run

from s3commit_sdk import CommitError
from s3commit_sdk.cli import main as cli
from s3commit_sdk.errors import StoreError
from s3commit_sdk.recovery import abort, recover
from s3commit_sdk.testing.faultproxy import delay, hold, ignore_deletes

pytestmark = pytest.mark.fault

DRIVER = Path(__file__).with_name("crash_driver.py")
OLD_DAYS, NEW_DAYS = ["d1", "d2"], ["d2", "d3"]
# (operation, occurrence): where the driver dies. With threads=1 and 3 tasks x 2 days there are
# 6 completions; DeleteObjects 1 removes the driver process's conditional-PUT probe (job
# setup), 2 is the replace delete, 3 the metadata cleanup, 4 the release.
CRASH_POINTS = {
    "after-journal": ("CompleteMultipartUpload", 1),
    "after-2-of-6-completions": ("CompleteMultipartUpload", 3),
    "before-replace-deletes": ("DeleteObjects", 2),
    "before-cleanup": ("DeleteObjects", 3),
    "after-success": ("DeleteObjects", 4),
}


def spec(dest_url: str, committer: str, seed: int, days: list[str], endpoint: str | None):
    options = {"tasks": 3, "threads": 1}
    if endpoint:
        options["endpoint"] = endpoint
    return {
        "dest": dest_url,
        "committer": committer,
        "seed": seed,
        "days": days,
        "options": options,
    }


def state(s3, prefix: str) -> dict[str, str]:
    """Visible objects and their ETags."""
    return {
        k: s3.head_object(Bucket=BUCKET, Key=k)["ETag"]
        for k in list_keys(s3, prefix + "/")
        if not any(seg[:1] in "_." for seg in k[len(prefix) + 1 :].split("/"))
    }


def bodies(s3, keys) -> list[bytes]:
    return sorted(s3.get_object(Bucket=BUCKET, Key=k)["Body"].read() for k in keys)


def crash(proxy, job_spec: dict, operation: str, occurrence: int) -> None:
    proxy.set_rules([delay(60_000, operation, occurrences=[occurrence])])
    env = {**os.environ, "PYTHONPATH": str(DRIVER.parent)}
    child = subprocess.Popen([sys.executable, str(DRIVER), json.dumps(job_spec)], env=env)
    try:
        deadline = time.monotonic() + 60
        while proxy.counts.get(operation, 0) < occurrence:
            assert child.poll() is None, "the driver ended before the crash point"
            assert time.monotonic() < deadline, f"no {operation} #{occurrence} within 60 s"
            time.sleep(0.02)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    proxy.reset()


@pytest.fixture
def crashed(request, proxy, s3, dest):
    """Old data, then a replacing job killed at the chosen point; yields the state before."""
    committer, point = request.param
    run(spec(dest.url, committer, 1, OLD_DAYS, None))
    before = state(s3, dest.prefix)
    crash(proxy, spec(dest.url, committer, 2, NEW_DAYS, proxy.endpoint), *CRASH_POINTS[point])
    assert list_keys(s3, dest.dir + "__s3commit/COMMIT_IN_PROGRESS")  # really unfinished
    return committer, point, before


MATRIX = [(c, p) for c in ("partitioned", "magic") for p in CRASH_POINTS]


def expected_rows():
    old, new = data(1, OLD_DAYS), data(2, NEW_DAYS)
    merged = [*old[old.day == "d1"].itertuples(index=False), *new.itertuples(index=False)]
    return sorted((r.day, str(r.id), r.name) for r in merged)  # read_back sorts the columns


@pytest.mark.parametrize("crashed", MATRIX, indirect=True, ids=[f"{c}-{p}" for c, p in MATRIX])
def test_recover_rolls_forward_to_a_clean_run(crashed, s3, s3_server, dest):
    committer = crashed[0]
    report = recover(dest.url)
    assert report.job_id is not None
    # a clean run of the same job, for comparison
    run(spec(dest.url + "-clean", committer, 1, OLD_DAYS, None))
    run(spec(dest.url + "-clean", committer, 2, NEW_DAYS, None))
    clean = state(s3, dest.prefix + "-clean")
    recovered = state(s3, dest.prefix)
    assert bodies(s3, recovered) == bodies(s3, clean)
    assert sorted(k.split("/")[-2] for k in recovered) == sorted(k.split("/")[-2] for k in clean)
    assert read_back(s3_server, dest.prefix) == expected_rows()
    success = json.loads(s3.get_object(Bucket=BUCKET, Key=dest.dir + "_SUCCESS")["Body"].read())
    assert success["jobId"] == report.job_id and success["committer"] == committer
    # the committed tasks' pendingsets stand in for their lost messages, as in a clean run
    assert sorted(success["taskDurations"]) == ["task_00000", "task_00001", "task_00002"]
    assert success["requests"]["UploadPart"] >= 3  # sent by the tasks, counted in their sets
    assert [k for k in list_keys(s3, dest.dir) if "/__" in k] == []
    assert pending_uploads(s3, dest.dir) == []
    assert recover(dest.url).job_id is None  # idempotent: nothing left to do
    assert state(s3, dest.prefix) == recovered
    s3.delete_objects(
        Bucket=BUCKET,
        Delete={"Objects": [{"Key": k} for k in list_keys(s3, dest.prefix + "-clean/")]},
    )


@pytest.mark.parametrize("crashed", MATRIX, indirect=True, ids=[f"{c}-{p}" for c, p in MATRIX])
def test_abort_rolls_back(crashed, s3, dest):
    _, point, before = crashed
    report = abort(dest.url)
    assert report.job_id is not None
    after = state(s3, dest.prefix)
    if point in ("before-cleanup", "after-success"):
        # replace had already deleted d2's old files: abort cannot bring them back, says so
        assert any("cannot be restored" in n for n in report.notes)
        assert after == {k: v for k, v in before.items() if "/day=d2/" not in k}
    else:
        assert after == before
    assert [k for k in list_keys(s3, dest.dir) if "/__" in k] == []
    assert pending_uploads(s3, dest.dir) == []
    assert abort(dest.url).job_id is None


@pytest.mark.parametrize("crashed", [("partitioned", "after-2-of-6-completions")], indirect=True)
def test_tampered_journal(crashed, s3, dest, capsys):
    """recover refuses and changes nothing; abort deletes the job's visible files only when
    told to (it lists them first), and cleans every upload of the job."""
    _, _, before = crashed
    journals = [k for k in list_keys(s3, dest.dir + "__s3commit/") if k.endswith("journal.json")]
    body = s3.get_object(Bucket=BUCKET, Key=journals[0])["Body"].read()
    doc = json.loads(body)
    doc["commits"][0]["destinationKey"] = "elsewhere/evil.parquet"
    s3.put_object(Bucket=BUCKET, Key=journals[0], Body=json.dumps(doc).encode())
    visible, uploads = state(s3, dest.prefix), pending_uploads(s3, dest.dir)
    assert uploads  # the commit was interrupted with uploads still pending
    with pytest.raises(CommitError, match="does not lie under the destination"):
        recover(dest.url)
    assert cli(["recover", dest.url]) == 1
    err = capsys.readouterr().err
    assert "Nothing was changed" in err
    assert err.splitlines()[-1] == f"s3commit: next: s3commit abort {dest.url}"
    assert state(s3, dest.prefix) == visible and pending_uploads(s3, dest.dir) == uploads
    assert cli(["abort", dest.url]) == 1  # the 2 completed files: no journal vouches for them
    out, err = capsys.readouterr()
    assert "journal not usable" in out and "Nothing was changed" in err
    assert state(s3, dest.prefix) == visible and pending_uploads(s3, dest.dir) == uploads
    assert cli(["abort", dest.url, "--delete-visible"]) == 0
    out = capsys.readouterr().out
    new_files = sorted(set(visible) - set(before))
    assert len(new_files) == 2 and all(f"s3://{BUCKET}/{k}" in out for k in new_files)
    assert state(s3, dest.prefix) == before
    assert pending_uploads(s3, dest.dir) == []
    assert [k for k in list_keys(s3, dest.dir) if "/__" in k] == []


@pytest.mark.parametrize("crashed", [("magic", "after-journal")], indirect=True)
def test_truncated_journal(crashed, s3, dest):
    _, _, before = crashed
    journal = next(k for k in list_keys(s3, dest.dir) if k.endswith("journal.json"))
    body = s3.get_object(Bucket=BUCKET, Key=journal)["Body"].read()
    s3.put_object(Bucket=BUCKET, Key=journal, Body=body[: len(body) // 2])
    with pytest.raises(CommitError, match="malformed commit journal"):
        recover(dest.url)
    abort(dest.url)
    assert state(s3, dest.prefix) == before and pending_uploads(s3, dest.dir) == []


def test_nothing_to_recover(s3, dest):
    run(spec(dest.url, "partitioned", 1, OLD_DAYS, None))
    assert recover(dest.url).lines() == [f"no unfinished commit at {dest.url}"]
    assert abort(dest.url).job_id is None


MARKER = "__s3commit/COMMIT_IN_PROGRESS"


def put_marker(s3, dest, job_id: str) -> None:
    """A commit marker with no journal behind it: stale, forged, or its journal lost."""
    journal = f"{dest.dir}__s3commit/{job_id}/journal.json"
    body = json.dumps({"jobId": job_id, "journal": journal}).encode()
    s3.put_object(Bucket=BUCKET, Key=dest.dir + MARKER, Body=body)


def test_abort_refuses_a_marker_naming_no_job_uuid(s3, dest, capsys):
    """``{"jobId": "part"}`` matched every file name; now nothing is chosen by it."""
    run(spec(dest.url, "partitioned", 1, OLD_DAYS, None))
    before = state(s3, dest.prefix)
    put_marker(s3, dest, "part")
    assert cli(["abort", dest.url]) == 1
    err = capsys.readouterr().err
    assert "names job 'part', not a job UUID" in err and "Nothing was changed" in err
    assert state(s3, dest.prefix) == before
    assert list_keys(s3, dest.dir + MARKER)  # still held: the user decides
    s3.delete_object(Bucket=BUCKET, Key=dest.dir + MARKER)


class Terminal(io.StringIO):
    """Answers typed at an interactive prompt."""

    def isatty(self) -> bool:
        return True


def test_abort_without_journal_deletes_no_visible_object_unasked(s3, dest, capsys, monkeypatch):
    """A marker naming the job that wrote the data already there, and no journal: abort lists
    that data and changes nothing until told; --keep-visible then cleans only the job's
    pending upload (named as ours name them) and releases the destination."""
    run(spec(dest.url, "partitioned", 1, OLD_DAYS, None))
    job = json.loads(s3.get_object(Bucket=BUCKET, Key=dest.dir + "_SUCCESS")["Body"].read())
    job_id = job["jobId"]
    before = state(s3, dest.prefix)
    put_marker(s3, dest, job_id)
    named = f"{dest.dir}day=d9/part-00007-{job_id}.c000.snappy.parquet"
    elsewhere = f"{dest.dir}notes/{job_id}.txt"  # the UUID, but not where our names put it
    uploads = {
        k: s3.create_multipart_upload(Bucket=BUCKET, Key=k)["UploadId"] for k in (named, elsewhere)
    }
    try:
        with pytest.raises(CommitError, match="Nothing was changed") as refused:
            abort(dest.url)
        assert f"{dest.dir}_SUCCESS" in str(refused.value) and "--keep-visible" in str(
            refused.value
        )
        assert cli(["abort", dest.url, "--dry-run"]) == 0
        out = capsys.readouterr().out
        assert "dry run: nothing changed" in out
        assert all(f"s3://{BUCKET}/{k}" in out for k in before)
        assert "pending uploads to abort: 1" in out
        assert state(s3, dest.prefix) == before
        assert len(pending_uploads(s3, dest.dir)) == 2

        monkeypatch.setattr(sys, "stdin", Terminal("no\n"))
        assert cli(["abort", dest.url, "--delete-visible"]) == 1  # asked at a terminal
        out = capsys.readouterr().out
        assert "Delete these 5 visible object(s)? (yes/no)" in out and "nothing changed" in out
        assert state(s3, dest.prefix) == before and len(pending_uploads(s3, dest.dir)) == 2

        assert cli(["abort", dest.url, "--keep-visible"]) == 0
        assert "kept visible objects: 5" in capsys.readouterr().out  # 4 files and _SUCCESS
        assert state(s3, dest.prefix) == before
        assert list_keys(s3, dest.dir + "_SUCCESS")
        assert [u["Key"] for u in pending_uploads(s3, dest.dir)] == [elsewhere]
        assert list_keys(s3, dest.dir + "__s3commit/") == []
    finally:
        for key, upload_id in uploads.items():
            if pending_uploads(s3, key):
                s3.abort_multipart_upload(Bucket=BUCKET, Key=key, UploadId=upload_id)
        s3.delete_objects(Bucket=BUCKET, Delete={"Objects": [{"Key": dest.dir + MARKER}]})


# -- recovery runs job commit's own stages: parallel, verified, the same _SUCCESS --------------
def journal_commits(s3, dest) -> list[dict]:
    key = next(k for k in list_keys(s3, dest.dir + "__s3commit/") if k.endswith("journal.json"))
    return json.loads(s3.get_object(Bucket=BUCKET, Key=key)["Body"].read())["commits"]


@pytest.mark.parametrize("crashed", [("partitioned", "after-journal")], indirect=True)
def test_recover_completes_in_parallel(crashed, proxy, s3, dest):
    """Four completions are in flight at once while none has landed: a one-at-a-time loop
    could never have a second one sent before the first was answered."""
    before, files = crashed[2], len(journal_commits(s3, dest))
    assert files >= 4
    proxy.set_rules([hold("CompleteMultipartUpload", occurrences=[1, 2, 3, 4])])
    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(recover, dest.url, {"endpoint": proxy.endpoint, "threads": 4})
        deadline = time.monotonic() + 60
        while proxy.counts.get("CompleteMultipartUpload", 0) < 4:
            assert not running.done(), running.exception()
            assert time.monotonic() < deadline, "fewer than 4 completions ever in flight"
            time.sleep(0.02)
        assert state(s3, dest.prefix) == before  # all four held: none has landed yet
        proxy.release()
        report = running.result(timeout=120)
    assert len(report.completed) == files and report.already_visible == []
    assert pending_uploads(s3, dest.dir) == []


@pytest.mark.parametrize("crashed", [("partitioned", "after-2-of-6-completions")], indirect=True)
def test_recover_verifies_and_records_what_the_store_holds(crashed, s3, dest):
    """Every file is checked as job commit checks it; ``_SUCCESS`` records each object's stored
    ETag, never a completion's answer (RGW answers with an empty one)."""
    files = len(journal_commits(s3, dest))
    report = recover(dest.url)
    assert len(report.completed) == files - 2 and len(report.already_visible) == 2
    success = json.loads(s3.get_object(Bucket=BUCKET, Key=dest.dir + "_SUCCESS")["Body"].read())
    assert len(success["files"]) == files
    for entry in success["files"]:
        stored = s3.head_object(Bucket=BUCKET, Key=entry["key"])["ETag"]
        assert entry["etag"] and entry["etag"].strip('"') == stored.strip('"')
    assert sum(success["completionChecks"].values()) == files  # answered, listed or headed


@pytest.mark.parametrize("crashed", [("partitioned", "after-2-of-6-completions")], indirect=True)
def test_recover_refuses_a_completed_file_that_is_not_the_jobs(crashed, s3, dest):
    """A key the journal names holds other bytes than the job uploaded: recover stops with a
    typed error naming abort, and abort removes the job's files but not the stranger's."""
    before = crashed[2]
    done = [c["destinationKey"] for c in journal_commits(s3, dest) if c["destinationKey"]]
    completed = [k for k in done if k in state(s3, dest.prefix)]
    assert len(completed) == 2
    s3.put_object(Bucket=BUCKET, Key=completed[0], Body=b"not the job's bytes")
    stranger = s3.head_object(Bucket=BUCKET, Key=completed[0])["ETag"]
    with pytest.raises(CommitError, match="not what the task uploaded") as info:
        recover(dest.url)
    assert info.value.visible == "some" and info.value.remedy == f"s3commit abort {dest.url}"
    assert set(state(s3, dest.prefix)) == set(before) | set(done)  # what the error says
    abort(dest.url)
    assert state(s3, dest.prefix) == {**before, completed[0]: stranger}
    assert pending_uploads(s3, dest.dir) == []
    assert [k for k in list_keys(s3, dest.dir) if "/__" in k] == []


@pytest.mark.parametrize("crashed", [("partitioned", "after-2-of-6-completions")], indirect=True)
def test_abort_does_not_trust_a_deleted_answer(crashed, proxy, s3, dest):
    """A store that answers "Deleted" without deleting (the proxy, emulating one that stored
    the key under another name): abort says so instead of reporting the deletions, and a rerun
    on a store that deletes finishes the job's roll back."""
    before = crashed[2]
    visible = state(s3, dest.prefix)
    proxy.set_rules([ignore_deletes()])
    with pytest.raises(StoreError, match="left 2 in place") as info:
        abort(dest.url, {"endpoint": proxy.endpoint})
    assert info.value.code == "DeleteNotConfirmed"
    assert state(s3, dest.prefix) == visible  # nothing was deleted, as the error says
    proxy.reset()
    report = abort(dest.url)
    assert len(report.deleted) == 2 and state(s3, dest.prefix) == before
    assert pending_uploads(s3, dest.dir) == []
