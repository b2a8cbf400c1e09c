"""A reused Python worker freezes its long-lived heap after its first task (engines/worker_heap.py).

PySpark's daemon runs ``gc.collect()`` in a reused worker after every task; once the worker's
long-lived objects are frozen that pass skips them. Real Spark: the workers that ran a write
are asked, in later tasks of the same session, whether they froze.
"""

from __future__ import annotations

from worker_heap_probe import frozen_per_worker

from s3commit_sdk import write_committed


def test_the_workers_that_ran_a_write_keep_their_heap_out_of_later_collections(spark, dest):
    result = write_committed(
        spark.range(0, 4000, numPartitions=4), dest.url, committer="magic", progress=False
    )
    assert result.rows == 4000

    frozen = frozen_per_worker(spark)
    assert any(count > 10_000 for count in frozen.values()), frozen
