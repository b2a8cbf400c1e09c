"""What every benchmark scenario shares: repetitions, statistics, the endpoint, the results file.

A scenario calls :func:`measure` (or builds samples itself and calls :func:`aggregate`) and adds
:class:`Record` s to a :class:`Run`; ``bench.run`` writes the run as JSON, a markdown report and
PNG charts. Every figure is the median of its repetitions, with min and max beside it.
"""

from __future__ import annotations

import os
import platform
import statistics
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

MIB = 2**20
BUCKET = "bench"

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
    """A goal from the benchmark issue, reported as met or not, with the measured value."""

    name: str
    met: bool | None  # None: not measured in this run
    measured: str
    why: str = ""


@dataclass
class Run:
    mode: str
    started: float = field(default_factory=time.time)
    records: list[Record] = field(default_factory=list)
    targets: list[Target] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)  # wall time per scenario

    def add(self, record: Record) -> Record:
        self.records.append(record)
        print(f"  {record.scenario}: {record.labels} -> {brief(record.metrics)}", flush=True)
        return record

    def of(self, scenario: str, **labels: Any) -> list[Record]:
        return [
            r
            for r in self.records
            if r.scenario == scenario and all(r.labels.get(k) == v for k, v in labels.items())
        ]

    def to_json(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "started": self.started,
            "machine": machine(),
            "seconds": self.seconds,
            "records": [asdict(r) for r in self.records],
            "targets": [asdict(t) for t in self.targets],
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
    }


class Endpoint:
    """The local S3 endpoint (a moto server process) the benchmarks write to.

    moto keeps objects in memory, so :meth:`reset` empties it between cases.
    """

    def __init__(self) -> None:
        from s3commit_sdk.sandbox import S3Sandbox

        self.sandbox = S3Sandbox(bucket=BUCKET, server_module="bench.s3_server")
        self.url = f"s3://{BUCKET}"

    @property
    def endpoint(self) -> str:
        return self.sandbox.endpoint

    def client(self, **kwargs: Any):
        return self.sandbox.client(**kwargs)

    def reset(self) -> None:
        request = urllib.request.Request(f"{self.endpoint}/moto-api/reset", method="POST")
        urllib.request.urlopen(request, timeout=60).close()
        self.client().create_bucket(Bucket=BUCKET)

    def pending_uploads(self) -> int:
        return len(self.client().list_multipart_uploads(Bucket=BUCKET).get("Uploads", []))

    def __enter__(self) -> Endpoint:
        self.sandbox.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.sandbox.stop()


@contextmanager
def proxied(endpoint: Endpoint, rules: list) -> Iterator[tuple[Any, str]]:
    """The fault proxy in front of ``endpoint`` with ``rules``: (proxy, its endpoint URL)."""
    from s3commit_sdk.faultproxy import FaultProxy

    with FaultProxy(endpoint.endpoint) as proxy:
        proxy.set_rules(rules, seed=0)
        yield proxy, proxy.endpoint


def timed(action: Callable[[], Any]) -> tuple[float, Any]:
    started = time.monotonic()
    value = action()
    return time.monotonic() - started, value
