"""The "fanout" benchmark scenario: job commit completed from worker processes through the
fault proxy's emulated latency (docs/DESIGN.md, "Job commit fanned out to executors").

Toy sizes on a real moto server, as ``bench/run.py`` runs it: the records carry the law's
terms, every upload ends completed, and the scenario's own check finds an upload left pending.
"""

from __future__ import annotations

import os
from unittest import mock

import pytest

from bench.commit_scaling import complete_raw, prepare
from bench.fanout import SCENARIO, check_committed, run_fanout, slices
from bench.harness import Endpoint, Run
from bench.report import markdown
from s3commit_sdk.formats import PendingSet
from s3commit_sdk.protocol import JobContext

LATENCY_MS = 50
FILES = 32


@pytest.fixture(scope="module")
def moto():
    """A moto endpoint of the benchmarks' own, its environment active for the module."""
    with mock.patch.dict(os.environ), Endpoint("moto") as endpoint:
        endpoint.activate()
        yield endpoint


def test_every_case_completes_every_upload_and_records_the_law(moto):
    run = Run(mode="quick", endpoints=["moto"])
    run_fanout(run, moto, FILES, ((LATENCY_MS, (1, 2), (4,)), (0, (2,), (4,))))

    records = run.of(SCENARIO, endpoint="moto", files=FILES)
    cases = [(r.labels["latency_ms"], r.labels["processes"]) for r in records]
    assert cases == [(LATENCY_MS, 1), (LATENCY_MS, 2), (0, 2)]
    for record in records:
        terms = {k: record.median(k) for k in record.metrics if k.startswith("law_")}
        assert record.median("law_predicted_per_s") == min(
            v for k, v in terms.items() if k != "law_predicted_per_s"
        )
        assert record.median("completions_per_s") > 0
        assert record.median("client_cpu_ms_per_completion") > 0
        assert record.notes["bound"] in ("latency", "client_cpu", "machine_cpu")
        processes, threads = record.labels["processes"], record.labels["threads"]
        round_trip = record.labels["latency_ms"] + record.median("store_round_trip_ms")
        assert record.median("law_latency_per_s") == pytest.approx(
            processes * threads * 1000 / round_trip
        )
    for record in records[:2]:
        # no thread has more than one completion in flight: each one took the 50 ms
        assert record.median("completion_ms_observed") >= LATENCY_MS
    assert moto.pending_uploads() == 0
    report = markdown(run, [])
    assert "## 12. Job commit fanned out to worker processes, SIMULATED" in report
    assert f"| 1x4, {LATENCY_MS} ms: " in report  # the headline row, moto's column


def test_the_check_finds_an_upload_left_pending(moto):
    moto.reset()
    job = JobContext.on_s3(f"{moto.url}/fanout", "directory", {})
    messages = prepare(moto, job, 8, 1024)
    first, rest = slices(messages, 2)
    complete_raw(moto, first, 4)
    left = sum(len(PendingSet.from_dict(m.payload).commits) for m in rest)

    with pytest.raises(RuntimeError, match=f"{8 - left} of 8 files listed, {left} uploads"):
        check_committed(moto, job, 8)
    complete_raw(moto, rest, 4)
    check_committed(moto, job, 8)
    moto.reset()


def test_slices_deal_every_pendingset_to_exactly_one_worker(moto):
    job = JobContext.on_s3(f"{moto.url}/fanout", "directory", {})
    messages = prepare(moto, job, 16, 1024)
    dealt = slices(messages, 4)
    assert sorted(m.task_id for share in dealt for m in share) == sorted(
        m.task_id for m in messages
    )
    assert {len(share) for share in dealt} == {len(messages) // 4}
    moto.reset()
