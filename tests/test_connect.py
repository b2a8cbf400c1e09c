"""Both APIs on a Spark Connect session (``SparkSession.builder.remote("local[2]")``).

A Connect session cannot share a process with the classic session of the other tests: one
child process per S3 server runs every scenario (tests/connect_scenarios.py) against one local
Connect server, and reports what each produced. These tests check that report and, through
their own boto3 client, what the scenarios left on S3.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from pathlib import Path

import boto3
import pyarrow as pa
import pytest
from conftest import (
    BUCKET,
    list_keys,
    pending_uploads,
    read_back,
    rows_of,
    run_connect_child,
    visible_keys,
)
from connect_scenarios import COMMITTERS, as_text, sample_rows

from s3commit_sdk import UnsupportedSessionError, write_committed
from s3commit_sdk.testing.rgw import RGW_TEST_KMS_KEY

pytestmark = [pytest.mark.cluster, pytest.mark.spark]

SCRIPT = Path(__file__).with_name("connect_scenarios.py")
ROOT = Path(__file__).parents[1]
EXISTING = "day=2026-11-01/existing.parquet"


@dataclass
class ConnectRun:
    prefix: str
    results: dict[str, dict]
    #: what the child printed (its stdout and stderr descriptors, the JVM's included)
    output: str
    #: what the child was asked to run
    spec: dict

    def ok(self, name: str) -> dict:
        outcome = self.results[name]
        assert outcome["ok"], f"{name}: {outcome.get('traceback')}"
        return outcome

    def failed(self, name: str) -> dict:
        outcome = self.results[name]
        assert not outcome["ok"], f"{name} should have failed"
        return outcome


@pytest.fixture(scope="module")
def connect(s3_server, s3, tmp_path_factory):
    """Every scenario, run once per S3 server by a child process with its own Connect server."""
    prefix = f"t/connect-{s3_server.kind}-{uuid.uuid4().hex[:8]}"
    for name in ("wc-fail", "ds-fail"):
        s3.put_object(Bucket=BUCKET, Key=f"{prefix}/{name}/{EXISTING}", Body=b"x")
    work = tmp_path_factory.mktemp("connect")
    spec = {
        "base": f"s3://{BUCKET}/{prefix}",
        "out": str(work / "results.json"),
        "production": production_options(s3_server),
        "iceberg_catalog": f"sqlite:///{work / 'catalog.db'}",
    }
    results = run_connect_child(SCRIPT, spec, s3_server, work, timeout=900)
    yield ConnectRun(prefix, results, (work / "child.log").read_text(), spec)
    assert pending_uploads(s3, prefix + "/") == []


def production_options(s3_server) -> dict[str, str]:
    """SSE-KMS with a key the server knows (moto's KMS service, RGW's testing backend), and
    CRC32 checksums where the server keeps them (RGW 16 does not: its jobs would be refused)."""
    if s3_server.kind == "rgw":
        return {"encryption.algorithm": "SSE-KMS", "encryption.key": RGW_TEST_KMS_KEY}
    kms = boto3.client("kms", endpoint_url=s3_server.endpoint, region_name="us-east-1")
    key = kms.create_key(Description="s3commit connect tests")["KeyMetadata"]["KeyId"]
    return {"encryption.algorithm": "SSE-KMS", "encryption.key": key, "checksum.algorithm": "CRC32"}


@pytest.mark.parametrize("api", ["wc", "ds"])
def test_production_options_on_connect(connect, s3, api):
    """Options set on a Connect session's writes reach every task: each data file carries the
    KMS encryption (and, on moto, its CRC32 checksum), and ``_SUCCESS`` records them."""
    options = connect.spec["production"]
    assert connect.ok(f"{api}-production")["rows"] == 60
    prefix = f"{connect.prefix}/{api}-production/"
    data = [k for k in visible_keys(s3, prefix) if k.endswith(".parquet")]
    assert data
    for key in data:
        head = s3.head_object(Bucket=BUCKET, Key=key, ChecksumMode="ENABLED")
        assert head["ServerSideEncryption"] == "aws:kms", key
        assert head["SSEKMSKeyId"].endswith(options["encryption.key"]), key
        if "checksum.algorithm" in options:
            assert head.get("ChecksumCRC32"), key
    success = json.loads(s3.get_object(Bucket=BUCKET, Key=prefix + "_SUCCESS")["Body"].read())
    assert success["requestOptions"]["encryption.algorithm"] == "aws:kms"


def expected(n: int = 60, day0: int = 1) -> list[tuple]:
    return rows_of(pa.Table.from_pylist([as_dict(r) for r in sample_rows(n, day0)]))


def as_dict(row: tuple) -> dict:
    return dict(zip(("id", "city", "day", "amount"), row, strict=True))


@pytest.mark.parametrize("committer", COMMITTERS)
def test_write_committed_on_connect(connect, s3_server, s3, committer):
    outcome = connect.ok(f"wc-{committer}")
    assert outcome["rows"] == 60
    assert read_back(s3_server, f"{connect.prefix}/wc-{committer}") == expected()
    events = outcome["events"]
    phase, done, total, files, size = events[-1]
    assert (phase, done, total) == ("done", 3, 3)
    assert (files, size) == (outcome["files"], outcome["bytes"])
    writing = [e for e in events if e[0] == "writing" and e[2] is not None]
    assert writing, "no live progress while the tasks ran"
    assert list_keys(s3, f"{connect.prefix}/wc-{committer}/__s3commit/") == []


def test_progress_on_connect_counts_rows(connect):
    """Rows come with each task's result: the final event, the text log's lines while the tasks
    run and its summary, and the panel's summary count them (they read 0 rows before)."""
    outcome = connect.ok("wc-views")
    files = outcome["files"]
    assert outcome["rows"] == 60
    assert outcome["events"][-1] == ["done", 3, 3, 0, 60]
    assert all(done + running <= (total or 3) for _, done, total, running, _ in outcome["events"])
    assert f"Committed {files} file(s), 60 rows" in outcome["panel"]
    lines = outcome["text"]
    assert f"committed {files} file(s), 60 rows" in lines[-1]
    writing = [line for line in lines if line.startswith("connect: writing, ")]
    assert any(", 0 rows, " not in line for line in writing), lines


