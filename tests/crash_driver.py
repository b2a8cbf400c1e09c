"""A job driver run as a subprocess, so tests can SIGKILL it in the middle of job commit.

python tests/crash_driver.py '{"dest": ..., "committer": ..., "seed": 1, "options": {...}}'
"""

from __future__ import annotations

import json
import sys

import pandas as pd

from s3commit_sdk import write_committed


def data(seed: int, days: list[str], rows_per_day: int = 12) -> pd.DataFrame:
    rows = [(seed * 1000 + i, f"row-{seed}-{i}", day) for day in days for i in range(rows_per_day)]
    return pd.DataFrame(rows, columns=["id", "name", "day"])


def run(spec: dict) -> None:
    write_committed(
        data(spec["seed"], spec["days"]),
        spec["dest"],
        committer=spec["committer"],
        partition_by=["day"],
        conflict_mode="replace",
        options=spec["options"],
    )


if __name__ == "__main__":
    run(json.loads(sys.argv[1]))
