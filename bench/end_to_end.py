"""Scenarios 1, 3 and 7: one Spark DataFrame written by every committer, side by side.

1. End to end by data size, with the phase breakdown (task write, task commit, job commit).
3. Requests per committed file by operation and bytes copied server-side, counted on the wire
   by the proxy (so the classic committer's renames show as the copies they are).
7. The same through the proxy with emulated S3 latency and copy bandwidth.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from s3commit_sdk import write_committed

from .data import spark_frame, tasks_for
from .direct import direct_write
from .harness import MIB, Endpoint, Record, Run, aggregate, proxied


@dataclass(frozen=True)
class Writer:
    """One way of writing the DataFrame: a committer and its options, or the direct write."""

    name: str
    committer: str
    options: tuple[tuple[str, Any], ...] = ()

    def write(self, df, url: str, partition_by: list[str], extra: dict) -> dict[str, Any]:
        options = {**dict(self.options), **extra}
        if self.committer == "direct":
            done = direct_write(df, url, partition_by, options)
            return {
                "seconds": done["seconds"],
                "bytes": done["bytes"],
                "files": done["files"],
                "phases": {"task_write": done["seconds"]},
                "requests": {},
            }
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
        }


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


def warm_up(df, endpoint: Endpoint, extra: dict) -> None:
    """One untimed write first: the first Spark job of a session pays JVM and worker start-up."""
    WRITERS[1].write(df, f"{endpoint.url}/warm-up", [], extra)
    endpoint.reset()


def sample(outcome: dict[str, Any]) -> dict[str, float]:
    phases = outcome["phases"]
    return {
        "seconds": outcome["seconds"],
        "mib_per_s": outcome["bytes"] / MIB / outcome["seconds"],
        "task_write_s": phases.get("task_write", 0.0),
        "task_commit_s": phases.get("task_commit", 0.0),
        "job_commit_s": phases.get("job_commit", 0.0),
    }


def repeat_write(
    writer: Writer,
    df,
    endpoint: Endpoint,
    partition_by: list[str],
    extra: dict,
    repeats: int,
    before: Callable[[], None] = lambda: None,
) -> tuple[dict[str, dict[str, float]], dict[str, Any]]:
    """``repeats`` writes, each on an emptied endpoint and leaving no upload pending.

    Returns the summary and the last repetition's outcome; ``before`` runs before each write.
    """
    samples, outcome = [], {}
    for i in range(repeats):
        endpoint.reset()
        before()
        outcome = writer.write(df, f"{endpoint.url}/run/{i}", partition_by, extra)
        if endpoint.pending_uploads():
            raise RuntimeError(f"{writer.name} left pending uploads")
        samples.append(sample(outcome))
    return aggregate(samples), outcome


def run_end_to_end(
    run: Run,
    endpoint: Endpoint,
    spark,
    size_mib: int,
    partitioned: bool,
    repeats: int,
    names: tuple[str, ...] | None = None,
) -> None:
    """Scenario 1 at one size: every writer, ``repeats`` times, the endpoint emptied between."""
    df = spark_frame(spark, size_mib)
    partition_by = ["day"] if partitioned else []
    warm_up(df, endpoint, {})
    for writer in writers(names, partitioned):
        summary, last = repeat_write(writer, df, endpoint, partition_by, {}, repeats)
        run.add(
            Record(
                "end_to_end",
                {"writer": writer.name, "size_mib": size_mib, "partitioned": partitioned},
                summary,
                {"files": last["files"]},
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

        def fresh_proxy() -> None:  # so the counts cover exactly the last repetition
            proxy.reset()
            proxy.set_rules(rules, seed=0)

        for writer in writers(names, partitioned=True):
            extra = {"endpoint": url}
            summary, last = repeat_write(writer, df, endpoint, ["day"], extra, repeats, fresh_proxy)
            counts, copied, files = proxy.counts, proxy.copied_bytes, last["files"]
            per_file = {op: round(n / files, 2) for op, n in counts.items()}
            run.add(
                Record(
                    scenario,
                    {"writer": writer.name, "size_mib": size_mib},
                    summary,
                    {
                        "files": files,
                        "tasks": tasks_for(size_mib),
                        "requests": counts,
                        "requests_per_file": per_file,
                        "copied_bytes": copied,
                        "bytes": last["bytes"],
                    },
                )
            )
    endpoint.reset()
