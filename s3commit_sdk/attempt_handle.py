"""The line between an engine and one task attempt it runs: progress out, cancellation in.

An engine builds one handle per attempt and passes it to :func:`~s3commit_sdk.runner.execute_task`,
which hands it to the writers: after every batch they report the rows and bytes the attempt has
written so far, and before every batch they check whether the engine cancelled the attempt (then
they raise :class:`~s3commit_sdk.errors.TaskCancelledError` and the attempt aborts its output).
The handle is passed explicitly, so it reaches the attempt in whatever thread, process or Spark
Python worker its engine runs it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

#: receives an attempt's cumulative ``(rows, bytes)`` written so far
ReportSink = Callable[[int, int], None]


class AttemptHandle:
    """One task attempt's handle: ``report(rows, written)`` and the ``cancelled`` flag.

    ``on_report`` gets every report (a progress tracker, a socket to the driver); it must not
    raise: progress never fails a task. ``cancel`` is the engine's flag; one event may be shared
    by all the attempts of a job, so setting it once stops them all.
    """

    def __init__(
        self, on_report: ReportSink | None = None, cancel: threading.Event | None = None
    ) -> None:
        self._on_report = on_report
        self._cancel = cancel if cancel is not None else threading.Event()

    def report(self, rows: int, written: int) -> None:
        """The attempt has written ``rows`` rows and ``written`` bytes so far (cumulative)."""
        if self._on_report is not None:
            self._on_report(rows, written)

    @property
    def cancelled(self) -> bool:
        """Whether the engine wants the attempt stopped (its writers check between batches)."""
        return self._cancel.is_set()
