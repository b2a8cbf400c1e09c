"""Shared fixtures: two S3 servers, one Spark session per test session.

Every test that talks to S3 runs twice, against moto (a mock, quick) and against a one-node Ceph
RGW (a production S3 server), through the ``s3_server`` fixture's two parameters. Choose with
``S3COMMIT_TEST_ENDPOINTS=moto`` (or ``rgw``, or ``moto,rgw``: the default); the RGW runs carry
the ``rgw`` marker, tests taking the ``spark`` fixture the ``spark`` marker. On RGW a test's
parameter matrix is cut to its first parameter set, and Spark's, the notebooks' and the browser's
tests run on moto only (``rgw_matrix.py``), unless ``S3COMMIT_TEST_RGW_MATRIX=full``.
Every test that writes gets its own destination prefix (``dest``); after the test the fixture
asserts that no multipart upload is left pending under that prefix.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
# every Spark JVM of the suite (here, in children, in notebooks' kernels) reads these defaults
os.environ["SPARK_CONF_DIR"] = str(Path(__file__).parent / "spark-conf")

from rgw_matrix import select_rgw_matrix

from s3commit_sdk.testing.rgw import RGWServer
from s3commit_sdk.testing.sandbox import DUMMY_ENV, S3Sandbox, local_spark

BUCKET = "test-bucket"
SERVERS = {"moto": S3Sandbox, "rgw": RGWServer}
ENDPOINTS = [e.strip() for e in os.environ.get("S3COMMIT_TEST_ENDPOINTS", "moto,rgw").split(",")]
if unknown := set(ENDPOINTS) - set(SERVERS):
    raise ValueError(f"S3COMMIT_TEST_ENDPOINTS: unknown {sorted(unknown)}; use moto and/or rgw")


@pytest.fixture(
    scope="session",
    params=[pytest.param(e, marks=pytest.mark.rgw) if e == "rgw" else e for e in ENDPOINTS],
)
def s3_server(request):
    """An S3 server process on 127.0.0.1 (moto or Ceph RGW), its endpoint exported to boto3."""
    with SERVERS[request.param](bucket=BUCKET) as server:
        yield server


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test that takes the session's Spark is marked ``spark`` (``-m "not spark"``); on
    RGW each test's parameter matrix is cut to one set (``rgw_matrix``)."""
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.spark)
    select_rgw_matrix(config, items, os.environ.get("S3COMMIT_TEST_RGW_MATRIX", "first"))


def differs_on(s3_server, kind: str, why: str) -> bool:
    """Where a server answers differently from S3, a test says so by name; never a silent skip.

    Returns True on that server so the test can take its documented branch.
    """
    if s3_server.kind != kind:
        return False
    print(f"[{kind} differs from S3] {why}")
    return True


@pytest.fixture(scope="session")
def s3(s3_server):
    """A plain boto3 client for assertions (not the SDK's store)."""
    return s3_server.client()


@pytest.fixture(scope="session")
def spark():
    """Real Spark, ``local[2,3]``: two cores, a failed task is retried (3 attempts).

    Independent of the S3 server: the driver resolves the endpoint per job and ships it to the
    tasks, so one session serves both servers. The JVM and the Python workers it starts keep
    the environment they started with: the servers' dummy keys (both take the same) are set
    first, whether or not a server fixture has exported them yet.
    """
    for name, value in DUMMY_ENV.items():
        os.environ.setdefault(name, value)
    session = local_spark("local[2,3]", app_name="s3commit-tests")
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def running_proxy(s3_server):
    """The fault-injecting proxy in front of the moto server, for the whole session."""
    from s3commit_sdk.testing.faultproxy import FaultProxy

    with FaultProxy(s3_server.endpoint) as proxy:
        yield proxy


@pytest.fixture
def proxy(running_proxy):
    """The session's proxy with no rules and zeroed counters."""
    running_proxy.reset()
    yield running_proxy
    running_proxy.reset()


def pending_uploads(s3, prefix: str) -> list[dict]:
    return s3.list_multipart_uploads(Bucket=BUCKET, Prefix=prefix).get("Uploads", [])


def list_keys(s3, prefix: str) -> list[str]:
    keys, token = [], None
    while True:
        kwargs = {
            "Bucket": BUCKET,
            "Prefix": prefix,
            **({"ContinuationToken": token} if token else {}),
        }
        page = s3.list_objects_v2(**kwargs)
        keys += [o["Key"] for o in page.get("Contents", [])]
        token = page.get("NextContinuationToken")
        if not token:
            return sorted(keys)


def visible_keys(s3, prefix: str) -> list[str]:
    """Keys a reader would see: no hidden path segment below the prefix."""
    rel = len(prefix)
    return [
        k
        for k in list_keys(s3, prefix)
        if not any(seg[:1] in "_." for seg in k[rel:].split("/") if seg)
    ]


