"""The ``s3commit`` CLI against the real moto server: list, abort, expect, success, lifecycle.

Commands run in-process through ``main([...])``; one test runs the installed console script.
moto reports every upload as initiated at one fixed moment in 2010, so age filters are tested
with an injected clock (``now=``) relative to that moment.
"""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pandas as pd
import pytest
from conftest import BUCKET, pending_uploads

from s3commit_sdk import write_committed
from s3commit_sdk.cli import EXIT_EXPECT_MISMATCH, main
from s3commit_sdk.errors import InvalidArgumentError
from s3commit_sdk.store import PendingUploadInfo
from s3commit_sdk.uploads import (
    filter_uploads,
    format_duration,
    job_of_key,
    lifecycle_warning,
    parse_duration,
)

JOB = "0b1e8f0e-1111-4222-8333-444455556666"
OTHER = str(uuid.UUID(int=42))  # 00000000-0000-0000-0000-00000000002a
FAKE_SECRET = "FAKESECRET-s3commit-cli-9f3e1c"


class Uploads:
    """Pending uploads this test created; whatever is left is aborted at teardown."""

    def __init__(self, s3) -> None:
        self.s3 = s3
        self.created: dict[str, str] = {}  # key -> upload id

    def start(self, *keys: str) -> dict[str, str]:
        for key in keys:
            self.created[key] = self.s3.create_multipart_upload(Bucket=BUCKET, Key=key)["UploadId"]
        return dict(self.created)

    def pending(self, prefix: str) -> dict[str, str]:
        return {u["Key"]: u["UploadId"] for u in pending_uploads(self.s3, prefix)}

    def cleanup(self) -> None:
        for key, upload_id in self.created.items():
            with contextlib.suppress(self.s3.exceptions.NoSuchUpload):
                self.s3.abort_multipart_upload(Bucket=BUCKET, Key=key, UploadId=upload_id)


@pytest.fixture
def uploads(s3, dest):
    tracker = Uploads(s3)
    yield tracker
    tracker.cleanup()  # runs before ``dest`` checks that nothing is left pending


@pytest.fixture
def three(uploads, dest) -> dict[str, str]:
    """Two uploads of JOB (one in a partition directory) and one of OTHER under ``dest``."""
    return uploads.start(
        f"{dest.dir}part-00000-{JOB}-c000.snappy.parquet",
        f"{dest.dir}day=2026-01-01/part-00001-{JOB}.c000.snappy.parquet",
        f"{dest.dir}part-00000-{OTHER}-c000.snappy.parquet",
    )


def initiated(s3, prefix: str) -> datetime:
    """The initiation time the store reports (moto: one fixed moment for every upload)."""
    return pending_uploads(s3, prefix)[0]["Initiated"]


def run(capsys, *argv: str, now: datetime | None = None) -> tuple[int, str, str]:
    code = main(list(argv), now=now)
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


# -- pure helpers ------------------------------------------------------------------------------
def test_parse_duration():
    assert parse_duration("24h") == timedelta(hours=24)
    assert parse_duration("1d12h") == timedelta(hours=36)
    assert parse_duration("90m") == timedelta(minutes=90)
    assert parse_duration("1h 30s") == timedelta(hours=1, seconds=30)
    assert parse_duration("2D") == timedelta(days=2)
    for bad in ("24", "h", "1y", "", "-1h", "1h-"):
        with pytest.raises(InvalidArgumentError, match="units"):
            parse_duration(bad)
    assert format_duration(timedelta(days=3, hours=4, minutes=5)) == "3d 4h"
    assert format_duration(timedelta(seconds=65)) == "1m 5s"
    assert format_duration(timedelta(0)) == "0s"