@pytest.mark.parametrize("committer", COMMITTERS)
def test_data_source_on_connect(connect, s3_server, committer):
    """The directory write ran before register(): Spark found the data source by itself."""
    outcome = connect.ok(f"ds-{committer}")
    assert (outcome["rows"], outcome["committer"]) == (60, committer)
    if committer != "partitioned":  # partitioned: overwritten below, checked there
        assert read_back(s3_server, f"{connect.prefix}/ds-{committer}") == expected()
    connect.ok("register")


def test_failing_task_on_connect_leaves_nothing_visible_or_pending(connect, s3):
    assert connect.failed("wc-fail")["error_type"] == "TaskFailedError"
    assert "injected failure" in connect.failed("ds-fail")["error"]
    for name in ("wc-fail", "ds-fail"):
        directory = f"{connect.prefix}/{name}/"
        assert visible_keys(s3, directory) == [directory + EXISTING]
        assert list_keys(s3, directory + "__s3commit/") == []
        assert [k for k in list_keys(s3, directory) if "__magic" in k] == []
        assert pending_uploads(s3, directory) == []


def test_the_local_connect_server_keeps_the_jvm_out_of_the_output(connect):
    """local_spark(connect=True): failed tasks ran (wc-fail, ds-fail), yet neither the JVM's
    start-up warnings nor its executors' stack traces reached the process's output."""
    connect.failed("wc-fail")
    for noise in (" WARN ", " ERROR ", "at org.apache.spark", "log4j"):
        assert noise not in connect.output, connect.output[-3000:]


def test_typed_errors_from_tasks_survive_connect(connect):
    outcome = connect.failed("wc-conflict")
    assert outcome["error_type"] == "ConflictError"
    assert "already holds data" in outcome["error"]


def test_overwrite_of_one_partition_keeps_the_others_on_connect(connect, s3_server):
    connect.ok("ds-overwrite")
    day = 2  # in the sorted columns amount, city, day, id
    day1 = [r for r in expected(9) if r[day] == "2026-11-01"]
    others = [r for r in expected() if r[day] != "2026-11-01"]
    assert read_back(s3_server, f"{connect.prefix}/ds-partitioned") == sorted(day1 + others)


@pytest.mark.parametrize("scenario", ["read", "read-pushdown"])
def test_reader_on_connect(connect, scenario):
    outcome = connect.ok(scenario)
    assert outcome["schema"] == "struct<id:int,city:string,amount:double,day:date>"
    assert sorted(map(tuple, outcome["rows"])) == expected()
    rows = [as_dict(r) for r in sample_rows()]
    wanted = [
        as_text(r) for r in rows if str(r["day"]) == "2026-11-02" and r["city"] in ("x/y", "a=b")
    ]
    assert sorted(map(tuple, outcome["filtered"])) == sorted(wanted)


class DataFrame:
    """A Connect DataFrame of a client without tags (as Spark 3.4's): what the SDK checks."""

    __module__ = "pyspark.sql.connect.dataframe"

    class sparkSession:
        pass

    def mapInArrow(self, *args):
        raise AssertionError("no task may run")


def test_iceberg_on_connect(connect, s3_server):
    """format='iceberg' on a Connect session: write_committed (committed in the client) and
    the data source (committed in the server's Python worker) each add one snapshot per job;
    the reader reads the current snapshot and an older one by snapshotId."""
    from pyiceberg.catalog.sql import SqlCatalog

    env = s3_server.env
    catalog = SqlCatalog(
        "default",
        uri=connect.spec["iceberg_catalog"],
        **{
            "s3.endpoint": s3_server.endpoint,
            "s3.access-key-id": env["AWS_ACCESS_KEY_ID"],
            "s3.secret-access-key": env["AWS_SECRET_ACCESS_KEY"],
            "s3.region": env["AWS_REGION"],
        },
    )
    wc = catalog.load_table("connect.wc")
    assert wc.current_snapshot().snapshot_id == connect.ok("wc-iceberg")["snapshot"]
    assert rows_of(wc.scan().to_arrow()) == expected()
    outcome = connect.ok("ds-iceberg")
    ds = catalog.load_table("connect.ds")
    operations = [s.summary.operation.value for s in ds.snapshots()]
    assert operations == ["append", "overwrite"]
    assert ds.snapshots()[0].snapshot_id == outcome["first"]
    assert outcome["then"] == 60 and outcome["now"] == ds.scan().to_arrow().num_rows < 60


def test_the_connect_servers_workers_that_ran_writes_freeze_their_heap(connect):
    """engines/worker_heap.py on a Connect session: the server's reused Python workers that
    ran the scenarios' writes keep their long-lived heap out of PySpark's per-task collection
    (the classic session's test is tests/test_worker_heap.py)."""
    frozen = connect.ok("worker-heap")["frozen"]
    assert any(count > 10_000 for count in frozen.values()), frozen


def test_a_session_without_tags_is_refused_by_name(s3, s3_server):
    with pytest.raises(UnsupportedSessionError, match="addTag, removeTag, interruptTag"):
        write_committed(DataFrame(), f"s3://{BUCKET}/t/never", progress=False)
