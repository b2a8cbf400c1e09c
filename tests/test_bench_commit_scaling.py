"""The job-commit scenarios time their cases in interleaved rounds (bench/commit_scaling.py).

On a machine shared with other work, cases timed one after the other meet different loads, and
the ratio the report judges (our job commit against raw completions of the same uploads) would
compare two moments, not two ways of committing. Toy sizes on a real moto server.
"""

from __future__ import annotations

import json
import os
from unittest import mock

import pytest

from bench import commit_scaling
from bench.harness import Endpoint, Run


@pytest.fixture(scope="module")
def moto():
    with mock.patch.dict(os.environ), Endpoint("moto") as endpoint:
        endpoint.activate()
        yield endpoint


def test_rounds_go_round_the_cases_and_each_case_gets_one_record(moto, monkeypatch):
    order: list[tuple[str, int]] = []
    commit_once = commit_scaling.commit_once

    def recorded(endpoint, committer, files, file_bytes, threads, traced):
        if not traced:
            order.append((committer, threads))
        return commit_once(endpoint, committer, files, file_bytes, threads, traced)

    monkeypatch.setattr(commit_scaling, "commit_once", recorded)
    run = Run(mode="quick", endpoints=["moto"])
    cases = (("directory", 6, (4,)), (commit_scaling.RAW, 6, (4, 8)))

    commit_scaling.run_scaling(run, moto, cases, repeats=2, file_bytes=1024)

    one_round = [("directory", 4), (commit_scaling.RAW, 4), (commit_scaling.RAW, 8)]
    assert order == one_round * 2
    records = run.of("commit_scaling", endpoint="moto", files=6)
    assert [(r.labels["committer"], r.labels["threads"]) for r in records] == one_round
    assert all(r.metrics["job_commit_s"]["n"] == 2 for r in records)
    assert "driver_heap_kib_per_file" in records[0].metrics  # ours is also traced, once
    assert moto.pending_uploads() == 0


def test_the_bytes_scenario_alternates_its_sizes(moto, monkeypatch):
    sizes: list[int] = []
    commit_once = commit_scaling.commit_once

    def recorded(endpoint, committer, files, file_bytes, threads, traced):
        sizes.append(file_bytes)
        return commit_once(endpoint, committer, files, file_bytes, threads, traced)

    monkeypatch.setattr(commit_scaling, "commit_once", recorded)
    run = Run(mode="quick", endpoints=["moto"])

    commit_scaling.run_bytes(run, moto, "directory", 4, (1, 2), threads=4, repeats=2)

    small, large = 1 * 2**20 // 4, 2 * 2**20 // 4
    assert sizes == [small, large, small, large]
    records = run.of("commit_bytes", endpoint="moto")
    assert [r.labels["total_mib"] for r in records] == [1, 2]


def test_a_run_stopped_in_a_later_case_keeps_the_cases_it_finished(moto, monkeypatch, tmp_path):
    """One 100,000-file case takes half an hour: a run stopped (SIGINT raises
    KeyboardInterrupt in it) in the next case must keep the finished case in its partial JSON."""
    commit_once = commit_scaling.commit_once

    def stopped_in_the_raw_case(endpoint, committer, files, file_bytes, threads, traced):
        if committer == commit_scaling.RAW:
            raise KeyboardInterrupt
        return commit_once(endpoint, committer, files, file_bytes, threads, traced)

    monkeypatch.setattr(commit_scaling, "commit_once", stopped_in_the_raw_case)
    run = Run(mode="quick", endpoints=["moto"], partial=tmp_path / "stamp.partial.json")
    cases = (("directory", 6, (4,)), (commit_scaling.RAW, 6, (4,)))

    with pytest.raises(KeyboardInterrupt):
        commit_scaling.run_scaling(run, moto, cases, repeats=1, file_bytes=1024)

    saved = Run.from_json(json.loads(run.partial.read_text()))
    assert [r.labels["committer"] for r in saved.records] == ["directory"]
    assert saved.records[0].metrics["job_commit_s"]["n"] == 1
