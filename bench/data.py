"""The benchmark's input: the same deterministic, hardly compressible rows for every writer.

Each row carries four SHA-256 hex digests (snappy cannot shrink random hex much), so the
Parquet output is close to the nominal size and every committer moves the same bytes.
"""

from __future__ import annotations

from .harness import MIB

#: Parquet bytes per row, measured: 4 x 64 hex chars + id + day, with snappy
ROW_BYTES = 275
DAYS = 8
FILE_MIB = 128  # one task per this much data: Spark's usual split size


def rows_for(size_mib: int) -> int:
    return size_mib * MIB // ROW_BYTES


def tasks_for(size_mib: int) -> int:
    return max(2, size_mib // FILE_MIB)


def spark_frame(spark, size_mib: int):
    """``size_mib`` of rows in ``tasks_for(size_mib)`` partitions, generated on the executors."""
    from pyspark.sql import functions as F

    ids = spark.range(0, rows_for(size_mib), numPartitions=tasks_for(size_mib))
    digest = [
        F.sha2(F.concat(F.col("id").cast("string"), F.lit(salt)), 256).alias(f"h{salt}")
        for salt in range(4)
    ]
    day = F.concat(F.lit("2026-11-"), F.lpad(((F.col("id") % DAYS) + 1).cast("string"), 2, "0"))
    return ids.select("id", day.alias("day"), *digest)
