"""``bench.merge``: a full run made in parts becomes one report that says which part measured what.

The parts here are small runs of the peers scenario on real moto servers (``bench.peers`` at
1 MiB), so the merged report is rendered from records the benchmark itself produced.
"""

from __future__ import annotations

import json
import os
from unittest import mock

import pytest

from bench import merge, peers
from bench.harness import Endpoint, Record, Run
from bench.run import run_case


@pytest.fixture(scope="module")
def moto():
    with mock.patch.dict(os.environ), Endpoint("moto") as endpoint:
        yield endpoint


def peers_part(endpoint: Endpoint, commit: str, failure: str | None = None) -> Run:
    """One part: the peers scenario on moto, with the commit the part says it measured."""
    run = Run(mode="full", endpoints=["moto"])
    run.machine_info["commit"] = commit
    run_case(run, "peers", lambda r, e: peers.run_peers(r, e, 1, 1), endpoint)
    if failure:
        run.failures[failure] = "RuntimeError: the server died"
        run.seconds[failure] = 1.0
    run.seconds["total"] = sum(run.seconds.values())
    return run


def test_a_later_part_replaces_the_earlier_part_s_scenario_and_the_report_lists_the_parts(
    moto, tmp_path, capsys
):
    first = peers_part(moto, "aaaaaaa", failure="memory on moto")
    second = peers_part(moto, "bbbbbbb")
    paths = []
    for n, part in enumerate((first, second)):
        paths.append(tmp_path / f"part{n}.json")
        paths[-1].write_text(json.dumps(part.to_json()))
    out = tmp_path / "merged" / "whole.json"

    assert merge.main([str(out), *map(str, paths)]) == 0

    whole = Run.from_json(json.loads(out.read_text()))
    # the second part's peers records replaced the first's, one per tool
    assert [r.metrics for r in whole.records] == [r.metrics for r in second.records]
    assert len({r.labels["tool"] for r in whole.records}) == len(whole.records)
    # the failure of a case no later part ran again stays, with both parts' times summed
    assert whole.failures == {"memory on moto": "RuntimeError: the server died"}
    assert whole.seconds["total"] == pytest.approx(
        first.seconds["total"] + second.seconds["total"], abs=0.2
    )
    assert [p["commit"] for p in whole.parts] == ["aaaaaaa", "bbbbbbb"]
    assert whole.parts[0]["cases"] == ["memory on moto", "peers on moto"]
    report = out.with_suffix(".md").read_text()
    assert "Made in 2 parts (`python -m bench.merge`)" in report
    rows = [line for line in report.splitlines() if line.startswith("| 1 ") or "| 2 " in line]
    assert "aaaaaaa" in rows[0] and "memory on moto; peers on moto" in rows[0]
    assert "bbbbbbb" in rows[1]


def test_a_merged_report_merges_again_and_keeps_listing_its_parts(moto, tmp_path):
    """A rerun after the merge goes into the merged report: its parts stay listed one by one."""
    parts = [peers_part(moto, commit) for commit in ("aaaaaaa", "bbbbbbb", "ccccccc")]
    paths = []
    for n, part in enumerate(parts):
        paths.append(tmp_path / f"part{n}.json")
        paths[-1].write_text(json.dumps(part.to_json()))
    first_two = tmp_path / "first-two.json"
    assert merge.main([str(first_two), *map(str, paths[:2])]) == 0
    out = tmp_path / "whole.json"

    assert merge.main([str(out), str(first_two), str(paths[2])]) == 0

    whole = Run.from_json(json.loads(out.read_text()))
    assert [p["commit"] for p in whole.parts] == ["aaaaaaa", "bbbbbbb", "ccccccc"]
    assert [r.metrics for r in whole.records] == [r.metrics for r in parts[2].records]
    assert "Made in 3 parts" in out.with_suffix(".md").read_text()


def test_parts_of_different_run_modes_are_refused():
    quick, full = Run(mode="quick"), Run(mode="full")
    with pytest.raises(ValueError, match="mix run modes"):
        merge.merged([quick, full])


def test_a_run_names_the_code_it_measured():
    """The checkout's commit, as git names it (the tests run from the repository)."""
    commit = Run(mode="full").machine_info["commit"]
    assert commit.removesuffix("+dirty").isalnum() and len(commit.removesuffix("+dirty")) >= 7


def test_a_part_rerunning_one_size_keeps_the_other_size_of_the_scenario():
    """Part 6 reran the 1 GiB end-to-end cases: the 4 GiB ones, same scenario, stay."""

    def part(commit: str, sizes: tuple[int, ...], seconds: float) -> Run:
        run = Run(mode="full", endpoints=["rgw"])
        run.machine_info["commit"] = commit
        for size in sizes:
            for writer in ("direct (unsafe)", "magic"):
                labels = {"endpoint": "rgw", "writer": writer, "size_mib": size}
                run.add(Record("end_to_end", labels, {"seconds": {"median": seconds}}, {}))
        return run

    whole = merge.merged([part("aaaaaaa", (1024, 4096), 1.0), part("bbbbbbb", (1024,), 2.0)])
    found = {(r.labels["size_mib"], r.labels["writer"]): r.median("seconds") for r in whole.records}
    assert found == {
        (1024, "direct (unsafe)"): 2.0,
        (1024, "magic"): 2.0,
        (4096, "direct (unsafe)"): 1.0,
        (4096, "magic"): 1.0,
    }


def test_a_run_stopped_before_its_end_is_a_part_timed_by_its_finished_cases():
    """Its ``.partial.json`` has no total: the part's time is the sum of its cases'."""
    stopped = Run(mode="full", endpoints=["moto"])
    stopped.seconds = {"end to end 1024 MiB on moto": 443.6, "end to end 4096 MiB on moto": 1204.8}
    finished = Run(mode="full", endpoints=["moto"])
    finished.seconds = {"peers on moto": 60.0, "total": 75.0}
    stopped = Run.from_json(json.loads(json.dumps(stopped.to_json())))

    whole = merge.merged([stopped, finished])

    assert [p["seconds"] for p in whole.parts] == [1648.4, 75.0]
    assert whole.seconds["total"] == 1723.4
