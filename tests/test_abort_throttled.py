"""Aborts that cannot finish say so (issue 27): a failed job's clean-up is retried within the
throttle budget; if uploads of the job are still pending after it, the error names them (how
many, and the first keys) and the command that removes them, and a listing confirms the claim.

Faults come from the fault proxy's SlowDown rule (``testing/faultproxy.py``): a storm on every
request, or aborts refused outright so that some uploads are certainly left.
"""

from __future__ import annotations

import re

import pandas as pd
import pytest
from conftest import list_keys, pending_uploads

from s3commit_sdk import write_committed
from s3commit_sdk.cli import main as cli
from s3commit_sdk.errors import S3CommitError
from s3commit_sdk.testing.faultproxy import slow_down

pytestmark = pytest.mark.fault

COMMITTERS = ("partitioned", "magic", "directory")
#: the options of the probe that found the leak: three attempts per request under throttling
THROTTLED = {"retry.throttle.limit": 3, "retry.throttle.interval": 0.02, "tasks": 3}
_LEFT = re.compile(
    r"(\d+) upload\(s\) of the job are still pending[^:]*: (.*?)(?: and (\d+) more)?\. `"
)
#: the claim when the storm refused the listing too: it cannot count, so it says so
_UNLISTED = re.compile(r"what it left could not be listed .*: its uploads may still be pending")


def frame(n: int) -> pd.DataFrame:
    return pd.DataFrame({"id": range(n), "day": [f"d{i % 3}" for i in range(n)]})


def failed_write(proxy, url: str, committer: str) -> S3CommitError | None:
    """The write's typed error, or None if it succeeded despite the faults."""
    try:
        write_committed(
            frame(30),
            url,
            committer=committer,
            partition_by=["day"],
            options={**THROTTLED, "endpoint": proxy.endpoint},
            progress=False,
        )
    except S3CommitError as error:
        return error
    return None


def claimed(error: S3CommitError) -> tuple[int, list[str]] | None:
    """What the error says is left pending: (count, the keys it shows); None if it says nothing."""
    found = _LEFT.search(text_of(error))
    if found is None:
        return None
    return int(found[1]), re.findall(r"'([^']+)'", found[2])


def text_of(error: S3CommitError) -> str:
    return "\n".join([str(error), *map(str, getattr(error, "__notes__", ()))])


def assert_truthful(error: S3CommitError, left: list[str], url: str) -> None:
    """Uploads left: the error says how many and which (its first keys), or that the listing
    was refused too, and how to remove them; none left: it claims none."""
    claim = claimed(error)
    if not left:
        assert claim is None or claim[0] == 0, str(error)
        return
    if claim is None and _UNLISTED.search(text_of(error)):
        assert error.remedy is not None and url in error.remedy, text_of(error)
        return
    assert claim is not None, f"{len(left)} uploads left and the error says nothing: {error}"
    count, shown = claim
    assert count == len(left) and shown and set(shown) <= set(left), (claim, left)
    assert len(shown) == min(len(left), 5)
    assert error.visible is not None and error.remedy is not None
    assert error.remedy.startswith("s3commit ") and url in error.remedy


def run_remedy(remedy: str) -> None:
    args = remedy.split()[1:]
    assert cli([*args, "--force"] if args[:2] == ["uploads", "abort"] else args) == 0


def test_a_slowdown_storm_leaves_no_upload_unsaid(proxy, s3, dest):
    """Half of all requests answered 503 SlowDown, three attempts each: after every failed job
    either nothing is pending, or the error says exactly what is; its remedy clears it."""
    failed = 0
    for run in range(12):
        proxy.reset()
        proxy.set_rules([slow_down("*", probability=0.5)], seed=f"abort-storm-{run}")
        url = f"{dest.url}/run{run}"
        error = failed_write(proxy, url, COMMITTERS[run % 3])
        proxy.reset()
        if error is None:
            continue
        failed += 1
        left = sorted(u["Key"] for u in pending_uploads(s3, f"{dest.dir}run{run}/"))
        assert_truthful(error, left, url)
        if left:
            run_remedy(error.remedy)
            assert pending_uploads(s3, f"{dest.dir}run{run}/") == []
    assert failed >= 5, "the storm failed too few jobs to say anything"


@pytest.mark.parametrize("committer", COMMITTERS)
def test_a_task_failure_whose_aborts_are_refused_names_every_upload(committer, proxy, s3, dest):
    """Parts and aborts always throttled: the task fails with uploads initiated, and no abort
    gets through, however often it is retried. The error lists them and names the command;
    once the storm is over, that command removes them."""
    proxy.set_rules([slow_down("UploadPart"), slow_down("AbortMultipartUpload")])
    error = failed_write(proxy, dest.url, committer)
    proxy.reset()
    assert error is not None
    left = sorted(u["Key"] for u in pending_uploads(s3, dest.dir))
    assert left, "the faults left no upload pending: nothing was tested"
    assert_truthful(error, left, dest.url)
    assert error.visible == "nothing"  # pending uploads are no visible data
    job = error.job_id
    assert error.remedy == f"s3commit uploads abort {dest.url} --job {job}"
    run_remedy(error.remedy)
    assert pending_uploads(s3, dest.dir) == []


def test_a_rolled_back_commit_whose_aborts_are_refused_names_every_upload(proxy, s3, dest):
    """Completions and aborts always throttled: the roll back cannot abort the uploads, keeps
    the destination locked, and says which uploads are left; `s3commit abort` removes them."""
    proxy.set_rules([slow_down("CompleteMultipartUpload"), slow_down("AbortMultipartUpload")])
    error = failed_write(proxy, dest.url, "partitioned")
    proxy.reset()
    assert error is not None
    left = sorted(u["Key"] for u in pending_uploads(s3, dest.dir))
    assert left
    assert_truthful(error, left, dest.url)
    assert error.remedy == f"s3commit abort {dest.url}" and error.visible == "nothing"
    assert [k for k in list_keys(s3, dest.dir) if "/__" not in k] == []  # nothing visible
    run_remedy(error.remedy)
    assert pending_uploads(s3, dest.dir) == []
    assert list_keys(s3, dest.dir) == []
