"""Scenarios 1, 3 and 7: one Spark DataFrame written by every committer, side by side.

1. End to end by data size, with the phase breakdown (task write, task commit, job commit),
   beside the floor: Spark's own Parquet writer onto local disk, as time and client CPU ratios.
3. Requests per committed file by operation and bytes copied server-side, counted on the wire
   by the proxy (so the classic committer's renames show as the copies they are).
7. The same through the proxy with emulated S3 latency and copy bandwidth.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from s3commit_sdk import write_committed

from .data import DAYS, spark_frame, tasks_for
from .direct import direct_write
from .harness import (
    MIB,
    Endpoint,
    Record,
    Run,
    Sample,
    aggregate,
    cpu_of,
    proxied,
)

#: what s3commit_sdk.writers compresses Parquet with, and Spark's default: the floor writes alike
COMPRESSION = "snappy"
#: the ``committer`` of the writer that is Spark's own, onto local disk
LOCAL_DISK = "spark-local"


@dataclass(frozen=True)
class Writer:
    """One way of writing the DataFrame: a committer and its options, the direct write, or
    Spark's own writer onto local disk."""

    name: str
    committer: str
    options: tuple[tuple[str, Any], ...] = ()

    def write(self, df, url: str, partition_by: list[str], extra: dict) -> dict[str, Any]:
        options = {**dict(self.options), **extra}
        if self.committer == "direct":
            return _unprotocolled(direct_write(df, url, partition_by, options))
        if self.committer == LOCAL_DISK:
            return _unprotocolled(spark_local_write(df, partition_by))
        result = write_committed(
            df,
            url,
            committer=self.committer,
            partition_by=partition_by or None,
            conflict_mode="append",
            progress=False,
            options=options,
        )
        return {
            "seconds": result.duration_s,
            "bytes": result.bytes,
            "files": len(result.files),
            "phases": result.phases,
            "requests": result.requests,
            "checks": result.success.get("completionChecks", {}),
        }


def _unprotocolled(done: dict[str, float]) -> dict[str, Any]:
    """The outcome of a write with no commit protocol: all of it is the tasks' writing."""
    return {
        "seconds": done["seconds"],
        "bytes": done["bytes"],
        "files": done["files"],
        "phases": {"task_write": done["seconds"]},
        "requests": {},
        "checks": {},
    }


def spark_local_write(df: Any, partition_by: Sequence[str] = ()) -> dict[str, float]:
    """Spark's own ``df.write.parquet`` into a fresh local directory, deleted afterwards: the
    floor every committer is measured against (same data, layout and compression); wall
    seconds, Parquet files and their bytes."""
    scratch = Path(tempfile.mkdtemp(prefix="s3commit-bench-local-"))
    out = scratch / "out"
    try:
        writer = df.write.option("compression", COMPRESSION)
        if partition_by:
            writer = writer.partitionBy(*partition_by)
        started = time.monotonic()
        writer.parquet(str(out))
        seconds = time.monotonic() - started
        files = list(out.rglob("*.parquet"))
        return {
            "seconds": seconds,
            "files": len(files),
            "bytes": sum(f.stat().st_size for f in files),
        }
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


#: the floor: every end-to-end case runs it beside the writers it was asked for
SPARK_LOCAL = Writer("spark (local disk)", LOCAL_DISK)
WRITERS = (
    Writer("direct (unsafe)", "direct"),
    Writer("directory", "directory"),
    Writer("partitioned", "partitioned"),
    Writer("magic", "magic"),
    Writer("classic v1", "file", (("algorithm.version", 1),)),
    Writer("classic v2", "file", (("algorithm.version", 2),)),
)


def writers(names: tuple[str, ...] | None, partitioned: bool) -> list[Writer]:
    """The partitioned committer only makes sense with partition columns."""
    chosen = [w for w in WRITERS if names is None or w.name in names]
    return [w for w in chosen if partitioned or w.committer != "partitioned"]


def warm_up(df, endpoint: Endpoint, extra: dict, local: bool = False) -> None:
    """One untimed write first: the first Spark job of a session pays JVM and worker start-up
    (and, with ``local``, the first of Spark's own Parquet writes its class loading)."""
    WRITERS[1].write(df, f"{endpoint.url}/warm-up", [], extra)
    if local:
        SPARK_LOCAL.write(df, "", [], {})
    endpoint.reset()


def sample(outcome: dict[str, Any]) -> dict[str, float]:
    phases = outcome["phases"]
    return {
        "seconds": outcome["seconds"],
        "mib_per_s": outcome["bytes"] / MIB / outcome["seconds"],
        "task_write_s": phases.get("task_write", 0.0),
        "task_commit_s": phases.get("task_commit", 0.0),
        "job_commit_s": phases.get("job_commit", 0.0),
        "client_cpu_s": outcome["client_cpu_s"],
        "server_cpu_s": outcome["server_cpu_s"],
    }