def test_job_of_key():
    assert job_of_key(f"out/part-00003-{JOB}-c000.snappy.parquet") == JOB
    assert job_of_key(f"out/d=1/part-00003-{JOB.upper()}.c001.csv") == JOB
    assert job_of_key("out/d=1/data.parquet") is None
    # a UUID anywhere else in the key names no job of ours
    assert job_of_key(f"out/{JOB}/data.parquet") is None
    assert job_of_key(f"out/notes-{JOB}.txt") is None
    assert job_of_key(f"out/part-00003-{JOB}-c000.parquet/other") is None


def test_filter_uploads_by_age_and_job():
    now = datetime(2026, 1, 2, 12, 0, tzinfo=timezone.utc)
    fresh = PendingUploadInfo(f"a/part-0-{JOB}-c000", "u1", now - timedelta(minutes=5))
    old = PendingUploadInfo(f"a/part-1-{JOB}-c000", "u2", now - timedelta(days=2))
    naive_old = PendingUploadInfo(f"a/part-2-{OTHER}-c000", "u3", datetime(2025, 12, 1))
    unknown = PendingUploadInfo("a/x", "u4", None)
    everything = [fresh, old, naive_old, unknown]
    assert filter_uploads(everything, now=now) == everything
    assert filter_uploads(everything, older_than=timedelta(hours=1), now=now) == [old, naive_old]
    assert filter_uploads(everything, older_than=timedelta(days=3), now=now) == [naive_old]
    assert filter_uploads(everything, job=JOB, now=now) == [fresh, old]
    assert filter_uploads(everything, job=JOB, older_than=timedelta(days=1), now=now) == [old]
    with pytest.raises(InvalidArgumentError, match="job UUID"):
        filter_uploads(everything, job="not-a-uuid")


def test_lifecycle_warning():
    assert lifecycle_warning(2, timedelta(hours=36)) is None
    assert lifecycle_warning(3, None) is None
    assert "1d 12h" in lifecycle_warning(1, timedelta(hours=36))
    assert lifecycle_warning(1, timedelta(days=1)) is not None  # no margin at all


# -- uploads list / expect ---------------------------------------------------------------------
def test_list_text(capsys, s3, dest, three):
    day = initiated(s3, dest.dir).strftime("%Y-%m-%d")  # moto: 2010-11-10 for every upload
    code, out, _ = run(capsys, "uploads", "list", dest.url)
    assert code == 0
    for key, upload_id in three.items():
        line = next(line for line in out.splitlines() if line.startswith(key))
        assert upload_id in line
        assert (OTHER if OTHER in key else JOB) in line
        assert day in line
    assert f"3 pending upload(s) under s3://{BUCKET}/{dest.dir}" in out


def test_list_json_with_injected_clock(capsys, s3, dest, three):
    now = initiated(s3, dest.dir) + timedelta(hours=2)
    code, out, _ = run(capsys, "uploads", "list", dest.url, "--json", now=now)
    assert code == 0
    listed = json.loads(out)
    assert {u["key"]: u["uploadId"] for u in listed} == three
    for entry in listed:
        assert entry["bucket"] == BUCKET
        assert entry["job"] == (OTHER if OTHER in entry["key"] else JOB)
        # RGW's listings report an upload's initiation time a few milliseconds apart from one
        # listing to the next; moto reports whole seconds, and the three uploads may straddle
        # one (``now`` is 2 h after the first one's)
        assert 7199 <= entry["ageSeconds"] <= 7200
        drift = datetime.fromisoformat(entry["initiated"]) - (now - timedelta(hours=2))
        assert abs(drift) <= timedelta(seconds=1)


def test_job_filter(capsys, dest, three):
    code, out, _ = run(capsys, "uploads", "list", dest.url, "--json", "--job", JOB.upper())
    assert code == 0
    assert sorted(u["key"] for u in json.loads(out)) == sorted(k for k in three if JOB in k)
    code, out, _ = run(capsys, "uploads", "list", dest.url, "--json", "--job", OTHER)
    assert [u["key"] for u in json.loads(out)] == [k for k in three if OTHER in k]
    code, _, err = run(capsys, "uploads", "list", dest.url, "--job", "12345")
    assert code == 2
    assert "job UUID" in err


