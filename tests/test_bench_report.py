"""The report's verdicts. Requests per file: the per-job and per-task constants are the ones
docs/reference/requests.md lists, so a job that makes exactly those is met, one more is not.
Ahead of deltalake: judged on the per-round ratios, with each side's CPU beside them."""

from __future__ import annotations

from bench.harness import Record, Run
from bench.report import evaluate, markdown

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


def peers_record(tool: str, seconds: float, cpu: tuple[float, float] | None, **notes) -> Record:
    metrics = {"seconds": {"median": seconds, "min": seconds, "max": seconds, "n": 3}}
    for name, value in zip(("client_cpu_s", "server_cpu_s"), cpu or (), strict=False):
        metrics[name] = {"median": value, "min": value, "max": value, "n": 3}
    return Record("peers", {"endpoint": "rgw", "tool": tool}, metrics, notes)


def deltalake_verdict(ours_cpu, theirs_cpu) -> tuple[bool, str]:
    run = Run(mode="full", endpoints=["rgw"])
    run.add(peers_record("s3commit-sdk", 2.0, ours_cpu, round_ratios={"deltalake": 0.97}))
    run.add(peers_record("deltalake", 2.1, theirs_cpu))
    (target,) = [t for t in evaluate(run) if "deltalake" in t.name]
    return target.met, target.measured


def test_the_deltalake_verdict_quotes_both_sides_cpu():
    met, measured = deltalake_verdict((1.6, 2.05), (1.64, 2.44))
    assert not met  # 0.97x: the target asks for 0.95x
    assert "0.970x deltalake" in measured
    assert "client CPU 1.60 s vs 1.64 s, the server's 2.05 s vs 2.44 s" in measured


def test_a_run_without_cpu_figures_gives_the_ratio_alone():
    _, measured = deltalake_verdict(None, (1.64, 2.44))
    assert "0.970x deltalake" in measured and "CPU" not in measured


def test_a_failed_scenario_is_one_table_row_with_the_error_last_line():
    """A failure's traceback spans lines; in the report's table it must stay one row."""
    run = Run(mode="full", endpoints=["moto"])
    run.failures["memory on moto"] = (
        "RuntimeError: magic writing 4096 MiB failed (exit 1):\n"
        'Traceback (most recent call last):\n  File "x.py", line 1, in <module>\n\n'
        "CommitError: completing 'big/a|b' failed: 500; the job was rolled back.\n"
    )
    text = markdown(run, [])
    rows = [line for line in text.splitlines() if line.startswith("| memory on moto")]
    assert rows == [
        "| memory on moto | CommitError: completing 'big/a\\|b' failed: 500; "
        "the job was rolled back. |"
    ]
    assert "Traceback" not in text
