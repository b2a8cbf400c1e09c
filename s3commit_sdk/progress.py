"""Progress of one committed write: events from the driver, and the text renderers.

Events come from the driver only (task results, Spark's status tracker, and what running tasks
report they have written so far), never from listing the destination while the job runs. After
a failure the runner hands over the facts of what the job left behind (a :class:`Failure`, which
:mod:`s3commit_sdk.aftermath` computes from one listing), so every view states facts. This
module imports nothing above it (no engine, runner, aftermath or widget):
:mod:`s3commit_sdk.listeners` chooses the view ``write_committed(progress=...)`` asks for.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, TextIO

from .errors import VISIBLE
from .textformat import format_bytes as size
from .textformat import format_count as count
from .textformat import format_seconds as seconds

PHASES = ("setup", "writing", "job commit", "done", "failed")
STEP_TITLES = {
    "setup": "job setup",
    "writing": "tasks write + commit",
    "job commit": "job commit",
    "done": "done",
}


#: The phases that add up to a write's duration (``_SUCCESS`` durations, ``WriteResult``);
#: ``prepare_input`` is the conversion of pandas input to Arrow, before job setup.
DURATION_PHASES = ("prepare_input", "job_setup", "tasks", "job_commit")


def job_seconds(phases: Mapping[str, float]) -> float:
    """A write's duration as every view shows it: input conversion (pandas) + job setup +
    tasks + job commit."""
    return sum(phases.get(p, 0.0) for p in DURATION_PHASES)


@dataclass(frozen=True)
class Failure:
    """What a failed write left behind, from the error, its notes and one listing after it.

    ``pending_uploads``, ``hidden_files`` and ``locked`` count this job only; they are None
    when no listing was made (not an S3 destination) or it failed (``unchecked`` says why).
    """

    interrupted: bool
    error: str
    reason: str
    destination: str = ""
    job_id: str = ""
    notes: tuple[str, ...] = ()
    pending_uploads: int | None = None
    hidden_files: int | None = None
    locked: bool | None = None
    unchecked: str = ""
    #: the error's own fields (``S3CommitError.visible`` / ``.remedy``), when it had them
    visible: str | None = None
    remedy: str | None = None

    def headline(self, phase: str) -> str:
        where = STEP_TITLES.get(phase, phase)
        if self.interrupted:
            return f"Interrupted during {where}."
        return f"Failed during {where}: {self.reason}"

    def left_behind(self) -> list[str]:
        """What is left, each with the command that deals with it; or that nothing is left."""
        url, job = self.destination, self.job_id
        if self.unchecked:
            return [
                f"What this job left could not be checked ({self.unchecked}): "
                f"`s3commit uploads list {url} --job {job}` shows its pending uploads."
            ]
        if self.locked is None:
            return []
        found = []
        if self.locked:
            found.append(
                f"The destination stays locked by this job: `s3commit recover {url}` finishes "
                f"its commit, `s3commit abort {url}` rolls it back."
            )
        elif self.pending_uploads:
            found.append(
                f"{self.pending_uploads} upload(s) of this job are still pending (billed until "
                f"aborted): `s3commit uploads abort {url} --job {job}`."
            )
        if self.hidden_files and not self.locked:
            found.append(
                f"{self.hidden_files} hidden metadata file(s) of this job remain (readers skip "
                "them)."
            )
        if not found:
            found.append(
                "Checked after the failure: no upload of this job is pending and the "
                "destination is not locked by it."
            )
        if self.remedy and not self.locked:  # a locked destination's commands are above
            found.append(f"To resolve what the failure left: `{self.remedy}`.")
        return found

    def visible_line(self) -> list[str]:
        """What of the job the error says is visible, in one line (none when it did not say)."""
        if self.visible is None or self.interrupted:
            return []
        return [
            f"Visible of this job at {self.destination}: {VISIBLE.get(self.visible, self.visible)}."
        ]

    def lines(self, phase: str) -> list[str]:
        """The headline, the SDK's notes on what it did, and what is left."""
        return [self.headline(phase), *self.notes, *self.visible_line(), *self.left_behind()]