class Dest:
    """A fresh destination prefix in the test bucket."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix  # no trailing slash
        self.url = f"s3://{BUCKET}/{prefix}"
        self.dir = prefix + "/"


@pytest.fixture
def dest(s3, request):
    # pytest escapes non-ASCII ids with backslashes, which S3 destinations may not hold
    name = request.node.name.replace("[", "-").replace("]", "").replace("/", "-")
    name = name.replace("\\", "-")[:60]
    d = Dest(f"t/{name}-{uuid.uuid4().hex[:8]}")
    yield d
    leaked = pending_uploads(s3, d.dir)
    request.node.user_properties.append(("pending_uploads", len(leaked)))
    assert leaked == [], f"pending uploads left under {d.dir}: {[u['Key'] for u in leaked]}"


def read_back(s3_server, prefix: str, fmt: str = "parquet") -> list[tuple]:
    """Every row at the destination through pyarrow's S3 filesystem, as sorted string tuples."""
    import pyarrow.dataset as ds

    dataset = ds.dataset(
        f"{BUCKET}/{prefix}",
        filesystem=s3_server.arrow_fs(),
        format=fmt,
        partitioning=ds.HivePartitioning.discover(infer_dictionary=False),
    )
    return rows_of(dataset.to_table())


def rows_of(table, columns: list[str] | None = None) -> list[tuple]:
    columns = columns or sorted(table.column_names)
    data = table.select(columns).to_pylist()
    return sorted(tuple("<null>" if r[c] is None else str(r[c]) for c in columns) for r in data)


def sdk_table(url: str, options: dict | None = None):
    """Every row through the SDK's reader (what the data source reads), as Arrow."""
    from s3commit_sdk import read_table

    return read_table(url, options=options)


def delta_storage(s3_server) -> dict[str, str]:
    """deltalake's storage options for the test S3 server."""
    env = s3_server.env
    return {
        "AWS_ENDPOINT_URL": s3_server.endpoint,
        "AWS_ACCESS_KEY_ID": env["AWS_ACCESS_KEY_ID"],
        "AWS_SECRET_ACCESS_KEY": env["AWS_SECRET_ACCESS_KEY"],
        "AWS_REGION": env["AWS_REGION"],
        "AWS_ALLOW_HTTP": "true",
    }


def wait_for_request(proxy, operation: str, count: int, job) -> None:
    """Until the proxy has seen ``count`` requests of ``operation`` (the last one held) while
    ``job`` (a future) runs."""
    import time

    deadline = time.monotonic() + 120
    while proxy.counts.get(operation, 0) < count:
        assert not job.done(), f"the job ended before its {operation} #{count}: {job.exception()}"
        assert time.monotonic() < deadline, f"no {operation} #{count} within 120 s"
        time.sleep(0.02)


def children_named(names: set[str]) -> set[int]:
    """Processes of these names (``/proc/<pid>/comm``) that are children of this process,
    alive or not yet reaped: what a server launcher must not leave behind."""
    found = set()
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{entry}/comm") as comm:
                name = comm.read().strip()
        except OSError:
            continue
        if int(fields[1]) == os.getpid() and name in names:
            found.add(int(entry))
    return found


def download(s3, prefix: str, target) -> str:
    """Copy every object under a prefix to a local directory, for readers that need a path."""
    for key in list_keys(s3, prefix + "/"):
        path = target / key[len(prefix) + 1 :]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(s3.get_object(Bucket=BUCKET, Key=key)["Body"].read())
    return str(target)


def marker_writer(s3_server, bucket: str, key: str, marker: dict):
    """A function for a Spark UDF: inside the tasks (after job setup) it writes another job's
    commit marker at ``key``, with the endpoint and keys the workers' environment lacks."""
    env = s3_server.env
    body = json.dumps(marker).encode()

    def write_marker(value):
        import boto3

        client = boto3.client(
            "s3",
            endpoint_url=env["AWS_ENDPOINT_URL"],
            aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
            region_name=env["AWS_REGION"],
        )
        client.put_object(Bucket=bucket, Key=key, Body=body)
        return value

    return write_marker


def run_connect_child(script: Path, spec: dict, s3_server, work: Path, timeout: float) -> dict:
    """Run a Connect scenario script in a process of its own (a Connect session cannot share
    the test session's process) and return the JSON it wrote to ``spec["out"]``.

    ``PYTHONPATH`` names the repository, so Spark's lookup of ``pyspark_*`` modules finds
    ``pyspark_s3commit`` (an editable install hides top-level modules from that lookup).
    """
    paths = [str(Path(__file__).parents[1]), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, **s3_server.env, "PYTHONPATH": os.pathsep.join(paths)}
    with open(work / "child.log", "w") as log:
        child = subprocess.run(
            [sys.executable, str(script), json.dumps(spec)],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            timeout=timeout,
            check=False,
        )
    if child.returncode != 0:
        pytest.fail(f"the Connect child failed:\n{(work / 'child.log').read_text()[-6000:]}")
    return json.loads(Path(spec["out"]).read_text())


#: the phases of a job of 12.6 s whose four tasks ran 1.2 s to 1.9 s each (6 s in all) on
#: fewer slots: the nesting the text report and the widget both draw
NESTED_PHASES = {
    "job_setup": 0.1,
    "tasks": 12.0,
    "task_write": 9.0,
    "task_commit": 3.0,
    "conflict_resolution": 0.05,
    "complete_uploads": 0.2,
    "cleanup": 0.05,
    "job_commit": 0.5,
}
