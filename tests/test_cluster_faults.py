"""Faults that need more than one process: dead Python workers, killed executors, speculation.

Spark runs in child processes (``spark_clusters.DriverProcess``), since the session fixture
``spark`` may already hold this process's one SparkContext: a ``local-cluster[2,1,1024]`` driver
(two executor JVMs) for the worker and executor faults, and a driver on a standalone cluster
(master on 127.0.0.1, single-core workers on 127.0.0.2 and 127.0.0.3) for speculation, because
Spark only places a speculative copy on another host. Both start together, once per module.

Every row written carries the attempt number of the task attempt that wrote it, so the
read-back shows whose output became visible. Checked after each job (DESIGN section 5):
complete (read back equals the input, every id once), exclusive (one attempt per task visible,
nothing of the faulty or losing attempt, only the committed files), no leaks (zero pending
uploads under the destination, again after the faulty attempt has had time to write late).
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections import Counter
from pathlib import Path

import pyarrow.dataset as ds
import pytest
from conftest import BUCKET, list_keys, pending_uploads, visible_keys
from spark_clusters import (
    SUITE_JAVA_OPTS,
    DriverProcess,
    StandaloneCluster,
    group,
    is_executor,
    pad,
    partition_ranges,
)

pytestmark = [pytest.mark.cluster, pytest.mark.spark, pytest.mark.fault]

ROWS_PER_TASK = 1000  # of ~2 KB each
COMMON_CONF = {  # the driver's and executors' JVM options: tests/spark-conf
    "spark.task.maxFailures": "4",
    "spark.sql.execution.arrow.maxRecordsPerBatch": "100",
    "spark.sql.shuffle.partitions": "4",
    "spark.locality.wait": "0s",
}
SPECULATION_CONF = {
    **COMMON_CONF,
    "spark.speculation": "true",
    "spark.speculation.interval": "100ms",
    "spark.speculation.multiplier": "1.5",
    "spark.speculation.quantile": "0.5",
    "spark.speculation.minTaskRuntime": "500ms",
    "spark.speculation.efficiency.enabled": "false",
    # How long a killed attempt's Python workers may go on before Spark SIGKILLs them (2 s by
    # default, which ends a loser stuck in user code): long enough for the held loser to be
    # released after the job has committed, so it writes late for certain.
    "spark.python.task.killTimeout": "120s",
    "spark.executor.memory": "512m",
    "spark.executor.cores": "1",
    "spark.cores.max": "2",
}
OPTIONS = {"multipart.size": "5MB"}
HOLD_MAX = 90  # seconds a held attempt waits for its release file at most


# -- fixtures ------------------------------------------------------------------------------------
class Clusters:
    """The Spark processes of this module, launched together so their JVMs start in parallel."""

    def __init__(self, tmp_path_factory) -> None:
        self.tmp = tmp_path_factory
        self.drivers: dict[str, DriverProcess] = {}
        self.ready: dict[str, dict] = {}
        self.standalone: StandaloneCluster | None = None

    def launch(self, name: str) -> None:
        if name in self.drivers:
            return
        work = self.tmp.mktemp(name)
        if name == "local":
            master, conf = "local-cluster[2,1,1024]", COMMON_CONF
        else:
            hosts = ("127.0.0.2", "127.0.0.3")
            self.standalone = StandaloneCluster(work, hosts, SUITE_JAVA_OPTS).start()
            master, conf = self.standalone.url, SPECULATION_CONF
        self.drivers[name] = DriverProcess(master, conf, executors=2, log=work / "driver.log")

    def driver(self, name: str) -> DriverProcess:
        self.launch(name)
        if name not in self.ready:
            self.ready[name] = self.drivers[name].receive(timeout=300)
            assert self.ready[name]["executors"] == 2, self.ready[name]
        return self.drivers[name]

    def stop(self) -> None:
        for driver in self.drivers.values():
            driver.stop()
        if self.standalone is not None:
            self.standalone.stop()


@pytest.fixture(scope="module")
def clusters(s3_server, tmp_path_factory, request):
    launched = Clusters(tmp_path_factory)
    try:
        selected = [
            i for i in request.session.items if getattr(i, "module", None) is request.module
        ]
        if any("local_cluster" in i.fixturenames for i in selected):
            launched.launch("local")
        if any("speculation_cluster" in i.fixturenames for i in selected):
            launched.launch("standalone")
        yield launched
    finally:
        launched.stop()


@pytest.fixture
def local_cluster(clusters):
    """A driver on ``local-cluster[2,1,1024]``: two executor JVMs of one core each."""
    return clusters.driver("local")


@pytest.fixture
def speculation_cluster(clusters):
    """A driver on the standalone cluster, speculation on."""
    return clusters.driver("standalone")


# -- helpers -------------------------------------------------------------------------------------
def start_write(
    driver, dest, tmp_path, committer, fault=None, partition_by=(), partitions=4, endpoint=None
) -> None:
    (tmp_path / "markers").mkdir(exist_ok=True)
    options = {**OPTIONS, "buffer.dir": str(tmp_path / "buffer")}
    if endpoint:
        options["endpoint"] = endpoint
    driver.send(
        {
            "op": "write",
            "dest": dest.url,
            "committer": committer,
            "partition_by": list(partition_by),
            "rows": ROWS_PER_TASK * partitions,
            "partitions": partitions,
            "markers": str(tmp_path / "markers"),
            "fault": fault,
            "options": options,
        }
    )


def markers(tmp_path: Path) -> dict[str, dict]:
    return {
        p.name.removesuffix(".json"): json.loads(p.read_text())
        for p in (tmp_path / "markers").glob("*.json")
    }


def wait_for_marker(tmp_path: Path, name: str, timeout: float) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = markers(tmp_path)
        if name in found:
            return found[name]
        time.sleep(0.1)
    raise AssertionError(f"no marker {name} in {timeout} s; have {sorted(markers(tmp_path))}")


def release(tmp_path: Path, tag: str) -> None:
    (tmp_path / "markers" / f"release-{tag}").touch()


def read_rows(s3_server, dest) -> list[dict]:
    dataset = ds.dataset(
        f"{BUCKET}/{dest.prefix}",
        filesystem=s3_server.arrow_fs(),
        format="parquet",
        partitioning=ds.HivePartitioning.discover(infer_dictionary=False),
    )
    return dataset.to_table().to_pylist()


def check_exactly_once(
    s3, s3_server, dest, result, partition_by=(), partitions=4
) -> dict[int, int]:
    """Complete and exclusive: every input row once, each task's rows from one attempt, and
    exactly the committed files visible. Returns the attempt whose output is visible, per task.
    """
    assert result["ok"], result
    rows_in = ROWS_PER_TASK * partitions
    assert result["rows"] == rows_in
    rows = read_rows(s3_server, dest)
    ids = Counter(r["id"] for r in rows)
    assert [i for i, n in ids.items() if n > 1] == [], "rows visible twice"
    assert sorted(ids) == list(range(rows_in)), "rows missing"
    assert all(r["pad"] == pad(r["id"]) for r in rows)
    if "grp" in partition_by:
        assert all(r["grp"] == group(r["id"]) for r in rows)
    winners = {}
    for p, ids_of_task in enumerate(partition_ranges(rows_in, partitions)):
        attempts = {r["attempt"] for r in rows if r["id"] in ids_of_task}
        assert len(attempts) == 1, f"task {p}: rows of attempts {attempts} visible"
        winners[p] = attempts.pop()
    files = result["files"]
    keys = [f["key"] for f in files]
    assert len(keys) == len(set(keys))
    assert visible_keys(s3, dest.dir) == sorted(keys)
    assert sorted({f["task"] for f in files}) == [f"task_{p:05d}" for p in range(partitions)]
    assert sum(f["rows"] for f in files) == rows_in
    assert dest.dir + "_SUCCESS" in list_keys(s3, dest.dir)
    return winners


def etags(s3, dest) -> dict[str, str]:
    return {k: s3.head_object(Bucket=BUCKET, Key=k)["ETag"] for k in visible_keys(s3, dest.dir)}


def assert_no_pending_uploads(s3, dest, settle: float = 0.0) -> None:
    """Zero pending uploads now, and again after ``settle`` seconds (late writers)."""
    assert pending_uploads(s3, dest.dir) == []
    if settle:
        time.sleep(settle)
        leaked = [u["Key"] for u in pending_uploads(s3, dest.dir)]
        assert leaked == [], f"uploads started late and left pending: {leaked}"


def assert_buffer_empty(tmp_path: Path) -> None:
    left = [str(p) for p in (tmp_path / "buffer").rglob("*") if p.is_file()]
    assert left == [], f"staging files left behind: {left}"


# -- local-cluster: a dead Python worker, a killed executor -------------------------------------
@pytest.mark.long
@pytest.mark.parametrize("committer", ["directory", "magic"])
def test_python_worker_exit_mid_write_then_retry(
    local_cluster, s3, s3_server, dest, tmp_path, committer
):
    """A Python worker of attempt 0 of task 1 dies (``os._exit(1)``) after 600 of 1000 rows.

    The writer of that attempt (the ``mapInArrow`` worker, a separate process) has by then
    received about half of the rows, and the magic committer has an upload open. PySpark
    gives the writer a clean end of input when the JVM drops it, so the faulty attempt even
    commits its truncated output; only the retry's output may become visible, and job commit
    aborts the truncated attempt's uploads.
    """
    fault = {"partition": 1, "attempts": [0], "after_rows": 600, "kind": "exit"}
    start_write(local_cluster, dest, tmp_path, committer, fault)
    result = local_cluster.receive(timeout=300)
    winners = check_exactly_once(s3, s3_server, dest, result)
    assert winners[1] >= 1, "the faulty attempt's rows are visible"
    seen = markers(tmp_path)
    assert "fault-p1-a0" in seen and f"start-p1-a{winners[1]}" in seen, sorted(seen)
    assert_no_pending_uploads(s3, dest, settle=2)
    assert_buffer_empty(tmp_path)


@pytest.mark.long
@pytest.mark.parametrize("committer", ["directory", "magic"])
def test_executor_jvm_killed_mid_task_reruns_elsewhere(
    local_cluster, s3, s3_server, dest, tmp_path, committer
):
    """SIGKILL the executor JVM that runs attempt 0 of task 2 once it has produced 500 rows."""
    fault = {"partition": 2, "attempts": [0], "after_rows": 500, "kind": "hold"}
    start_write(local_cluster, dest, tmp_path, committer, {**fault, "seconds": HOLD_MAX})
    try:
        held = wait_for_marker(tmp_path, "fault-p2-a0", timeout=240)
        executor = held["executor"]
        assert executor and is_executor(executor), held
        os.kill(executor, signal.SIGKILL)
        result = local_cluster.receive(timeout=300)
    finally:
        release(tmp_path, "p2-a0")
    winners = check_exactly_once(s3, s3_server, dest, result)
    assert winners[2] >= 1
    rerun = markers(tmp_path)[f"start-p2-a{winners[2]}"]
    assert rerun["executor"] != executor, "the task reran on the executor that was killed"
    assert_no_pending_uploads(s3, dest, settle=2)
    # the killed attempt's local files: job commit cleans the buffer of the driver's host
    assert_buffer_empty(tmp_path)


# -- speculation: standalone master, workers on two loopback hosts ------------------------------
def late_requests(proxy, before: dict[str, int], start_within=30.0, quiet=3.0) -> dict:
    """S3 requests made after ``before`` was taken: wait for the first, then for a pause."""
    deadline = time.monotonic() + start_within
    while dict(proxy.counts) == before and time.monotonic() < deadline:
        time.sleep(0.1)
    last, since = dict(proxy.counts), time.monotonic()
    while time.monotonic() - since < quiet and time.monotonic() < deadline + 60:
        time.sleep(0.2)
        if dict(proxy.counts) != last:
            last, since = dict(proxy.counts), time.monotonic()
    late = {op: n - before.get(op, 0) for op, n in last.items()}
    return {op: n for op, n in late.items() if n}


# The magic committer is left out here: its held loser has already opened its upload, and
# whether it makes another request after release depends on when Spark's kill lands, so the
# precondition below is not deterministic for it. tests/test_continuity.py runs a late attempt
# of all three committers after job commit directly.
# The partitioned case is `long` (make test-all and make faults run it): on 2026-11-28 its
# precondition failed once in five runs (the released loser made no request within 30 s after the
# job committed), why is not known yet; the directory case stays in make test.
@pytest.mark.parametrize(
    "committer, partition_by",
    [("directory", ()), pytest.param("partitioned", ("grp",), marks=pytest.mark.long)],
)
def test_speculative_loser_writing_after_commit_leaves_nothing(
    speculation_cluster, proxy, s3, s3_server, dest, tmp_path, committer, partition_by
):
    """Attempt 0 of task 1 is held after 300 of its 1000 rows; Spark speculates attempt 1 on
    the other host, which wins, and the job commits. Only then is the loser released: its
    writer gets the rest of its input and goes on to write and commit after the job ended
    (Spark's kill only lands once the attempt leaves user code). Nothing of it may become
    visible or stay pending, and the committed output must stay as it was.
    """
    fault = {"partition": 1, "attempts": [0], "after_rows": 300, "kind": "hold", "gate": True}
    start_write(
        speculation_cluster,
        dest,
        tmp_path,
        committer,
        {**fault, "seconds": HOLD_MAX},
        partition_by,
        partitions=2,
        endpoint=proxy.endpoint,
    )
    try:
        result = speculation_cluster.receive(timeout=300)
        at_commit = dict(proxy.counts)
        seen = markers(tmp_path)
        assert "woke-p1-a0" not in seen, "the loser was released before the job committed"
    finally:
        release(tmp_path, "p1-a0")
    assert "fault-p1-a0" in seen, f"attempt 0 never reached its hold: {sorted(seen)}"
    winners = check_exactly_once(s3, s3_server, dest, result, partition_by, partitions=2)
    # speculation happened: attempt 1 of task 1 ran on the other host, and won
    assert "start-p1-a1" in seen, f"no speculative attempt ran: {sorted(seen)}"
    assert seen["start-p1-a1"]["host"] != seen["fault-p1-a0"]["host"]
    assert winners == {0: 0, 1: 1}
    committed = etags(s3, dest)

    assert wait_for_marker(tmp_path, "woke-p1-a0", timeout=30)["time"] > result["committed_at"]
    # the loser talks to S3 after the job has committed (else this test proves nothing)
    late = late_requests(proxy, at_commit)
    assert late, "the loser made no S3 request after the job committed"
    leaked = [u["Key"] for u in pending_uploads(s3, dest.dir)]
    assert leaked == [], f"the loser left uploads pending after job commit: {leaked} ({late})"
    assert etags(s3, dest) == committed
    assert check_exactly_once(s3, s3_server, dest, result, partition_by, partitions=2) == winners