def test_age_filter_with_injected_clock(capsys, s3, dest, three):
    start = initiated(s3, dest.dir)
    later = start + timedelta(hours=3)

    def listed(older_than: str, now: datetime) -> int:
        code, out, _ = run(
            capsys, "uploads", "list", dest.url, "--json", "--older-than", older_than, now=now
        )
        assert code == 0
        return len(json.loads(out))

    assert listed("2h", later) == 3
    assert listed("2h59m", later) == 3
    assert listed("3h1s", later) == 0
    assert listed("1d", later) == 0
    assert listed("1d", start + timedelta(days=1, hours=2)) == 3
    expect = ("uploads", "expect", dest.url, "0", "--older-than", "4h")
    assert run(capsys, *expect, now=later)[0] == 0


def test_expect_exit_codes(capsys, dest, three):
    assert run(capsys, "uploads", "expect", dest.url, "3")[0] == 0
    code, out, _ = run(capsys, "uploads", "expect", dest.url, "2")
    assert code == EXIT_EXPECT_MISMATCH == 46
    assert "found 3" in out
    assert run(capsys, "uploads", "expect", dest.url, "2", "--job", JOB)[0] == 0
    assert run(capsys, "uploads", "expect", dest.url, "0", "--job", str(uuid.uuid4()))[0] == 0


# -- uploads abort -----------------------------------------------------------------------------
def test_abort_force_with_job_filter(capsys, dest, uploads, three):
    code, out, _ = run(capsys, "uploads", "abort", dest.url, "--job", JOB, "--force")
    assert code == 0
    assert "aborted 2 pending upload(s)" in out
    for key, upload_id in three.items():
        if JOB in key:
            assert f"aborted: {key} (upload {upload_id})" in out
    assert uploads.pending(dest.dir) == {k: v for k, v in three.items() if OTHER in k}
    assert run(capsys, "uploads", "abort", dest.url, "--force")[0] == 0
    assert uploads.pending(dest.dir) == {}
    code, out, _ = run(capsys, "uploads", "abort", dest.url, "--force")
    assert code == 0
    assert "nothing to abort" in out


@pytest.mark.parametrize("job", ["", "part", JOB[:8], JOB + "0"], ids=["empty", "word", "8", "37"])
@pytest.mark.fault
def test_job_must_be_a_full_uuid(capsys, dest, uploads, three, job):
    """``--job ""`` (an empty shell variable) used to select, and abort, every upload."""
    for argv in (
        ("uploads", "abort", dest.url, "--force", "--job", job),
        ("uploads", "list", dest.url, "--job", job),
        ("uploads", "expect", dest.url, "0", "--job", job),
    ):
        code, _, err = run(capsys, *argv)
        assert code == 2 and "full job UUID" in err, argv
    assert uploads.pending(dest.dir) == three
    with pytest.raises(InvalidArgumentError, match="full job UUID"):
        filter_uploads([], job=job)


@pytest.mark.parametrize("stdin", [None, ""], ids=["no-stdin", "empty-stdin"])
def test_abort_refuses_without_force_or_answer(capsys, monkeypatch, dest, uploads, three, stdin):
    monkeypatch.setattr(sys, "stdin", None if stdin is None else io.StringIO(stdin))
    code, _, err = run(capsys, "uploads", "abort", dest.url)
    assert code != 0
    assert "refusing to abort 3 pending upload(s)" in err
    assert "--force" in err
    assert uploads.pending(dest.dir) == three


def test_abort_asks_and_obeys(capsys, monkeypatch, dest, uploads, three):
    monkeypatch.setattr(sys, "stdin", io.StringIO("no\n"))
    code, out, _ = run(capsys, "uploads", "abort", dest.url)
    assert code != 0
    assert "(yes/no)" in out
    assert "nothing aborted" in out
    assert uploads.pending(dest.dir) == three

    monkeypatch.setattr(sys, "stdin", io.StringIO("yes\n"))
    code, out, _ = run(capsys, "uploads", "abort", dest.url)
    assert code == 0
    assert "aborted 3 pending upload(s)" in out
    assert uploads.pending(dest.dir) == {}


