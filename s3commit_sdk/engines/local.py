"""In-process engine: pandas DataFrames and pyarrow Tables, one thread per task.

Same committers, same protocol as on Spark; used for small data and fast protocol tests.
A ``pyarrow.RecordBatchReader`` streams through one task without being held in memory.
"""

from __future__ import annotations

import math
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import pandas as pd
import pyarrow as pa

from ..attempt_handle import AttemptHandle
from ..errors import InvalidArgumentError
from ..progress import ProgressTracker
from ..protocol import JobContext, TaskCommit
from ..runner import execute_task
from ..sparktypes import canonical_schema, conform

BATCH_ROWS = 65_536


LocalInput = pa.Table | pa.RecordBatchReader


def to_arrow(data) -> LocalInput:
    """The input with canonical types (sparktypes); zoned timestamps become UTC instants.

    UTC is the session time zone of pandas and Arrow input: partition values, JSON and CSV
    render instants in it, so different instants never share a text.
    """
    if isinstance(data, pd.DataFrame):
        data = pa.Table.from_pandas(data, preserve_index=_keeps_index(data))
    elif isinstance(data, pa.RecordBatch):
        data = pa.Table.from_batches([data])
    if isinstance(data, pa.Table):
        return data.cast(canonical_schema(data.schema, "UTC"), safe=False)
    if isinstance(data, pa.RecordBatchReader):
        schema = canonical_schema(data.schema, "UTC")
        return pa.RecordBatchReader.from_batches(schema, (conform(b, schema) for b in data))
    raise TypeError(f"{type(data).__name__} is neither a DataFrame nor an Arrow table")


def _keeps_index(frame: pd.DataFrame) -> bool:
    """Named index levels are data and become columns; an unnamed index is dropped (as Spark's
    ``createDataFrame`` drops it). A MultiIndex naming only some levels is refused."""
    names = list(frame.index.names)
    if all(name is None for name in names):
        return False
    if any(name is None for name in names):
        raise InvalidArgumentError(
            f"the DataFrame's index names only some of its levels {names}: name every level "
            "(they become columns) or drop the index with reset_index(drop=True)"
        )
    return True


def run_local_tasks(
    table: LocalInput, job: JobContext, tracker: ProgressTracker
) -> list[TaskCommit]:
    """Slice the table into tasks, run them on a pool, retry each up to its attempt limit.

    Each task reports what it has written after every batch, so one large task moves the bar.
    On Ctrl-C, or once a task's failure ends the job, the engine cancels the running tasks: they
    stop before their next batch (and abort their uploads) instead of writing to the end.
    """
    cancelled = threading.Event()  # every attempt's cancel flag

    def attempt(partition: int, number: int, batches, schema: pa.Schema) -> TaskCommit:
        def report(rows: int, written: int) -> None:
            tracker.task_running(partition, rows, written)

        handle = AttemptHandle(report, cancelled)
        message = execute_task(job, partition, number, batches, schema, handle=handle)
        tracker.task_done(partition, message.summary.files, message.summary.bytes)
        return message

    if isinstance(table, pa.RecordBatchReader):  # a stream can be read once: one attempt
        tracker.update(tasks_total=1)
        return [attempt(0, 0, table, table.schema)]
    tasks = job.options.tasks or max(1, min(os.cpu_count() or 2, table.num_rows))
    step = max(1, math.ceil(table.num_rows / tasks))
    tracker.update(tasks_total=tasks, rows_total=table.num_rows)

    def run(partition: int) -> TaskCommit:
        rows = table.slice(partition * step, step)
        for number in range(job.options.task_max_attempts):
            try:
                batches = rows.to_batches(max_chunksize=BATCH_ROWS)
                return attempt(partition, number, batches, table.schema)
            except Exception:
                if cancelled.is_set() or number + 1 == job.options.task_max_attempts:
                    raise
        raise AssertionError("unreachable")

    pool = ThreadPoolExecutor(tasks, "s3commit-task")
    try:
        return list(pool.map(run, range(tasks)))
    except BaseException:
        cancelled.set()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
