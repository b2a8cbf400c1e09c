"""Continuity ("A Zero-Rename Committer", "Correctness"): an attempt that runs after its job
ended can neither make output visible nor leave an upload pending."""

from __future__ import annotations

import pyarrow as pa
import pytest
from conftest import list_keys, pending_uploads

from s3commit_sdk import CommitError, write_committed
from s3commit_sdk.protocol import JobContext
from s3commit_sdk.runner import execute_task

pytestmark = pytest.mark.fault


@pytest.mark.parametrize("committer", ["directory", "partitioned", "magic"])
def test_late_attempt_after_job_end_discards_its_output(s3, dest, committer):
    batch = pa.record_batch({"id": list(range(10)), "day": ["a"] * 5 + ["b"] * 5})
    result = write_committed(
        pa.Table.from_batches([batch]),
        dest.url,
        committer=committer,
        partition_by=["day"],
        options={"tasks": 1},
    )
    visible = sorted(list_keys(s3, dest.dir))
    # the same job's straggler: a second attempt of task 0, running after job commit
    job = JobContext.on_s3(dest.url, committer, partition_by=("day",), job_id=result.job_id)
    with pytest.raises(CommitError, match="already ended"):
        execute_task(job, partition=0, attempt=1, batches=[batch])
    assert pending_uploads(s3, dest.dir) == []
    assert sorted(list_keys(s3, dest.dir)) == visible
