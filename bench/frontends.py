"""Scenario 8: the same partitioned Spark write through each of our front ends.

``write_committed`` (the reference), the ``s3commit`` Spark data source
(``df.write.format("s3commit")``) and Delta output (``write_committed(..., format="delta")``):
the same committer, data and endpoint, so the ratio to ``write_committed`` is what the front end
itself costs. A front end this installation does not have yet is reported as not available;
one that fails gets a record with its error instead of numbers.
"""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Callable
from typing import Any

from s3commit_sdk import write_committed
from s3commit_sdk.testing.sandbox import DUMMY_ENV

from .data import spark_frame
from .harness import Endpoint, Record, Run, aggregate

SCENARIO = "frontends"
REFERENCE = "write_committed"
COMMITTER = "partitioned"
PARTITION_BY = ["day"]


def _write_committed(df, url: str, endpoint: Endpoint) -> None:
    write_committed(
        df,
        url,
        committer=COMMITTER,
        partition_by=PARTITION_BY,
        conflict_mode="append",
        progress=False,
    )


def _data_source(df, url: str, endpoint: Endpoint) -> None:
    """Spark plans the job in a Python worker its JVM starts: the endpoint goes as options."""
    from s3commit_sdk import datasource

    datasource.register(df.sparkSession)
    (
        df.write.format(datasource.NAME)
        .option("committer", COMMITTER)
        .option("partition_by", ",".join(PARTITION_BY))
        .option("endpoint", endpoint.endpoint)
        .option("access.key", DUMMY_ENV["AWS_ACCESS_KEY_ID"])
        .option("secret.key", DUMMY_ENV["AWS_SECRET_ACCESS_KEY"])
        .option("region", DUMMY_ENV["AWS_REGION"])
        .mode("append")
        .save(url)
    )


def _delta(df, url: str, endpoint: Endpoint) -> None:
    write_committed(
        df,
        url,
        committer=COMMITTER,
        partition_by=PARTITION_BY,
        conflict_mode="append",
        format="delta",
        progress=False,
    )


def _has_data_source() -> bool:
    return importlib.util.find_spec("s3commit_sdk.datasource") is not None


def _has_delta() -> bool:
    from s3commit_sdk.writers import FORMATS

    return "delta" in FORMATS


Write = Callable[[Any, str, Endpoint], None]
#: name -> (write, available?)
FRONTENDS: dict[str, tuple[Write, Callable[[], bool]]] = {
    REFERENCE: (_write_committed, lambda: True),
    "s3commit data source": (_data_source, _has_data_source),
    "Delta (format='delta')": (_delta, _has_delta),
}


def run_frontends(run: Run, endpoint: Endpoint, spark, size_mib: int, repeats: int) -> None:
    """Each front end ``repeats`` times, timed by the caller's clock, the endpoint emptied."""
    df = spark_frame(spark, size_mib)
    for name, (write, available) in FRONTENDS.items():
        labels = {"endpoint": endpoint.kind, "frontend": name, "size_mib": size_mib}
        if not available():
            run.add(Record(SCENARIO, labels, {}, {"error": "not available in this installation"}))
            continue
        samples = []
        try:
            # the first write is untimed: a front end's first use in a session starts what it
            # needs (the data source: Spark's Python planner worker)
            for i in range(repeats + 1):
                endpoint.reset()
                started = time.monotonic()
                write(df, f"{endpoint.url}/frontends/{i}", endpoint)
                seconds = time.monotonic() - started
                if endpoint.pending_uploads():
                    raise RuntimeError(f"{name} left pending uploads")
                if i > 0:
                    samples.append({"seconds": seconds, "mib_per_s": size_mib / seconds})
        except Exception as exc:
            if name == REFERENCE:
                raise
            run.add(Record(SCENARIO, labels, {}, {"error": f"{type(exc).__name__}: {exc}"[:2000]}))
            continue
        run.add(Record(SCENARIO, labels, aggregate(samples), {"committer": COMMITTER}))
    endpoint.reset()
