"""What every benchmark scenario shares: repetitions, statistics, the endpoint, the results file.

A scenario calls :func:`measure` (or builds samples itself and calls :func:`aggregate`) and adds
:class:`Record` s to a :class:`Run`; ``bench.run`` writes the run as JSON, a markdown report and
PNG charts. Every figure is the median of its repetitions, with min and max beside it.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from s3commit_sdk.testing.rgw import RGWServer

MIB = 2**20
BUCKET = "bench"
#: the endpoints every scenario runs against, the reference first
KINDS = ("rgw", "moto")
#: what each endpoint is, for the report
DESCRIPTIONS = {
    "rgw": "Ceph RGW 16 (memstore OSD): completes a multipart upload by metadata, as S3 does",
    "moto": "moto's S3 app: copies the parts into one object on completion",
}

Sample = dict[str, float]


def summarize(values: list[float]) -> dict[str, float]:
    """Median, min, max and count of one metric's repetitions."""
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "n": len(values),
    }


def aggregate(samples: list[Sample]) -> dict[str, dict[str, float]]:
    """Per metric, the summary over repetitions (metrics missing from a sample are skipped)."""
    names = sorted({name for sample in samples for name in sample})
    return {name: summarize([s[name] for s in samples if name in s]) for name in names}


def measure(repeats: int, once: Callable[[int], Sample]) -> dict[str, dict[str, float]]:
    """Run ``once(repetition)`` ``repeats`` times and summarize what it returns."""
    return aggregate([once(i) for i in range(repeats)])


@dataclass
class Record:
    """One case of one scenario: what was run (labels) and what was measured (metrics)."""

    scenario: str
    labels: dict[str, Any]
    metrics: dict[str, dict[str, float]]
    notes: dict[str, Any] = field(default_factory=dict)

    def median(self, metric: str) -> float:
        return self.metrics[metric]["median"]


@dataclass
class Target:
    """A goal from the benchmark issue, judged on the reference endpoint, with its figures.

    ``elsewhere`` holds the same figures measured on the other endpoints, for comparison.
    """

    name: str
    met: bool | None  # None: not measured in this run
    measured: str
    elsewhere: dict[str, str] = field(default_factory=dict)


@dataclass
class Run:
    mode: str
    endpoints: list[str] = field(default_factory=lambda: list(KINDS))
    started: float = field(default_factory=time.time)
    records: list[Record] = field(default_factory=list)
    targets: list[Target] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)  # wall time per scenario
    failures: dict[str, str] = field(default_factory=dict)  # scenario on endpoint -> error
    machine_info: dict[str, Any] = field(default_factory=lambda: machine())
    #: a run merged from parts (``bench.merge``): each part's start, commit, cases and time
    parts: list[dict[str, Any]] = field(default_factory=list)
    #: where the run so far is saved after every record and case (``<stamp>.partial.json``)
    partial: Path | None = field(default=None, repr=False, compare=False)

    def add(self, record: Record) -> Record:
        self.records.append(record)
        print(f"  {record.scenario}: {record.labels} -> {brief(record.metrics)}", flush=True)
        self.save_partial()
        return record

    def save_partial(self) -> None:
        """Save what is measured so far: a run stopped in a scenario of an hour or more keeps
        the cases that scenario finished."""
        if self.partial is not None:
            self.partial.write_text(json.dumps(self.to_json(), indent=2))

    def of(self, scenario: str, **labels: Any) -> list[Record]:
        return [
            r
            for r in self.records
            if r.scenario == scenario and all(r.labels.get(k) == v for k, v in labels.items())
        ]

    @classmethod
    def from_json(cls, document: dict[str, Any]) -> Run:
        """A run read back from its JSON (targets are evaluated again by the caller)."""
        return cls(
            mode=document["mode"],
            endpoints=list(document.get("endpoints", KINDS)),
            started=document["started"],
            records=[Record(**r) for r in document["records"]],
            seconds=document["seconds"],
            failures=document.get("failures", {}),
            machine_info=document["machine"],
            parts=document.get("parts", []),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "endpoints": {kind: DESCRIPTIONS[kind] for kind in self.endpoints},
            "started": self.started,
            "machine": self.machine_info,
            "seconds": self.seconds,
            "failures": self.failures,
            "records": [asdict(r) for r in self.records],
            "targets": [asdict(t) for t in self.targets],
            **({"parts": self.parts} if self.parts else {}),
        }


def brief(metrics: dict[str, dict[str, float]]) -> str:
    return ", ".join(f"{k}={v['median']:.3g}" for k, v in metrics.items())


def machine() -> dict[str, Any]:
    try:
        with open("/proc/meminfo") as f:
            mem_kib = int(f.readline().split()[1])
    except OSError:
        mem_kib = 0
    import pyarrow
    import pyspark

    return {
        "cpus": os.cpu_count(),
        "memory_gib": round(mem_kib / 2**20, 1),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "pyspark": pyspark.__version__,
        "pyarrow": pyarrow.__version__,
        "commit": code_commit(),
    }


