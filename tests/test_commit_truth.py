"""Job commit never trusts a completion's answer alone, and its rollback tells the truth.

Once a completion request was sent its file may be visible, whatever the answer said. These tests
make completions answer wrongly or fail (before or after they were applied) during a ``replace``
job over existing data; afterwards the destination is exactly as before, or the error lists
exactly what is visible, and a listing checks it. They run on both servers (moto and Ceph RGW,
whose completion answers carry no ETag at all).
"""

from __future__ import annotations

import pandas as pd
import pytest
from conftest import BUCKET, differs_on, list_keys, pending_uploads, read_back

from s3commit_sdk import CommitError, StoreError, write_committed
from s3commit_sdk.committers.exclusive import honours_conditional_create
from s3commit_sdk.paths import parse_s3_url
from s3commit_sdk.recovery import abort
from s3commit_sdk.store import S3Settings
from s3commit_sdk.testing.faultproxy import (
    BOGUS_ETAG,
    FaultProxy,
    ignore_conditions,
    internal_error,
    slow_down,
    wrong_etag,
)

pytestmark = pytest.mark.fault

COMMITTERS = ["directory", "partitioned", "magic"]


def frame(n: int, tag: str) -> pd.DataFrame:
    return pd.DataFrame({"id": range(n), "tag": [tag] * n, "day": [f"d{i % 2}" for i in range(n)]})


def state(s3, dest) -> dict[str, str]:
    """Every object under the destination, hidden ones included, with its ETag."""
    return {k: s3.head_object(Bucket=BUCKET, Key=k)["ETag"] for k in list_keys(s3, dest.dir)}


def old_data(s3, dest) -> dict[str, str]:
    write_committed(frame(40, "old"), dest.url, committer="partitioned", partition_by=["day"])
    return state(s3, dest)


def replace(proxy, dest, committer: str, **options):
    partition_by = [] if committer == "directory" else ["day"]
    return write_committed(
        frame(30, "new"),
        dest.url,
        committer=committer,
        partition_by=partition_by,
        conflict_mode="replace",
        options={"endpoint": proxy.endpoint, "tasks": 3, **options},
        progress=False,
    )


def assert_untouched(s3, s3_server, dest, before: dict[str, str]) -> None:
    assert state(s3, dest) == before  # the same keys with the same ETags: nothing else left
    assert pending_uploads(s3, dest.dir) == []
    assert {r[2] for r in read_back(s3_server, dest.prefix)} == {"old"}  # (day, id, tag)


def assert_fields(error: CommitError, dest, visible: str, remedy: str | None) -> None:
    """The error's fields agree with its text and with the listing the test makes after it."""
    assert error.destination == dest.url
    assert error.job_id and error.job_id in str(error)
    assert (error.visible, error.remedy) == (visible, remedy)


@pytest.mark.parametrize("committer", COMMITTERS)
def test_wrong_etag_in_a_completion_answer_is_checked(proxy, s3, dest, committer):
    old_data(s3, dest)
    proxy.set_rules([wrong_etag("CompleteMultipartUpload", occurrences=[2])])
    result = replace(proxy, dest, committer)
    checks = result.success["completionChecks"]
    assert checks.get("answered", 0) < len(result.files)  # the wrong answer was checked
    assert sum(checks.values()) == len(result.files)
    for entry in result.success["files"]:
        real = s3.head_object(Bucket=BUCKET, Key=entry["key"])["ETag"]
        assert entry["etag"] == real != BOGUS_ETAG  # the verified ETag, not the answer's
    assert result.rows == 30 and pending_uploads(s3, dest.dir) == []


@pytest.mark.parametrize("committer", COMMITTERS)
def test_object_not_what_the_task_uploaded_rolls_back(proxy, s3, s3_server, dest, committer):
    before = old_data(s3, dest)
    # the answer, every HEAD and every listing disagree with the parts: no object verifies
    proxy.set_rules(
        [wrong_etag(op) for op in ("CompleteMultipartUpload", "HeadObject", "ListObjectsV2")]
    )
    with pytest.raises(CommitError, match="is not what the task uploaded") as info:
        replace(proxy, dest, committer)
    assert "Nothing of this job is visible (checked:" in str(info.value)
    assert_fields(info.value, dest, visible="nothing", remedy=None)
    assert_untouched(s3, s3_server, dest, before)


@pytest.mark.parametrize("after", [False, True], ids=["refused", "applied-then-500"])
@pytest.mark.parametrize("committer", COMMITTERS)
def test_kth_of_n_completions_failing_rolls_back(proxy, s3, s3_server, dest, committer, after):
    """The 3rd completion fails for good (no retries); ``after``: it was applied first."""
    before = old_data(s3, dest)
    proxy.set_rules([internal_error("CompleteMultipartUpload", occurrences=[3], after=after)])
    with pytest.raises(CommitError, match="job was rolled back") as info:
        replace(proxy, dest, committer, **{"threads": 1, "retry.max-attempts": 1})
    # completions 1-3 were sent, 4+ never started; all three keys were removed again
    assert "none of the 3 completed keys is listed" in str(info.value)
    assert proxy.counts["CompleteMultipartUpload"] == 3
    assert_untouched(s3, s3_server, dest, before)


