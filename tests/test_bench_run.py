"""The benchmark runner: a failed case is recorded, and the run goes on from an empty bucket.

A full ``make bench`` runs for about 100 minutes; one case that fails (moto running out of RAM
did) must cost that case's figures, not the run. Real moto server, as in ``bench/run.py``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from unittest import mock

import pytest

from bench.harness import BUCKET, Endpoint, Run
from bench.report import markdown
from bench.run import run_case


@pytest.fixture()
def environ():
    """``Endpoint.activate`` writes the endpoint into ``os.environ``: undone after the test."""
    with mock.patch.dict(os.environ):
        yield


def test_a_failed_case_is_reported_and_the_next_case_starts_on_an_empty_bucket(environ):
    def fails(run: Run, endpoint: Endpoint) -> None:
        client = endpoint.client()
        client.put_object(Bucket=BUCKET, Key="left-behind", Body=b"x")
        client.create_multipart_upload(Bucket=BUCKET, Key="left-pending")
        raise RuntimeError("the case broke")

    seen = {}

    def lists(run: Run, endpoint: Endpoint) -> None:
        listing = endpoint.client().list_objects_v2(Bucket=BUCKET)
        seen["keys"] = [o["Key"] for o in listing.get("Contents", [])]
        seen["pending"] = endpoint.pending_uploads()

    run = Run(mode="quick", endpoints=["moto"])
    with Endpoint("moto") as endpoint:
        run_case(run, "breaks", fails, endpoint)
        run_case(run, "lists", lists, endpoint)

    assert run.failures == {"breaks on moto": "RuntimeError: the case broke"}
    assert set(run.seconds) == {"breaks on moto", "lists on moto"}
    assert seen == {"keys": [], "pending": 0}
    assert Run.from_json(run.to_json()).failures == run.failures
    report = markdown(run, [])
    assert "## Failed scenarios" in report
    assert "| breaks on moto | RuntimeError: the case broke |" in report


def test_an_endpoint_that_died_fails_the_case_without_running_it(environ):
    ran = []
    run = Run(mode="quick", endpoints=["moto"])
    with Endpoint("moto") as endpoint:
        pass  # stopped: its reset cannot reach it
    run_case(run, "after the end", lambda run, endpoint: ran.append(endpoint), endpoint)

    assert ran == []
    assert list(run.failures) == ["after the end on moto"]
    assert "Connection refused" in run.failures["after the end on moto"]


@pytest.mark.spark  # bench.run starts its Spark session before it looks at --only
def test_only_that_matches_no_scenario_is_refused_with_the_scenario_names(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "bench.run", "--quick", "--only", "no such scenario"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "TMPDIR": str(tmp_path)},
    )
    assert result.returncode == 2, result.stderr
    assert "--only ['no such scenario'] matches none of: end to end" in result.stderr
    assert result.stderr.rstrip().endswith(", memory")
    assert "== " not in result.stdout  # no case ran