def test_sibling_prefix_is_never_touched(capsys, dest, uploads):
    ds1 = f"{dest.dir}ds1/part-00000-{JOB}-c000.snappy.parquet"
    ds10 = f"{dest.dir}ds10/part-00000-{JOB}-c000.snappy.parquet"
    uploads.start(ds1, ds10)
    code, out, _ = run(capsys, "uploads", "list", f"{dest.url}/ds1", "--json")
    assert [u["key"] for u in json.loads(out)] == [ds1]
    assert run(capsys, "uploads", "expect", f"{dest.url}/ds1", "1")[0] == 0
    code, out, _ = run(capsys, "uploads", "abort", f"{dest.url}/ds1", "--force", "--job", JOB)
    assert code == 0
    assert ds10 not in out
    assert list(uploads.pending(dest.dir)) == [ds10]
    assert run(capsys, "uploads", "expect", f"{dest.url}/ds10/", "1")[0] == 0


# -- success -----------------------------------------------------------------------------------
def test_success_report_of_a_real_write(capsys, dest):
    frame = pd.DataFrame({"n": range(30), "day": ["a", "b", "c"] * 10})
    result = write_committed(frame, dest.url, partition_by=["day"], options={"tasks": 2})
    code, out, _ = run(capsys, "success", dest.url)
    assert code == 0
    assert f"_SUCCESS of s3://{BUCKET}/{dest.prefix}" in out
    assert result.job_id in out
    assert "partitioned" in out
    assert "30 rows" in out
    for day in "abc":
        assert any(line.startswith(f"day={day} ") for line in out.splitlines())
    code, out, _ = run(capsys, "success", dest.url, "--json")
    assert code == 0
    assert json.loads(out) == json.loads(result.success.to_json())


def test_success_of_the_classic_committer_and_missing(capsys, s3, dest):
    code, _, err = run(capsys, "success", dest.url)
    assert code == 1
    assert f"no _SUCCESS at s3://{BUCKET}/{dest.dir}_SUCCESS" in err
    s3.put_object(Bucket=BUCKET, Key=f"{dest.dir}_SUCCESS", Body=b"")
    code, out, _ = run(capsys, "success", dest.url)
    assert code == 0
    assert "classic committer" in out
    assert run(capsys, "success", dest.url, "--json")[1].strip() == "null"
    code, _, err = run(capsys, "success", "s3://no-such-bucket-s3commit/x")
    assert code == 1
    assert "does not exist" in err


# -- lifecycle ---------------------------------------------------------------------------------
@pytest.fixture
def lifecycle_restored(s3):
    """Put the shared bucket's lifecycle configuration back as it was."""
    try:
        before = s3.get_bucket_lifecycle_configuration(Bucket=BUCKET)["Rules"]
    except s3.exceptions.ClientError:
        before = None
    yield
    if before is None:
        s3.delete_bucket_lifecycle(Bucket=BUCKET)
    else:
        s3.put_bucket_lifecycle_configuration(
            Bucket=BUCKET, LifecycleConfiguration={"Rules": before}
        )


