"""A reused Python worker takes its long-lived objects out of the garbage collector's passes.

PySpark's daemon runs ``gc.collect()`` in a reused worker after every task (``daemon.py``): a
full pass over every object the worker holds. After one of our tasks that is about 130,000
objects (pyarrow, pandas, PySpark, botocore's service models) and 0.06-0.15 s of a core here,
per task, which the bench's profile counts as "between tasks". What is still alive after the
first task is what the worker keeps; :func:`gc.freeze` moves it to the permanent generation,
so later passes only look at what later tasks made. Collected first, so no garbage in cycles
is frozen with it; done once per process, and only when the worker is reused (a worker that
exits after its task is never collected again).
"""

from __future__ import annotations

import gc
import os

_frozen = False


def freeze_long_lived_heap() -> bool:
    """Once per reused worker, after its first task: collect, then freeze. True if it did."""
    global _frozen
    if _frozen or not os.environ.get("SPARK_REUSE_WORKER"):
        return False
    gc.collect()
    gc.freeze()
    _frozen = True
    return True
