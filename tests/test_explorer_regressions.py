"""Schedules the fault-schedule explorer found violating a correctness property, each kept as
its minimal (shrunk) reproduction: the explorer's own steps and invariants, called in order.

Each test names the property, the issue's case and the fix that keeps it passing.
"""

from __future__ import annotations

import pytest
from conftest import BUCKET

from s3commit_sdk.testing.explorer import CommitSchedules, FaultSpec, JobSpec, Stats, machine_for

pytestmark = pytest.mark.fault


@pytest.fixture
def schedule(s3_server, running_proxy):
    """A fresh explorer machine on this server; its teardown leaves the bucket as found."""
    machine: CommitSchedules = machine_for(
        s3_server, running_proxy, BUCKET, Stats(server=s3_server.kind)
    )()
    yield machine
    machine.teardown()


def test_reader_never_returns_half_a_commit(schedule):
    """Reader view (issue 27, case 2): with one of the job's two files completed and the
    second completion held, the SDK's reader returned the completed file's 2 rows, neither the
    0 rows before the commit nor the 3 after it."""
    schedule.destination(fmt="parquet", partitioned=False)
    schedule.correct()
    schedule.read_during_commit(
        job=JobSpec(committer="directory", mode="append", days=("d1", "d1", "d1")), landed=1
    )
    schedule.correct()


APPEND = JobSpec(committer="directory", mode="append", days=("d2", "d2", "d3"))
REPLACE = JobSpec(committer="directory", mode="replace", days=("d1",))


@pytest.mark.parametrize(
    ("fault", "job", "partitioned"),
    [
        pytest.param(
            FaultSpec("internal-error-after", "HeadObject", (1, 2)),
            APPEND,
            False,
            id="setup-marker-head",
        ),
        pytest.param(
            FaultSpec("internal-error-after", "HeadObject", (2, 3)),
            APPEND,
            False,
            id="task-alive-head",
        ),
        pytest.param(
            FaultSpec("stuck-listing", "ListObjectsV2", (1,)),
            REPLACE,
            True,
            id="first-listing",
        ),
    ],
)
def test_a_failed_job_says_what_is_visible(schedule, fault, job, partitioned):
    """Abortable, ``visible`` matches a listing (issue 27, "an error says what is visible"): a
    request failing for good (two attempts, ``retry.max-attempts=2``) before job commit, the
    HEAD of the commit marker at job setup, the HEAD of the job-alive marker in the task, or
    the job's first listing (a page that never advances, then a 500 for its bogus marker),
    failed the job with a ``StoreError`` whose ``visible`` and ``remedy`` were None, though the
    job was aborted and nothing of it was visible."""
    schedule.destination(fmt="parquet", partitioned=partitioned)
    schedule.correct()
    schedule.faulted_job(job=job, fault=fault)
    schedule.correct()


@pytest.mark.parametrize("committer", ["manifest", "file"])
def test_a_rename_committer_respects_an_unfinished_commit(schedule, committer):
    """Exclusive (found on both servers): a rename committer's job committed into a
    destination whose S3 commit was unfinished (its driver killed after the journal, the
    commit marker held), beside files ``recover`` then completes or ``abort`` deletes; the S3
    committers refuse such a job with ``ConcurrentCommitError``, the rename committers took no
    notice of the marker."""
    schedule.destination(fmt="parquet", partitioned=False)
    schedule.job(job=JobSpec(committer="directory", mode="append", days=("d1",)))
    schedule.kill_driver(
        job=JobSpec(committer="directory", mode="append", days=("d1", "d1", "d2")),
        operation="CompleteMultipartUpload",
        occurrence=1,
    )
    schedule.correct()
    schedule.job(job=JobSpec(committer=committer, mode="append", days=("d2",)))
    schedule.correct()


def test_an_abort_that_cannot_restore_removes_the_success_naming_deleted_files(schedule):
    """Continuity (found on moto): a driver killed after its replace deleted the earlier job's
    file (the child's second DeleteObjects; its first removes the setup probe), then ``abort``:
    nothing can bring that file back, and the earlier job's ``_SUCCESS`` stayed, naming a file
    that is gone. ``abort`` now removes it and says so."""
    schedule.destination(fmt="parquet", partitioned=False)
    schedule.job(job=JobSpec(committer="directory", mode="append", days=("d1",)))
    schedule.kill_driver(
        job=JobSpec(committer="directory", mode="replace", days=("d2",)),
        operation="DeleteObjects",
        occurrence=2,
    )
    schedule.correct()
    schedule.resolve(roll_forward=False, cli=False, fault=None)
    schedule.correct()
