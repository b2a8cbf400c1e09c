"""Job commit runs as named stages: each is timed into ``_SUCCESS``'s phases and logged, also
when it fails, so a slow or failed commit says which step it was in."""

from __future__ import annotations

import logging
import re
import uuid

import pandas as pd
import pytest
from conftest import pending_uploads

from s3commit_sdk import CommitError, write_committed
from s3commit_sdk.testing.faulty_store import FaultPlan, faulty_rename_store

STAGE_LINE = re.compile(r"job (\S+): stage (\w+) (done|failed) in \d+\.\d{3} s")
#: the named steps of each committer's job commit, in order
STAGES = {
    "directory": ["conflict_resolution", "complete_uploads", "replace_delete", "cleanup"],
    "magic": ["conflict_resolution", "complete_uploads", "replace_delete", "cleanup"],
    "manifest": [
        "load_manifests",
        "create_target_dirs",
        "rename_files",
        "replace_delete",
        "cleanup",
    ],
    "file": ["merge", "replace_delete", "cleanup"],
}


def frame() -> pd.DataFrame:
    return pd.DataFrame({"id": range(40), "day": [f"d{i % 2}" for i in range(40)]})


def logged(caplog) -> list[tuple[str, str, str]]:
    """(job, stage, outcome) of every stage line, in order."""
    found = [STAGE_LINE.fullmatch(r.getMessage()) for r in caplog.records]
    return [m.groups() for m in found if m]


@pytest.mark.parametrize("committer", list(STAGES))
def test_every_stage_is_timed_in_success_and_logged(committer, dest, s3, caplog, tmp_path):
    url = dest.url if committer in ("directory", "magic") else f"file://{tmp_path}/out"
    with caplog.at_level(logging.DEBUG, logger="s3commit_sdk.stages"):
        result = write_committed(frame(), url, committer=committer, options={"tasks": 2})
    lines = logged(caplog)
    assert [stage for _, stage, _ in lines] == STAGES[committer]
    assert {(job, outcome) for job, _, outcome in lines} == {(result.job_id, "done")}
    phases = result.success["durations"]  # what _SUCCESS records
    assert all(name in phases and phases[name] >= 0 for name in STAGES[committer])
    stage_time = sum(phases[name] for name in STAGES[committer])
    assert stage_time <= phases["job_commit"] + 0.001  # the stages are parts of job commit
    assert pending_uploads(s3, dest.dir) == []


def test_a_failing_stage_is_logged_as_failed(caplog):
    url = f"memory:///s3commit-tests/{uuid.uuid4().hex}"
    # 2 tasks save 2 manifests (renames 1-2); the job's first file rename fails
    with (
        caplog.at_level(logging.DEBUG, logger="s3commit_sdk.stages"),
        faulty_rename_store(FaultPlan(fail_rename_at={3})),
        pytest.raises(CommitError, match="a rename failed during job commit") as info,
    ):
        write_committed(frame(), url, committer="manifest", options={"tasks": 2, "threads": 1})
    lines = logged(caplog)
    assert [(stage, outcome) for _, stage, outcome in lines] == [
        ("load_manifests", "done"),
        ("create_target_dirs", "done"),
        ("rename_files", "failed"),
    ]
    assert {job for job, _, _ in lines} == {info.value.job_id}
    assert info.value.visible == "nothing"  # the renames it started were undone (and listed)
