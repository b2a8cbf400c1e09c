"""In-process engine: pandas DataFrames and pyarrow Tables, one thread per task.

Same committers, same protocol as on Spark; used for small data and fast protocol tests.
A ``pyarrow.RecordBatchReader`` streams through one task without being held in memory.
"""

from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor

import pandas as pd
import pyarrow as pa

from ..formats import commit_totals
from ..progress import ProgressTracker
from ..protocol import JobContext, execute_task

BATCH_ROWS = 65_536


LocalInput = pa.Table | pa.RecordBatchReader


def to_arrow(data) -> LocalInput:
    if isinstance(data, (pa.Table, pa.RecordBatchReader)):
        return data
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    if isinstance(data, pd.DataFrame):
        return pa.Table.from_pandas(data, preserve_index=False)
    raise TypeError(f"{type(data).__name__} is neither a DataFrame nor an Arrow table")


def run_local_tasks(table: LocalInput, job: JobContext, tracker: ProgressTracker) -> list[str]:
    """Slice the table into tasks, run them on a pool, retry each up to its attempt limit."""

    def finished(message: str) -> str:
        tracker.task_done(*commit_totals(message))
        return message

    if isinstance(table, pa.RecordBatchReader):  # a stream can be read once: one attempt
        tracker.update(tasks_total=1)
        return [finished(execute_task(job, 0, 0, table, table.schema))]
    tasks = job.options.tasks or max(1, min(os.cpu_count() or 2, table.num_rows))
    step = max(1, math.ceil(table.num_rows / tasks))
    tracker.update(tasks_total=tasks)

    def run(partition: int) -> str:
        rows = table.slice(partition * step, step)
        for attempt in range(job.options.task_max_attempts):
            try:
                batches = rows.to_batches(max_chunksize=BATCH_ROWS)
                return finished(execute_task(job, partition, attempt, batches, table.schema))
            except Exception:
                if attempt + 1 == job.options.task_max_attempts:
                    raise
        raise AssertionError("unreachable")

    with ThreadPoolExecutor(tasks, "s3commit-task") as pool:
        return list(pool.map(run, range(tasks)))
