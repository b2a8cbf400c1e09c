"""``make demo``: a daily partition update on the embedded default (local S3 + local Spark).

Day one writes two partitions; day two replaces one of them and adds a new one. The untouched
partition keeps its files; no multipart upload is left pending.
"""

from __future__ import annotations

import datetime as dt
import sys
from collections import Counter

import pyarrow.parquet as pq

from .api import write_committed
from .testing.sandbox import S3Sandbox, local_spark
from .uploads import format_success, pending_uploads, read_success


def day_rows(day: dt.date, n: int, start: int) -> list[tuple]:
    return [(start + i, f"user-{i % 7}", round(i * 1.5, 2), day.isoformat()) for i in range(n)]


def main() -> int:
    with S3Sandbox(bucket="demo") as s3:
        spark = local_spark("local[2]", app_name="s3commit-demo")
        spark.sparkContext.setLogLevel("ERROR")
        dest = "s3://demo/warehouse/events"
        columns = ["id", "user", "amount", "day"]
        try:
            first = spark.createDataFrame(
                day_rows(dt.date(2026, 11, 20), 500, 0) + day_rows(dt.date(2026, 11, 21), 400, 500),
                columns,
            )
            result = write_committed(first, dest, partition_by=["day"], conflict_mode="replace")
            print(f"day one: {result}")
            second = spark.createDataFrame(
                day_rows(dt.date(2026, 11, 21), 450, 1000)
                + day_rows(dt.date(2026, 11, 22), 300, 2000),
                columns,
            )
            result = write_committed(second, dest, partition_by=["day"], conflict_mode="replace")
            print(f"day two: {result}\n")
            print(format_success(read_success(dest)))
            table = pq.read_table("demo/warehouse/events", filesystem=s3.arrow_fs())
            per_day = Counter(str(day) for day in table.column("day").to_pylist())
            print(f"\nrows per day read back with pyarrow: {dict(sorted(per_day.items()))}")
            expected = {"2026-11-20": 500, "2026-11-21": 450, "2026-11-22": 300}
            pending = pending_uploads("s3://demo/")
            print(f"\npending multipart uploads under s3://demo/: {len(pending)}")
            keys = s3.client().list_objects_v2(Bucket="demo", Prefix="warehouse/events/")
            visible = sorted(o["Key"] for o in keys.get("Contents", []))
            print("objects at the destination:")
            for key in visible:
                print(f"  {key}")
            ok = not pending and dict(per_day) == expected
            print("demo OK" if ok else f"demo FAILED: expected {expected}")
            return 0 if ok else 1
        finally:
            spark.stop()


if __name__ == "__main__":
    sys.exit(main())
