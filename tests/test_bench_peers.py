"""The Python peers scenario times its tools in interleaved rounds, on a real moto server.

On a machine shared with other work the load changes from one second to the next: rounds that
time every tool once, each tool going first in turn, put that load on all tools alike, so the
ratios of one run compare (bench/peers.py).
"""

from __future__ import annotations

import argparse
import json
import os
import uuid
from collections.abc import Callable
from dataclasses import replace
from unittest import mock

import pytest
from conftest import BUCKET

from bench import peers
from bench.harness import Endpoint, Run, collect_rgw_garbage
from s3commit_sdk.errors import S3CommitError


@pytest.fixture(scope="module")
def endpoint():
    """``Endpoint.activate`` writes the endpoint into ``os.environ``: undone after the module."""
    with mock.patch.dict(os.environ), Endpoint("moto") as started:
        started.activate()
        yield started


def test_each_tool_goes_first_once_in_as_many_rounds():
    tools = ["ours", "a", "b"]
    rounds = [peers.rotated(tools, number) for number in range(3)]
    assert [order[0] for order in rounds] == tools
    assert all(sorted(order) == sorted(tools) for order in rounds)


def test_an_option_is_name_equals_value():
    assert peers.option("multipart.size=16M") == ("multipart.size", "16M")
    with pytest.raises(argparse.ArgumentTypeError):
        peers.option("multipart.size")


def recording(start: Callable[..., peers.Peer], log: list[str]):
    """``start`` whose peer writes its tool's name into ``log`` at every timed overwrite."""

    def started(*args, **kwargs) -> peers.Peer:
        peer = start(*args, **kwargs)
        name = peers.ours(kwargs["committer"]) if "committer" in kwargs else "deltalake"

        def overwrite():
            log.append(name)
            return peer.overwrite()

        return replace(peer, overwrite=overwrite)

    return started


def test_rounds_interleave_the_tools_and_every_tool_gets_a_record(endpoint, monkeypatch):
    log: list[str] = []
    monkeypatch.setattr(peers, "start_s3commit", recording(peers.start_s3commit, log))
    monkeypatch.setattr(peers, "PEERS", {"deltalake": recording(peers.start_deltalake, log)})
    run = Run(mode="peers", endpoints=["moto"])

    peers.run_peers(run, endpoint, size_mib=1, repeats=3, options={"multipart.size": "5M"})

    partitioned, magic = peers.OUR_TOOLS
    assert log == [
        *(partitioned, magic, "deltalake"),
        *(magic, "deltalake", partitioned),
        *("deltalake", partitioned, magic),
    ]
    records = {r.labels["tool"]: r for r in run.records}
    assert set(records) == {partitioned, magic, "deltalake"}
    assert all(r.metrics["seconds"]["n"] == 3 for r in records.values())
    # each write's CPU, the client's (this process: deltalake's Rust threads too) and moto's
    assert all(r.median("client_cpu_s") > 0 for r in records.values())
    assert sum(r.metrics["server_cpu_s"]["max"] for r in records.values()) > 0
    for tool in peers.OUR_TOOLS:
        assert records[tool].notes["options"] == {"multipart.size": "5M"}
        assert set(records[tool].notes["round_ratios"]) == {"deltalake"}


def test_round_ratios_are_ours_over_theirs_in_the_same_round():
    partitioned, magic = peers.OUR_TOOLS
    samples = {
        partitioned: [{"seconds": 1.0}, {"seconds": 4.0}, {"seconds": 3.0}],
        magic: [{"seconds": 1.0}, {"seconds": 1.0}, {"seconds": 1.5}],
        "deltalake": [{"seconds": 2.0}, {"seconds": 2.0}, {"seconds": 3.0}],
    }
    assert peers.round_ratios(samples, partitioned) == {"deltalake": 1.0}
    assert peers.round_ratios(samples, magic) == {"deltalake": 0.5}


def test_an_option_of_ours_reaches_our_write(endpoint, monkeypatch):
    monkeypatch.setattr(peers, "PEERS", {})
    with pytest.raises(S3CommitError, match="tasks"):
        peers.run_peers(Run(mode="peers"), endpoint, size_mib=1, repeats=1, options={"tasks": "0"})


def test_rgw_garbage_is_collected_between_rounds(s3_server, s3):
    """Rounds of replaced data filled RGW's memstore OSD (the collector waits a minute per
    object) until every write blocked: the peers scenario collects after each round. A deleted
    object of 8 MiB (its tail beyond RGW's 4 MiB head goes to the collector) is listed by
    ``radosgw-admin gc list`` until :func:`collect_rgw_garbage` runs."""
    if s3_server.kind != "rgw":
        pytest.skip("moto frees deleted objects at once: nothing to collect")
    key = f"t/gc-{uuid.uuid4().hex[:8]}"
    s3.put_object(Bucket=BUCKET, Key=key, Body=os.urandom(8 << 20))
    s3.delete_object(Bucket=BUCKET, Key=key)

    def pending() -> list:
        return json.loads(s3_server.admin("gc", "list", "--include-all"))

    assert pending(), "the deleted object's tail was never queued for the collector"
    collect_rgw_garbage(s3_server)
    assert pending() == []