def interleaved_writes(
    chosen: list[Writer],
    df,
    endpoint: Endpoint,
    partition_by: list[str],
    extra: dict,
    repeats: int,
    before: Callable[[], None] = lambda: None,
    after: Callable[[dict[str, Any]], dict[str, Any]] = lambda outcome: outcome,
) -> dict[str, tuple[list[Sample], dict[str, Any]]]:
    """``repeats`` rounds of one write per writer, each on an emptied endpoint and leaving no
    upload pending: a drift in the machine's load (other work on the shared cores) then
    reaches every writer alike, not the ones that ran last.

    Per writer: its samples, round by round, and what ``after`` made of its last outcome
    (``before`` runs before each write, ``after`` right after it).
    """
    samples: dict[str, list[Sample]] = {w.name: [] for w in chosen}
    last: dict[str, dict[str, Any]] = {}
    for i in range(repeats):
        for writer in chosen:
            endpoint.reset()
            before()
            url = f"{endpoint.url}/run/{i}"
            used, outcome = cpu_of(endpoint, partial(writer.write, df, url, partition_by, extra))
            outcome.update(used)
            last[writer.name] = after(outcome)
            if endpoint.pending_uploads():
                raise RuntimeError(f"{writer.name} left pending uploads")
            samples[writer.name].append(sample(outcome))
    return {name: (found, last[name]) for name, found in samples.items()}


def relative_to(floor: list[Sample], samples: list[Sample]) -> list[Sample]:
    """Each round's wall and client CPU seconds as ratios to the floor's in the same round:
    a drift in the machine's load between rounds then cancels out of the ratio."""
    return [
        {
            **mine,
            "x_spark": mine["seconds"] / base["seconds"],
            "cpu_x_spark": mine["client_cpu_s"] / base["client_cpu_s"],
        }
        for mine, base in zip(samples, floor, strict=True)
    ]


def run_end_to_end(
    run: Run,
    endpoint: Endpoint,
    spark,
    size_mib: int,
    partitioned: bool,
    repeats: int,
    names: tuple[str, ...] | None = None,
) -> None:
    """Scenario 1 at one size: every writer and Spark's own onto local disk, ``repeats``
    times, the endpoint emptied between; each writer's figures also as ratios to Spark's."""
    df = spark_frame(spark, size_mib)
    partition_by = ["day"] if partitioned else []
    warm_up(df, endpoint, {}, local=True)
    chosen = [SPARK_LOCAL, *writers(names, partitioned)]
    done = interleaved_writes(chosen, df, endpoint, partition_by, {}, repeats)
    floor, _ = done[SPARK_LOCAL.name]
    for name, (found, last) in done.items():
        run.add(
            Record(
                "end_to_end",
                {
                    "endpoint": endpoint.kind,
                    "writer": name,
                    "size_mib": size_mib,
                    "partitioned": partitioned,
                },
                aggregate(relative_to(floor, found)),
                {"files": last["files"], "bytes": last["bytes"]},
            )
        )
    endpoint.reset()


def run_requests(
    run: Run,
    endpoint: Endpoint,
    spark,
    size_mib: int,
    rules: list,
    scenario: str,
    repeats: int,
    names: tuple[str, ...] | None = None,
) -> None:
    """Scenarios 3 and 7: each writer through the proxy; requests and copied bytes on the wire."""
    df = spark_frame(spark, size_mib)
    with proxied(endpoint, rules) as (proxy, url):
        warm_up(df, endpoint, {"endpoint": url})

        def fresh_proxy() -> None:  # so the counts cover exactly one write
            proxy.reset()
            proxy.set_rules(rules, seed=0)

        def on_the_wire(outcome: dict[str, Any]) -> dict[str, Any]:
            return {**outcome, "wire": dict(proxy.counts), "copied": proxy.copied_bytes}

        chosen = writers(names, partitioned=True)
        extra = {"endpoint": url}
        done = interleaved_writes(
            chosen, df, endpoint, ["day"], extra, repeats, fresh_proxy, on_the_wire
        )
        for name, (found, last) in done.items():
            counts, files = last["wire"], last["files"]
            per_file = {op: round(n / files, 2) for op, n in counts.items()}
            run.add(
                Record(
                    scenario,
                    {"endpoint": endpoint.kind, "writer": name, "size_mib": size_mib},
                    aggregate(found),
                    {
                        "files": files,
                        "tasks": tasks_for(size_mib),
                        "directories": DAYS,
                        "requests": counts,
                        "requests_per_file": per_file,
                        "completion_checks": last["checks"],
                        "copied_bytes": last["copied"],
                        "bytes": last["bytes"],
                    },
                )
            )
    endpoint.reset()