@dataclass(frozen=True)
class ProgressEvent:
    phase: str
    tasks_done: int = 0
    tasks_total: int | None = None
    files: int = 0
    #: bytes written so far: finished tasks' files plus what running tasks have written
    bytes: int = 0
    elapsed_s: float = 0.0
    message: str = ""
    tasks_running: int = 0
    #: rows written so far, running tasks included
    rows: int = 0
    #: the input's row count when known before the job (pandas / Arrow input)
    rows_total: int | None = None
    failure: Failure | None = None


ProgressCallback = Callable[[ProgressEvent], None]


class ProgressTracker:
    """Keeps the latest state; engines and the protocol update it, listeners get the changes.

    Engines report what each running task has written so far (``task_running``: a task's
    first report at once, then at most one event per ``interval``) and each finished task
    (``task_done``), keyed by partition; an engine that only sees stage counts (Spark
    Connect's progress handler) sets ``tasks_total``, ``tasks_done``, ``tasks_running``,
    ``files`` and ``bytes`` with ``update``. A listener that raises is dropped: progress must
    never fail a job.
    """

    def __init__(self, listener: ProgressCallback | None, interval: float = 0.25) -> None:
        self._listener = listener
        self._lock = threading.Lock()
        self._delivering = threading.Lock()
        self._started = time.monotonic()
        self._interval = interval
        self._published = 0.0
        self._running: dict[Any, tuple[int, int]] = {}
        self._done: dict[Any, tuple[int, int, int]] = {}
        self.state = ProgressEvent("setup")

    @property
    def active(self) -> bool:
        """False when nobody listens (then engines need not collect anything)."""
        return self._listener is not None

    def update(self, **changes: Any) -> None:
        """Set fields of the state and tell the listener; ``elapsed_s`` is measured if not given."""
        if self._listener is None:
            return
        with self._lock:
            changes.setdefault("elapsed_s", time.monotonic() - self._started)
            self.state = replace(self.state, **changes)
        self._publish()

    def task_running(self, task: Any, rows: int, written: int) -> None:
        """What one running task has written so far (cumulative); ignored once it is done.

        A task's first report is published at once (it starts to run), later ones at most one
        per ``interval``."""
        if self._listener is None:
            return
        with self._lock:
            if task in self._done:
                return
            started = task not in self._running
            self._running[task] = (rows, written)
            self.state = replace(self.state, **self._totals())
            due = started or time.monotonic() - self._published >= self._interval
        if due:
            self._publish()

    def task_done(self, task: Any, files: int, size: int, rows: int | None = None) -> None:
        """A task committed ``files`` of ``size`` bytes; ``rows`` defaults to its last report."""
        if self._listener is None:
            return
        with self._lock:
            running_rows = self._running.pop(task, (0, 0))[0]
            self._done[task] = (files, size, running_rows if rows is None else rows)
            self.state = replace(self.state, **self._totals())
        self._publish()

    def sync(
        self,
        finished: Mapping[Any, tuple[int, int, int]],
        running: Mapping[Any, tuple[int, int]],
        **changes: Any,
    ) -> None:
        """An engine's whole view at once (Spark's poller): ``finished`` tasks' files, bytes and
        rows, ``running`` tasks' rows and bytes so far, and fields such as ``tasks_total``."""
        if self._listener is None:
            return
        with self._lock:
            self._done = dict(finished)
            self._running = {k: v for k, v in running.items() if k not in self._done}
            self.state = replace(self.state, **{**self._totals(), **changes})
        self._publish()

    def failed(self, failure: Failure) -> None:
        """The job failed: the final event, with the facts of what it left."""
        self.update(phase="failed", message=failure.reason, failure=failure)

    def _totals(self) -> dict[str, int]:
        return {
            "tasks_done": len(self._done),
            "tasks_running": len(self._running),
            "files": sum(done[0] for done in self._done.values()),
            "bytes": sum(d[1] for d in self._done.values())
            + sum(r[1] for r in self._running.values()),
            "rows": sum(d[2] for d in self._done.values())
            + sum(r[0] for r in self._running.values()),
            "elapsed_s": time.monotonic() - self._started,
        }

    def _publish(self) -> None:
        """Deliver the latest state (never an older one after a newer: one delivery at a time),
        with no more tasks running than are left (:func:`_bounded`)."""
        with self._delivering:
            listener = self._listener
            with self._lock:
                event = self.state = _bounded(self.state)
                self._published = time.monotonic()
            if listener is None:
                return
            try:
                listener(event)
            except Exception:
                self._listener = None