def test_lifecycle_rule_installed_merged_and_warned(capsys, s3, dest, lifecycle_restored):
    other = {
        "ID": "keep-me",
        "Status": "Enabled",
        "Filter": {"Prefix": "logs/"},
        "Expiration": {"Days": 30},
    }
    s3.put_bucket_lifecycle_configuration(Bucket=BUCKET, LifecycleConfiguration={"Rules": [other]})

    code, out, err = run(
        capsys, "lifecycle", dest.url, "--abort-incomplete-days", "2", "--longest-job", "36h"
    )
    assert code == 0
    assert "1 other rule(s) kept" in out
    assert "warning" not in err  # 2 days > 36h
    code, out, err = run(
        capsys, "lifecycle", dest.url, "--abort-incomplete-days", "1", "--longest-job", "36h"
    )
    assert code == 0
    assert "warning" in err
    assert "1d 12h" in err

    rules = s3.get_bucket_lifecycle_configuration(Bucket=BUCKET)["Rules"]
    assert other in rules
    ours = [r for r in rules if r.get("Filter", {}).get("Prefix") == dest.dir]
    assert len(ours) == 1  # updated in place, not added twice
    assert ours[0]["Status"] == "Enabled"
    assert ours[0]["AbortIncompleteMultipartUpload"] == {"DaysAfterInitiation": 1}
    assert len(rules) == 2


# -- errors, credentials, the console script ---------------------------------------------------
def test_usage_errors_exit_2(capsys):
    assert run(capsys, "uploads", "list", "http://bucket/x")[0] == 2
    assert run(capsys, "uploads", "list", "s3:///nobucket")[0] == 2
    assert run(capsys, "uploads", "list")[0] == 2
    assert run(capsys, "uploads", "list", "s3://b/x", "--older-than", "24")[0] == 2
    assert run(capsys, "uploads", "expect", "s3://b/x", "-1")[0] == 2
    assert run(capsys, "lifecycle", "s3://b/x", "--abort-incomplete-days", "0")[0] == 2
    assert run(capsys, "frobnicate")[0] == 2
    assert run(capsys, "--help")[0] == 0


def test_credentials_never_printed(capsys, monkeypatch, s3_server, dest, three):
    access_key = "S3COMMITCLITEST"
    s3_server.add_key(access_key, FAKE_SECRET)  # RGW checks signatures; moto accepts any
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", FAKE_SECRET)
    outputs = []
    for argv in (
        ("uploads", "list", dest.url),
        ("uploads", "list", dest.url, "--json"),
        ("uploads", "expect", dest.url, "7"),
        ("success", dest.url),
        ("success", "s3://no-such-bucket-s3commit/x"),
    ):
        _, out, err = run(capsys, *argv)
        outputs.append(out + err)
    assert len(json.loads(outputs[1])) == 3  # the secret really was in use
    assert not any(FAKE_SECRET in text for text in outputs)


@pytest.mark.parametrize("command", ["recover", "abort"])
def test_recover_and_abort_name_a_missing_bucket(capsys, s3, command):
    code, out, err = run(capsys, command, "s3://no-such-bucket-s3commit/x")
    assert code == 1
    assert "bucket 'no-such-bucket-s3commit' does not exist" in err
    assert "no unfinished commit" not in out


def test_credentials_in_a_url_are_refused_unrepeated(capsys, s3_server):
    secret = "URLSECRET-s3commit-7d1f"
    port = s3_server.endpoint.rsplit(":", 1)[1]
    for argv in (
        ("uploads", "list", f"s3://AKIAEXAMPLE:{secret}@{BUCKET}/x"),
        ("recover", f"s3a://AKIAEXAMPLE:{secret}/with-slash@{BUCKET}/x"),
        ("abort", f"s3://AKIAEXAMPLE@{BUCKET}/x", "--dry-run"),
        ("success", f"s3://{BUCKET}/x", "--endpoint", f"http://user:{secret}@127.0.0.1:{port}"),
    ):
        code, out, err = run(capsys, *argv)
        assert code == 2 and "credentials" in err, argv
        assert secret not in out + err and "AKIAEXAMPLE" not in out + err


def test_console_script_refuses_abort_without_stdin(dest, uploads, three):
    script = Path(sys.executable).with_name("s3commit")
    done = subprocess.run(
        [str(script), "uploads", "abort", dest.url],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert "--force" in done.stderr
    assert "Traceback" not in done.stderr
    for key in three:
        assert key in done.stdout  # it listed what it would have aborted
    assert uploads.pending(dest.dir) == three