def code_commit() -> str:
    """The checkout's commit, ``+dirty`` when files differ from it: which code was measured."""
    here = os.path.dirname(os.path.abspath(__file__))

    def git(*args: str) -> str:
        run = subprocess.run(["git", "-C", here, *args], capture_output=True, text=True, check=True)
        return run.stdout.strip()

    try:
        head = git("rev-parse", "--short", "HEAD")
        changed = git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+dirty" if changed else "")


def client_config(threads: int) -> Any:
    """botocore's config as our store sets it for a custom endpoint: checksums only where
    required, one connection per thread."""
    from botocore.config import Config

    return Config(
        max_pool_connections=max(threads, 10),
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
    )


class Endpoint:
    """One local S3 server the benchmarks write to.

    ``rgw`` is the reference: Ceph's RADOS Gateway (:class:`~s3commit_sdk.testing.rgw.RGWServer`),
    a production S3 server. ``moto`` is moto's S3 app (``bench/s3_server.py``). Both keep
    objects in RAM; :meth:`reset` empties the bucket and gives the memory back. Both can run at
    once: :meth:`activate` points this process's environment (what ``write_committed`` and
    boto3 read) at one of them.
    """

    def __init__(self, kind: str) -> None:
        from s3commit_sdk.testing.rgw import RGWServer
        from s3commit_sdk.testing.sandbox import S3Sandbox

        if kind not in KINDS:
            raise ValueError(f"unknown endpoint {kind!r}; use one of {', '.join(KINDS)}")
        self.kind = kind
        self.server = (
            RGWServer(bucket=BUCKET, export=False)
            if kind == "rgw"
            else S3Sandbox(bucket=BUCKET, server_module="bench.s3_server", export=False)
        )
        self.url = f"s3://{BUCKET}"

    @property
    def endpoint(self) -> str:
        return self.server.endpoint

    def client(self, threads: int = 10, **kwargs: Any):
        """A boto3 client configured as our store configures its own (:func:`client_config`)."""
        return self.server.client(config=client_config(threads), **kwargs)

    def reset(self) -> None:
        """An empty bucket, and the RAM its objects held handed back."""
        if self.kind == "moto":
            request = urllib.request.Request(f"{self.endpoint}/moto-api/reset", method="POST")
            urllib.request.urlopen(request, timeout=60).close()
            self.client().create_bucket(Bucket=BUCKET)
            return
        self._empty_bucket()
        self.collect_garbage()

    def collect_garbage(self) -> None:
        """The RAM of deleted and replaced objects handed back now (:func:`collect_rgw_garbage`;
        moto frees it at once)."""
        if self.kind == "rgw":
            collect_rgw_garbage(self.server)

    def _empty_bucket(self) -> None:
        client = self.client(threads=32)
        uploads = [
            (u["Key"], u["UploadId"])
            for page in client.get_paginator("list_multipart_uploads").paginate(Bucket=BUCKET)
            for u in page.get("Uploads", [])
        ]
        with ThreadPoolExecutor(32) as pool:
            list(
                pool.map(
                    lambda u: client.abort_multipart_upload(Bucket=BUCKET, Key=u[0], UploadId=u[1]),
                    uploads,
                )
            )
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET):
            keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
            if keys:
                client.delete_objects(Bucket=BUCKET, Delete={"Objects": keys, "Quiet": True})

    @property
    def pids(self) -> list[int]:
        """The server's processes (RGW: monitor, OSD and radosgw; moto: one)."""
        if self.kind == "rgw":
            return list(self.server.pids.values())
        return [self.server.process.pid] if self.server.process else []

    def activate(self) -> None:
        """Endpoint and keys of this server in ``os.environ``, for every client made from now."""
        os.environ.update(self.server.env)

    def pending_uploads(self) -> int:
        return len(self.client().list_multipart_uploads(Bucket=BUCKET).get("Uploads", []))

    def __enter__(self) -> Endpoint:
        self.server.start()
        RUNNING.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        RUNNING.remove(self)
        self.server.stop()


def collect_rgw_garbage(server: RGWServer) -> None:
    """Run RGW's garbage collector over every deleted object now. Deleted data stays in the
    OSD's RAM (its capacity, ``memstore_bytes``) until the collector runs, and a scenario that
    replaces data round after round fills it: then every write blocks."""
    server.admin("gc", "process", "--include-all")


#: the endpoints this process has started and not stopped
RUNNING: list[Endpoint] = []


def server_pids() -> list[int]:
    """The processes of every running endpoint: children of this process, but not its work."""
    return [pid for endpoint in RUNNING for pid in endpoint.pids]


