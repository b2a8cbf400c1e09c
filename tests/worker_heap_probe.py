"""Asks a session's Python workers whether they froze their heap (engines/worker_heap.py).

Shared by the classic session's test and the Connect scenarios' child process.
"""

from __future__ import annotations


def frozen_per_worker(spark) -> dict[int, int]:
    """{worker pid: objects frozen}, from many small tasks: each idle worker takes some."""

    def frozen_objects(batches):  # nested: cloudpickle ships it by value to the workers
        import gc
        import os

        import pyarrow as pa

        for _ in batches:
            pass
        yield pa.RecordBatch.from_pydict({"pid": [os.getpid()], "frozen": [gc.get_freeze_count()]})

    probes = spark.range(0, 32, numPartitions=32).mapInArrow(
        frozen_objects, "pid long, frozen long"
    )
    return {row.pid: row.frozen for row in probes.collect()}
