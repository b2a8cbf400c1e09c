"""``commit.processes``: job commit's completions from worker processes (committers/completion.py).

Each worker flags an upload in memory shared with the driver before it sends its completion,
so a rollback deletes exactly what may have landed, even after a worker was killed; the other
workers are stopped and waited for, never killed with requests in flight.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pytest
from conftest import list_keys, pending_uploads, wait_for_request

from s3commit_sdk import CommitError, write_committed
from s3commit_sdk.committers.completion import SLICE
from s3commit_sdk.testing.faultproxy import hold, internal_error

FILES = SLICE + 50  # two slices: the workers have one each


def one_row_files(dest_url: str, **options):
    table = pa.table({"n": list(range(FILES))})
    options = {"tasks": 2, "max_records_per_file": 1, "commit.processes": 2, **options}
    return write_committed(table, dest_url, committer="magic", options=options, progress=False)


def data_keys(s3, dest) -> list[str]:
    return [k for k in list_keys(s3, dest.dir) if "/_" not in "/" + k.removeprefix(dest.dir)]


def test_worker_processes_complete_every_upload(s3, dest):
    result = one_row_files(dest.url)
    assert len(result.files) == FILES and result.rows == FILES
    assert sorted(data_keys(s3, dest)) == sorted(f.key for f in result.files)
    assert pending_uploads(s3, dest.dir) == []
    assert multiprocessing.active_children() == []  # every worker was waited for


def test_a_completion_failing_in_a_worker_rolls_the_job_back(proxy, s3, dest):
    proxy.set_rules([internal_error("CompleteMultipartUpload", occurrences=[SLICE // 2])])
    with pytest.raises(CommitError, match="the job was rolled back") as info:
        one_row_files(dest.url, endpoint=proxy.endpoint, **{"retry.max-attempts": 1})
    assert "Nothing of this job is visible" in str(info.value)
    assert data_keys(s3, dest) == [] and pending_uploads(s3, dest.dir) == []
    assert multiprocessing.active_children() == []


def test_killed_workers_leave_nothing_visible(proxy, s3, dest):
    """Both workers are killed (as by the OOM killer) while one completion is held: the
    completions they had sent are found by their flags and deleted, the rest aborted."""
    proxy.set_rules([hold("CompleteMultipartUpload", occurrences=[SLICE // 2])])
    with ThreadPoolExecutor(1) as pool:
        job = pool.submit(one_row_files, dest.url, endpoint=proxy.endpoint)
        wait_for_request(proxy, "CompleteMultipartUpload", SLICE // 2, job)
        workers = [p for p in multiprocessing.active_children() if "complete" in p.name]
        assert len(workers) == 2
        for worker in workers:
            os.kill(worker.pid, signal.SIGKILL)
        proxy.release()
        with pytest.raises(CommitError, match="died \\(exit code -9\\)") as info:
            job.result(timeout=300)
    assert "the job was rolled back" in str(info.value)
    assert data_keys(s3, dest) == [] and pending_uploads(s3, dest.dir) == []
