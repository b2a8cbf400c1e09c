"""The benchmark runner: a failed case is recorded, and the run goes on from an empty bucket.

A full ``make bench`` runs for about 100 minutes; one case that fails (moto running out of RAM
did) must cost that case's figures, not the run. Real moto server, as in ``bench/run.py``.
Also the floor of scenario 1 (Spark's own writer onto local disk) and the py-spy profile, each
run for real on a small frame.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from unittest import mock

import pytest

from bench import end_to_end, profile
from bench.harness import BUCKET, Endpoint, Run
from bench.report import evaluate, markdown
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


def test_a_stopped_case_is_saved_as_stopped_and_the_stop_goes_on(environ, tmp_path):
    """Ctrl-C or ``kill -INT`` ends the run; its partial JSON names the case it stopped in."""

    def stopped(run: Run, endpoint: Endpoint) -> None:
        raise KeyboardInterrupt

    run = Run(mode="quick", endpoints=["moto"], partial=tmp_path / "stamp.partial.json")
    with Endpoint("moto") as endpoint, pytest.raises(KeyboardInterrupt):
        run_case(run, "long", stopped, endpoint)

    saved = Run.from_json(json.loads(run.partial.read_text()))
    assert list(saved.failures) == ["long on moto"]
    assert saved.failures["long on moto"].startswith("stopped (SIGINT) before its end")
    assert "long on moto" in saved.seconds


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


@pytest.fixture()
def moto(environ):
    with Endpoint("moto") as endpoint:
        endpoint.activate()
        yield endpoint


def test_every_end_to_end_case_runs_spark_s_own_local_write_as_the_floor(
    spark, moto, tmp_path, monkeypatch
):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where its scratch directory goes
    run = Run(mode="quick", endpoints=["moto"])
    end_to_end.run_end_to_end(run, moto, spark, 8, True, 2, ("direct (unsafe)", "magic"))

    floor, magic = (run.of("end_to_end", writer=w)[0] for w in ("spark (local disk)", "magic"))
    assert list(tmp_path.glob("s3commit-bench-local-*")) == []  # each write's is gone
    # same rows, same layout (one file per task and day), same compression: about the same bytes
    assert floor.notes["files"] == magic.notes["files"] == 2 * 8
    assert 0.8 < magic.notes["bytes"] / floor.notes["bytes"] < 1.25
    assert floor.metrics["x_spark"] == {"median": 1.0, "min": 1.0, "max": 1.0, "n": 2}
    assert magic.metrics["x_spark"]["n"] == magic.metrics["cpu_x_spark"]["n"] == 2
    assert magic.median("x_spark") > 0 and magic.median("cpu_x_spark") > 0

    run.endpoints = ["rgw"]  # judged on RGW at 1 GiB and more: pass these figures off as such
    for record in run.records:
        record.labels.update(endpoint="rgw", size_mib=1024)
    run.targets = evaluate(run)
    target = next(t for t in run.targets if t.name.startswith("magic <= 1.25x Spark's"))
    took, cpu = magic.median("x_spark"), magic.median("cpu_x_spark")
    assert target.met == (took <= 1.25 and cpu <= 1.3)
    assert target.measured.startswith(f"1024 MiB partitioned: {took:.2f}x time")
    # the least time Spark's client CPU plus the S3 server's could take on these cores
    least = (floor.median("client_cpu_s") + magic.median("server_cpu_s")) / os.cpu_count()
    shown = f"takes under {least:.1f} s: {magic.median('seconds') / least:.2f}x that"
    assert (shown in target.measured) == (least > floor.median("seconds")), target.measured
    report = markdown(run, [])
    assert "| x Spark's writer | CPU x Spark's |" in report
    assert f"Spark's local-disk write {floor.median('seconds'):.1f} s |" in report  # headline


def test_the_profile_sorts_a_magic_write_s_python_samples_into_phases(spark, moto, tmp_path):
    run = Run(mode="quick", endpoints=["moto"])
    raw = tmp_path / "profile-moto.txt"
    profile.run_profile(run, moto, spark, 16, raw)

    (record,) = run.of(profile.SCENARIO)
    assert "error" not in record.notes, record.notes
    phases = record.notes["phases"]
    assert set(phases) == set(profile.PHASES)
    workers = record.median("worker_samples")
    assert sum(p["worker"] for p in phases.values()) == workers > 0
    # a Python worker encodes Parquet and its threads upload the parts
    assert phases["encoding"]["worker"] > 0
    assert phases["upload"]["worker"] > 0
    assert re.fullmatch(r"Samples: \d+ Errors: \d+", record.notes["py_spy"])
    stacks = list(profile.collapsed_stacks(raw.read_text()))
    assert sum(n for *_, n in stacks) >= workers
    report = markdown(run, [])
    assert "## Where the time goes (py-spy profile of one case)" in report
    assert f"| encoding | {phases['encoding']['worker']} (" in report


def test_a_stack_counts_for_what_its_innermost_known_frame_does():
    raw = (
        'process 1:"python -m bench.run";process 2:"java";process 3:"python -m pyspark.daemon";'
        'process 4:"python -m pyspark.daemon";manager (daemon.py:264);'
        "write_task_output (s3commit_sdk/writers.py:1);"
        "_ArrowFileWriter.write_batch (s3commit_sdk/writers.py:2);"
        "ParquetWriter.write_table (pyarrow/parquet/core.py:3);"
        "DelayedCompletionStream.write (s3commit_sdk/committers/magic.py:4) 7\n"
        'process 1:"python -c x\ny";'
        "MagicCommitter.commit_task (s3commit_sdk/committers/magic.py:5);"
        "BaseClient._make_api_call (botocore/client.py:6) 3\n"
        'process 1:"python -c x";process 4:"python -m pyspark.daemon";manager (daemon.py:275) 2\n'
    )
    stacks = list(profile.collapsed_stacks(raw))
    assert [(pid, command, n) for pid, command, _, n in stacks] == [
        (4, "python -m pyspark.daemon", 7),
        (1, "python -c x\ny", 3),
        (4, "python -m pyspark.daemon", 2),
    ]
    phases = profile.phase_samples(raw, driver=1)
    assert phases["buffering"] == {"worker": 7, "driver": 0}
    assert phases["commit"] == {"worker": 0, "driver": 3}
    assert phases["between tasks"] == {"worker": 2, "driver": 0}
