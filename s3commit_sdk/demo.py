"""``make demo``: a daily partition update on the embedded default (local S3 + local Spark).

Day one writes two partitions; day two replaces one of them and adds a new one. The demo says
what day two replaced (from the two writes' ``_SUCCESS`` documents) and checks it: the replaced
partition's old files are gone, the untouched partition keeps its files, no multipart upload is
left pending.
"""

from __future__ import annotations

import datetime as dt
import sys
from collections import Counter
from dataclasses import dataclass

import pyarrow.parquet as pq

from .api import WriteResult, write_committed
from .testing.sandbox import S3Sandbox, local_spark
from .uploads import format_success, partition_name, pending_uploads, read_success


def day_rows(day: dt.date, n: int, start: int) -> list[tuple]:
    return [(start + i, f"user-{i % 7}", round(i * 1.5, 2), day.isoformat()) for i in range(n)]


def files(n: int) -> str:
    return f"{n} file" if n == 1 else f"{n} files"


def files_by_partition(result: WriteResult) -> dict[str, set[str]]:
    """The keys a write committed, per partition directory (``day=...``)."""
    by_partition: dict[str, set[str]] = {}
    for committed in result.files:
        name = partition_name(committed.partition, "(root)")
        by_partition.setdefault(name, set()).add(committed.key)
    return by_partition


@dataclass
class DayTwo:
    """What day two's replace did to day one's partitions, from the two writes' results."""

    replaced: list[str]  # written both days: day two's files took the place of day one's
    added: list[str]  # new with day two
    kept: list[str]  # day one's only, untouched
    removed: int  # objects day two's job commit deleted (``replacedObjects`` in _SUCCESS)
    replaced_files: set[str]  # day one's keys in the replaced partitions: must be gone
    kept_files: set[str]  # day one's keys in the untouched partitions: must remain

    @classmethod
    def compare(cls, day_one: WriteResult, day_two: WriteResult) -> DayTwo:
        old, new = files_by_partition(day_one), files_by_partition(day_two)
        replaced, kept = sorted(old.keys() & new.keys()), sorted(old.keys() - new.keys())
        return cls(
            replaced=replaced,
            added=sorted(new.keys() - old.keys()),
            kept=kept,
            removed=day_two.success.replaced_objects,
            replaced_files={key for part in replaced for key in old[part]},
            kept_files={key for part in kept for key in old[part]},
        )

    def summary(self) -> str:
        return (
            f"day two replaced {', '.join(self.replaced)} ({files(self.removed)} of day one "
            f"removed), added {', '.join(self.added)}; {', '.join(self.kept)} untouched "
            f"({files(len(self.kept_files))} kept)"
        )

    def problems(self, visible: set[str]) -> list[str]:
        """What the destination's keys ``visible`` contradict of this summary."""
        checks = {
            f"day one wrote {len(self.replaced_files)} files where day two replaced, "
            f"_SUCCESS says {self.removed} removed": self.removed == len(self.replaced_files),
            "old files of a replaced partition are still there": not self.replaced_files & visible,
            "files of an untouched partition are gone": self.kept_files <= visible,
        }
        return [problem for problem, holds in checks.items() if not holds]


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
            day_one = write_committed(first, dest, partition_by=["day"], conflict_mode="replace")
            print(f"day one: {day_one}")
            second = spark.createDataFrame(
                day_rows(dt.date(2026, 11, 21), 450, 1000)
                + day_rows(dt.date(2026, 11, 22), 300, 2000),
                columns,
            )
            day_two = write_committed(second, dest, partition_by=["day"], conflict_mode="replace")
            print(f"day two: {day_two}")
            changes = DayTwo.compare(day_one, day_two)
            print(changes.summary() + "\n")
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
            problems = changes.problems(set(visible))
            if pending:
                problems.append(f"{len(pending)} multipart uploads left pending")
            if dict(per_day) != expected:
                problems.append(f"rows per day: expected {expected}")
            print("demo FAILED: " + "; ".join(problems) if problems else "demo OK")
            return 1 if problems else 0
        finally:
            spark.stop()


if __name__ == "__main__":
    sys.exit(main())
