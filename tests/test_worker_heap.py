"""A reused Python worker freezes its long-lived heap after its first task (engines/worker_heap.py).

PySpark's daemon runs ``gc.collect()`` in a reused worker after every task; once the worker's
long-lived objects are frozen that pass skips them. Real Spark: the workers that ran a write
are asked, in later tasks of the same session, whether they froze.
"""

from __future__ import annotations

import pyarrow as pa

from s3commit_sdk import write_committed


def test_the_workers_that_ran_a_write_keep_their_heap_out_of_later_collections(spark, dest):
    result = write_committed(
        spark.range(0, 4000, numPartitions=4), dest.url, committer="magic", progress=False
    )
    assert result.rows == 4000

    def frozen_objects(batches):  # defined here: cloudpickle ships it by value
        import gc
        import os

        for _ in batches:
            pass
        yield pa.RecordBatch.from_pydict({"pid": [os.getpid()], "frozen": [gc.get_freeze_count()]})

    # many small tasks: each idle worker of the session's pool takes some of them
    probes = spark.range(0, 32, numPartitions=32).mapInArrow(
        frozen_objects, "pid long, frozen long"
    )
    frozen = {row.pid: row.frozen for row in probes.collect()}
    assert any(count > 10_000 for count in frozen.values()), frozen
