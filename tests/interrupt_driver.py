"""A job driver run as a subprocess that says when its job commit starts and ends, so a test can
send it SIGINT at a chosen moment of job commit (tests/test_interrupt_sweep.py).

python tests/interrupt_driver.py '{"dest": ..., "committer": ..., "seed": 2, "days": [...],
                                   "options": {...}, "spark": false}'

At the progress phases "job commit" and "done" it prints the phase on stdout and waits for a
line on stdin (or its end): the test sets its proxy's rules or sends the signal meanwhile.
"""

from __future__ import annotations

import json
import sys

from crash_driver import data

from s3commit_sdk import write_committed
from s3commit_sdk.progress import ProgressEvent

ANNOUNCED = ("job commit", "done")


def progress(event: ProgressEvent) -> None:
    if event.phase in ANNOUNCED:
        print(event.phase, flush=True)
        sys.stdin.readline()


def run(spec: dict) -> None:
    frame = data(spec["seed"], spec["days"])
    if spec.get("spark"):
        from s3commit_sdk.testing.sandbox import local_spark

        session = local_spark("local[2]", app_name="s3commit-interrupt-sweep")
        session.sparkContext.setLogLevel("ERROR")
        frame = session.createDataFrame(frame).repartition(2)
    write_committed(
        frame,
        spec["dest"],
        committer=spec["committer"],
        partition_by=["day"],
        conflict_mode="replace",
        options=spec["options"],
        progress=progress,
    )
    print("returned", flush=True)


if __name__ == "__main__":
    run(json.loads(sys.argv[1]))