def _bounded(event: ProgressEvent) -> ProgressEvent:
    """No more tasks running than are left to finish.

    Sources lag each other: Spark's status store still counts a task active after its result
    (and accumulator) made it finished, which once read "2 / 4 tasks, 3 running" on local[2].
    """
    if event.tasks_total is None:
        return event
    left = max(event.tasks_total - event.tasks_done, 0)
    return event if event.tasks_running <= left else replace(event, tasks_running=left)


def status_line(title: str, event: ProgressEvent) -> str:
    """One line of text for an event, as the text log and the widget's plain text show it."""
    if event.phase == "done":
        return (
            f"{title}: done in {seconds(event.elapsed_s)}: committed {event.files} file(s), "
            f"{count(event.rows)} rows, {size(event.bytes)} from {event.tasks_done} task(s); "
            "nothing is left pending"
        )
    if event.phase == "failed":
        failure = event.failure
        word = "INTERRUPTED" if failure and failure.interrupted else "FAILED"
        line = f"{title}: {word} after {seconds(event.elapsed_s)}"
        if failure is not None and not failure.interrupted:  # the cause on the line itself
            line += f": {failure.error}: {failure.reason.splitlines()[0][:200]}"
        return line
    total = "?" if event.tasks_total is None else event.tasks_total
    rows = count(event.rows) + (f" of {count(event.rows_total)}" if event.rows_total else "")
    return (
        f"{title}: {event.phase}, {event.tasks_done}/{total} tasks done, "
        f"{event.tasks_running} running, {rows} rows, {size(event.bytes)} written, "
        f"{seconds(event.elapsed_s)}"
    )


class TextProgress:
    """Lines of text for runs nobody watches live (papermill, nbconvert, logs, no terminal).

    A line at every phase change; while a phase runs, a line when what it counts (tasks, rows,
    files, bytes) has changed since the last line, at most one per ``interval`` seconds; and
    a final summary line. A failure adds what happened and what is left, one fact per line.
    """

    def __init__(
        self, title: str = "s3commit write", stream: TextIO | None = None, interval: float = 5.0
    ) -> None:
        self.title = title
        self.stream = stream
        self.interval = interval
        self._phase = ""
        self._counts: tuple[int | None, ...] = ()
        self._written = -interval

    def __call__(self, event: ProgressEvent) -> None:
        now = time.monotonic()
        counts = _counts(event)
        if event.phase == self._phase and (
            counts == self._counts or now - self._written < self.interval
        ):
            return
        previous, self._phase, self._counts, self._written = self._phase, event.phase, counts, now
        self.write(event, previous)

    def write(self, event: ProgressEvent, previous_phase: str) -> None:
        """The event's line; for a failure, its facts below it (``previous_phase``: where)."""
        lines = [status_line(self.title, event)]
        if event.phase == "failed" and event.failure is not None:
            lines += [f"  {line}" for line in event.failure.lines(previous_phase)]
        print("\n".join(lines), file=self.stream or sys.stderr, flush=True)


def _counts(event: ProgressEvent) -> tuple[int | None, ...]:
    """What a text line reports besides the time: a line repeating these says nothing new."""
    return (
        event.tasks_done,
        event.tasks_total,
        event.tasks_running,
        event.files,
        event.bytes,
        event.rows,
    )


class TqdmProgress:
    """A terminal progress bar over rows (when known) or tasks; the final state as text."""

    def __init__(self, title: str = "s3commit write") -> None:
        from tqdm import tqdm

        self.title = title
        self._bar = tqdm(total=None, unit="task", desc="setup", leave=True, file=sys.stderr)
        self._phase = "setup"

    def __call__(self, event: ProgressEvent) -> None:
        bar = self._bar
        if event.phase in ("done", "failed"):
            bar.close()
            TextProgress(self.title).write(event, self._phase)
            return
        self._phase = event.phase
        by_rows = event.rows_total is not None
        total = event.rows_total if by_rows else event.tasks_total
        if total is not None and bar.total != total:
            bar.total = total
            bar.unit = "row" if by_rows else "task"
        bar.n = event.rows if by_rows else event.tasks_done
        bar.set_description(event.phase)
        bar.set_postfix(
            running=event.tasks_running,
            rows=count(event.rows),
            written=size(event.bytes),
            refresh=False,
        )
        bar.refresh()
