"""Progress of one committed write: events from the driver, and the terminal renderer.

Events come from the driver only (task results, Spark's status tracker and accumulators), never
from listing the destination. ``write_committed(progress=...)`` accepts ``"auto"`` (a widget in
a notebook, tqdm on a terminal, nothing otherwise), ``False``, or any callable taking a
:class:`ProgressEvent`.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

PHASES = ("setup", "writing", "job commit", "done", "failed")


@dataclass(frozen=True)
class ProgressEvent:
    phase: str
    tasks_done: int = 0
    tasks_total: int | None = None
    files: int = 0
    bytes: int = 0
    elapsed_s: float = 0.0
    message: str = ""


ProgressCallback = Callable[[ProgressEvent], None]


class ProgressTracker:
    """Keeps the latest state; engines and the protocol update it, listeners get every change.

    A listener that raises is dropped: progress must never fail a job.
    """

    def __init__(self, listener: ProgressCallback | None) -> None:
        self._listener = listener
        self._lock = threading.Lock()
        self._started = time.monotonic()
        self.state = ProgressEvent("setup")

    def update(self, **changes) -> None:
        if self._listener is None:
            return
        with self._lock:
            elapsed = time.monotonic() - self._started
            self.state = replace(self.state, elapsed_s=elapsed, **changes)
            event = self.state
        try:
            self._listener(event)
        except Exception:
            self._listener = None

    def task_done(self, files: int, size: int) -> None:
        with self._lock:
            state = self.state
        self.update(
            tasks_done=state.tasks_done + 1, files=state.files + files, bytes=state.bytes + size
        )


class TqdmProgress:
    """A terminal progress bar over tasks, with files and bytes as postfix."""

    def __init__(self) -> None:
        from tqdm import tqdm

        self._bar = tqdm(total=None, unit="task", desc="setup", leave=True, file=sys.stderr)

    def __call__(self, event: ProgressEvent) -> None:
        bar = self._bar
        if event.tasks_total is not None and bar.total != event.tasks_total:
            bar.total = event.tasks_total
        bar.n = event.tasks_done
        bar.set_description(event.phase)
        bar.set_postfix(files=event.files, MiB=f"{event.bytes / 2**20:.1f}", refresh=False)
        bar.refresh()
        if event.phase in ("done", "failed"):
            bar.close()


def _in_notebook() -> bool:
    shell = sys.modules.get("IPython")
    if shell is None:
        return False
    ip = shell.get_ipython()
    return ip is not None and type(ip).__name__ == "ZMQInteractiveShell"


def make_listener(progress: object) -> ProgressCallback | None:
    """Resolve ``write_committed(progress=...)`` to a listener (or None for no progress)."""
    if progress is False or progress is None:
        return None
    if callable(progress):
        return progress
    if progress != "auto":
        from .errors import InvalidArgumentError

        raise InvalidArgumentError("progress must be 'auto', False or a callable")
    if _in_notebook():
        try:
            from .widgets import CommitProgress
        except ImportError:  # widgets not installed: fall through to the terminal
            pass
        else:
            return CommitProgress.show()
    if sys.stderr.isatty():
        return TqdmProgress()
    return None
