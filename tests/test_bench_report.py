"""The report's verdict on requests per file: the per-job and per-task constants are the ones
docs/reference/requests.md lists, so a job that makes exactly those is met, one more is not."""

from __future__ import annotations

from bench.harness import Record, Run
from bench.report import evaluate

FILES, TASKS, DAYS = 16, 2, 8


def counts_of_a_documented_append(extra: dict[str, int] | None = None) -> dict[str, int]:
    """One append of 16 one-part files in 8 partitions by 2 tasks on RGW, request by request
    as docs/reference/requests.md counts them."""
    counts = {
        # per file
        "CreateMultipartUpload": FILES,
        "UploadPart": FILES,
        "CompleteMultipartUpload": FILES,
        # per task: its pendingset, then the job-alive check; per job: the alive marker, the
        # journal, the commit marker, _SUCCESS, and the unfinished-commit check
        "PutObject": TASKS + 4,
        "HeadObject": TASKS + 1,
        "HeadBucket": 1,
        "ListMultipartUploads": 1,
        # the job's hidden directory, the append's schema check, one check per directory
        "ListObjectsV2": 1 + 1 + DAYS,
        "GetObject": 1,  # the append's schema check: _SUCCESS
        "DeleteObjects": 3,
    }
    for operation, n in (extra or {}).items():
        counts[operation] = counts.get(operation, 0) + n
    return counts


def verdict(counts: dict[str, int]) -> tuple[bool, str]:
    run = Run(mode="full", endpoints=["rgw"])
    notes = {
        "files": FILES,
        "tasks": TASKS,
        "directories": DAYS,
        "requests": counts,
        "completion_checks": {"listed": DAYS},
        "copied_bytes": 0,
    }
    labels = {"endpoint": "rgw", "writer": "directory", "size_mib": 64}
    run.add(Record("requests", labels, {}, notes))
    (target,) = [t for t in evaluate(run) if "requests per file" in t.name]
    return target.met, target.measured


def test_the_documented_requests_are_two_per_file_plus_parts():
    met, measured = verdict(counts_of_a_documented_append())
    assert met
    assert "2.00 + parts per file (73 requests for 16 files" in measured


def test_one_request_more_than_documented_misses_the_target():
    met, measured = verdict(counts_of_a_documented_append({"GetObject": 1}))
    assert not met
    assert "2.06 + parts per file (74 requests" in measured