def test_failed_rollback_names_what_is_visible_and_abort_undoes_it(proxy, s3, s3_server, dest):
    before = old_data(s3, dest)
    # the once-per-process conditional-PUT check of the proxy's endpoint (its probe ends with a
    # DeleteObjects) happens before the rules below, whichever test ran first
    assert honours_conditional_create(S3Settings(proxy.endpoint), parse_s3_url(dest.url))
    proxy.set_rules(
        [
            internal_error("CompleteMultipartUpload", occurrences=[3]),
            internal_error("DeleteObjects"),  # the rollback cannot delete anything
        ]
    )
    with pytest.raises(CommitError) as info:
        replace(proxy, dest, "partitioned", **{"threads": 1, "retry.max-attempts": 1})
    message = str(info.value)
    visible_now = [k for k in state(s3, dest) if k not in before and "/__" not in k]
    assert len(visible_now) == 2  # completions 1 and 2 landed, 3 failed
    assert "2 files of this job are visible" in message
    assert all(repr(k) in message for k in visible_now)
    assert f"s3commit abort {dest.url}" in message and "stays locked" in message
    assert_fields(info.value, dest, visible="some", remedy=f"s3commit abort {dest.url}")
    proxy.reset()
    report = abort(dest.url)
    assert sorted(report.deleted) == sorted(visible_now)
    assert_untouched(s3, s3_server, dest, before)


def test_throttling_storm_commits_in_ten_of_ten_runs(proxy, s3, s3_server, dest):
    """A quarter of all requests, data and metadata alike, answered 503 SlowDown."""
    expected = sorted(tuple(str(v) for v in r) for r in frame(30, "new").itertuples(index=False))
    for run in range(10):
        committer = COMMITTERS[run % 3]
        proxy.reset()
        proxy.set_rules([slow_down("*", probability=0.25)], seed=f"storm-{run}")
        target = dest.url + f"/run{run}"
        result = write_committed(
            frame(30, "new"),
            target,
            committer=committer,
            partition_by=["day"],
            options={"endpoint": proxy.endpoint, "tasks": 3},
            progress=False,
        )
        assert len(proxy.events) >= 5, "the storm did not happen"
        assert result.success["retries"]["throttled"] > 0
        rows = read_back(s3_server, f"{dest.prefix}/run{run}")
        assert sorted((r[1], r[2], r[0]) for r in rows) == expected
        assert pending_uploads(s3, dest.dir) == []
        assert [k for k in list_keys(s3, dest.dir + f"run{run}/") if "/__" in k] == []


def test_store_ignoring_if_none_match_is_refused_before_anything_is_written(s3_server, s3, dest):
    # a proxy of its own: a new endpoint, so this process has not checked it yet
    with FaultProxy(s3_server.endpoint, [ignore_conditions("PutObject")]) as proxy:
        options = {"endpoint": proxy.endpoint}
        with pytest.raises(StoreError, match="ignores `If-None-Match: \\*`"):
            write_committed(frame(10, "x"), dest.url, options=options, progress=False)
        assert list_keys(s3, dest.dir) == [] and pending_uploads(s3, dest.dir) == []
        # the documented weaker mode, for a single writer per destination
        result = write_committed(
            frame(10, "x"),
            dest.url,
            options={**options, "exclusive.commit": "unchecked"},
            progress=False,
        )
    assert result.rows == 10 and len(read_back(s3_server, dest.prefix)) == 10


def test_every_completion_is_verified_once_and_counted(s3_server, dest):
    """``validate.output`` checks every file (a listing per directory holding several, else a
    HEAD); without it only answers that cannot be trusted are (all of them on RGW).
    ``completionChecks`` says how each file was accepted."""
    plain = write_committed(frame(30, "new"), dest.url + "/plain", partition_by=["day"])
    checked = write_committed(
        frame(30, "new"),
        dest.url + "/checked",
        partition_by=["day"],
        options={"validate.output": True},
    )
    checks, plain_checks = checked.success["completionChecks"], plain.success["completionChecks"]
    assert "answered" not in checks and sum(checks.values()) == len(checked.files)
    if differs_on(s3_server, "rgw", "every completion answers an empty ETag"):
        assert "answered" not in plain_checks
        assert plain_checks == checks  # the same checks either way
    else:
        assert plain_checks == {"answered": len(plain.files)}
    # one HEAD per file checked by HEAD, one listing per directory checked by listing
    days = {f.partition["day"]: 0 for f in checked.files}
    for f in checked.files:
        days[f.partition["day"]] += 1
    assert checks.get("headed", 0) == sum(n for n in days.values() if n == 1)
    assert checks.get("listed", 0) == sum(n for n in days.values() if n > 1)