@dataclass(frozen=True)
class ProcessCpu:
    """One process as ``/proc/<pid>/stat`` shows it."""

    started: int  # clock ticks after boot: with the pid, it names one process
    parent: int
    seconds: float  # user + system CPU of the process itself (all its threads)


def process_table() -> dict[int, ProcessCpu]:
    """Every process on the machine now."""
    tick = os.sysconf("SC_CLK_TCK")
    table: dict[int, ProcessCpu] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    fields = stat.read().rsplit(")", 1)[1].split()
            except OSError:
                continue  # it exited meanwhile
            # after the name: state, ppid, ..., utime stime (11, 12), ..., starttime (19)
            own = (int(fields[11]) + int(fields[12])) / tick
            table[int(entry)] = ProcessCpu(int(fields[19]), int(fields[1]), own)
    return table


def descendants(table: dict[int, ProcessCpu], roots: list[int], excluding: list[int]) -> set[int]:
    """``roots`` and every process below them, but not ``excluding`` nor theirs."""
    tree, added, skipped = set(roots) & table.keys(), True, set(excluding)
    while added:
        found = {pid for pid, p in table.items() if p.parent in tree} - tree - skipped
        tree |= found
        added = bool(found)
    return tree


#: seconds between two samples of a CPU window: a process that exits loses at most this much
CPU_SAMPLE_S = 0.25


class CpuWindow:
    """CPU seconds (user + system) that process trees use while the window is open::

        with CpuWindow({"client": ([os.getpid()], server_pids())}) as cpu:
            ...
        cpu.seconds["client"]

    Each tree is ``(roots, excluding)``: the roots and their descendants, without the excluded
    processes and theirs (e.g. the S3 server this process started). The processes' own times
    are sampled every ``interval`` seconds (None: at the start and the end only, for trees
    whose processes outlive the window), and each process counts from its start or the
    window's, to its last sample. Children's times reaped into a parent are not read: a parent
    that ignores SIGCHLD (PySpark's daemon, whose idle Python workers Spark kills) reaps them
    without accounting, and a tree's total read that way fell below zero when workers exited
    in the window. A sample costs about 4 ms of this process's CPU (some 75 processes): 1.5% of
    a core, in every writer's client CPU alike. On a machine shared with other work, what a
    writer costs in CPU is steadier than its wall time.
    """

    def __init__(
        self,
        trees: dict[str, tuple[list[int], list[int]]],
        interval: float | None = CPU_SAMPLE_S,
    ) -> None:
        self.trees, self.interval = trees, interval
        self._before: dict[int, ProcessCpu] = {}
        self._last: dict[str, dict[tuple[int, int], float]] = {name: {} for name in trees}
        self._stop = threading.Event()
        self._sampler: threading.Thread | None = None

    def __enter__(self) -> CpuWindow:
        self._before = self._sample()
        if self.interval is not None:
            self._sampler = threading.Thread(target=self._run, name="cpu-window", daemon=True)
            self._sampler.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._sampler is not None:
            self._sampler.join()
        self._sample()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def _sample(self) -> dict[int, ProcessCpu]:
        table = process_table()
        for name, (roots, excluding) in self.trees.items():
            last = self._last[name]
            for pid in descendants(table, roots, excluding):
                last[(pid, table[pid].started)] = table[pid].seconds
        return table

    @property
    def seconds(self) -> dict[str, float]:
        """Each tree's CPU seconds in the window."""
        return {
            name: sum(s - self._at_start(k) for k, s in last.items())
            for name, last in self._last.items()
        }

    def _at_start(self, process: tuple[int, int]) -> float:
        """A process's CPU when the window opened (0: it started in the window)."""
        pid, started = process
        before = self._before.get(pid)
        return before.seconds if before is not None and before.started == started else 0.0


def cpu_of(endpoint: Endpoint, action: Callable[[], Any]) -> tuple[dict[str, float], Any]:
    """``action``'s client CPU (this process and what it started: Spark's JVM, the Python
    workers; not the endpoints' servers) and ``endpoint``'s server CPU, as ``client_cpu_s`` and
    ``server_cpu_s``, and what it returned. On 2 cores shared with the server, their sum over
    the cores is the least time the action could take."""
    trees = {"client_cpu_s": ([os.getpid()], server_pids()), "server_cpu_s": (endpoint.pids, [])}
    with CpuWindow(trees) as cpu:
        value = action()
    return cpu.seconds, value


@contextmanager
def proxied(endpoint: Endpoint, rules: list) -> Iterator[tuple[Any, str]]:
    """The fault proxy in front of ``endpoint`` with ``rules``: (proxy, its endpoint URL)."""
    from s3commit_sdk.testing.faultproxy import FaultProxy

    with FaultProxy(endpoint.endpoint) as proxy:
        proxy.set_rules(rules, seed=0)
        yield proxy, proxy.endpoint


def timed(action: Callable[[], Any]) -> tuple[float, Any]:
    started = time.monotonic()
    value = action()
    return time.monotonic() - started, value
