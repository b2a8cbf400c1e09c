"""``CommitProgress``: the live panel ``write_committed(progress="auto")`` shows in a notebook.

It is a listener of :class:`~s3commit_sdk.progress.ProgressTracker`: the driver calls it with a
:class:`~s3commit_sdk.progress.ProgressEvent` (from Spark's status tracker, accumulators and
task results, on a background thread), never by polling the destination. Updating a few
traitlets per event costs microseconds, so the job is not slowed.
"""

from __future__ import annotations

import re
import threading
from typing import Any

import ipywidgets as widgets

from ..progress import ProgressEvent
from ._common import FONT, WidgetWrapper, esc, format_bytes, format_seconds

#: The phases in the order a job goes through them ("writing" includes task commit).
STEPS = ("setup", "writing", "job commit", "done")
STEP_TITLES = {
    "setup": "job setup",
    "writing": "tasks write + commit",
    "job commit": "job commit",
    "done": "done",
}
_URL = re.compile(r"s3a?://[^\s'\"`,;)]+")


def what_to_do(phase: str, message: str) -> str:
    """Advice for a job that failed in ``phase``, naming the destination when known."""
    found = _URL.search(message)
    dest = found.group(0).rstrip(".:") if found else "DEST"
    if phase in ("writing", "setup") and "unfinished commit" not in message:
        return (
            "The job was aborted before its commit: nothing new became visible at the "
            "destination and this job's uploads were aborted. Fix the cause above and run "
            f"the write again. `s3commit uploads list {dest}` shows anything still pending."
        )
    return (
        "The job commit did not finish. If the message says it was rolled back, nothing "
        "changed and you can run the write again. If the driver died or the message says the "
        f"commit is unfinished, run `s3commit recover {dest}` to finish it (roll forward) or "
        f"`s3commit abort {dest}` to undo it (roll back); both are safe to repeat."
    )


class CommitProgress(WidgetWrapper):
    """Phase, tasks done / total with a progress bar, files, bytes and elapsed time.

    Call the instance with a ``ProgressEvent`` (that is what the protocol does). At the end it
    shows the summary of the commit, or the error and what to do about it.
    """

    def __init__(self, title: str = "s3commit write") -> None:
        self._lock = threading.Lock()
        self.title = title
        self.last_event: ProgressEvent | None = None
        self.failed_in: str | None = None
        self._previous_phase = "setup"
        self.steps = widgets.HTML(layout=widgets.Layout(margin="0 0 2px 0"))
        self.bar = widgets.IntProgress(
            value=0,
            min=0,
            max=1,
            description="tasks",
            bar_style="info",
            layout=widgets.Layout(width="420px"),
        )
        self.tasks = widgets.HTML()
        self.stats = widgets.HTML()
        self.message = widgets.HTML()
        self.widget = widgets.VBox(
            [self.steps, widgets.HBox([self.bar, self.tasks]), self.stats, self.message],
            layout=widgets.Layout(
                border="1px solid #ccc", padding="6px 10px", width="fit-content", margin="0 0 6px 0"
            ),
        )
        self.widget.add_class("s3commit-progress")
        self._render(ProgressEvent("setup"))

    @classmethod
    def show(cls, **kwargs: Any) -> CommitProgress:
        """Create the panel, display it in the current cell and return it (a listener)."""
        from IPython.display import display

        panel = cls(**kwargs)
        display(panel)
        return panel

    def __call__(self, event: ProgressEvent) -> None:
        with self._lock:
            self._render(event)

    # -- state, for programs and tests ----------------------------------------------------------
    @property
    def phase(self) -> str:
        return self.last_event.phase if self.last_event else "setup"

    @property
    def state(self) -> dict[str, Any]:
        """The latest event as a dict, plus where a failure happened."""
        event = self.last_event or ProgressEvent("setup")
        return {
            "phase": event.phase,
            "tasks_done": event.tasks_done,
            "tasks_total": event.tasks_total,
            "files": event.files,
            "bytes": event.bytes,
            "elapsed_s": event.elapsed_s,
            "message": event.message,
            "failed_in": self.failed_in,
        }

    def text(self) -> str:
        s = self.state
        total = "?" if s["tasks_total"] is None else s["tasks_total"]
        line = (
            f"{self.title}: {s['phase']}, {s['tasks_done']}/{total} tasks, {s['files']} files, "
            f"{format_bytes(s['bytes'])}, {format_seconds(s['elapsed_s'])}"
        )
        return line + (f"\n{s['message']}" if s["phase"] == "failed" else "")

    # -- rendering ------------------------------------------------------------------------------
    def _render(self, event: ProgressEvent) -> None:
        if event.phase != "failed":
            self._previous_phase = event.phase
            self.failed_in = None
        elif self.failed_in is None:
            self.failed_in = self._previous_phase
        self.last_event = event
        total = event.tasks_total
        if event.phase == "done":
            total = total or max(event.tasks_done, 1)
            self.bar.max, self.bar.value = total, total
        else:
            self.bar.max = max(total or 1, 1)
            self.bar.value = min(event.tasks_done, self.bar.max)
        self.bar.bar_style = {"done": "success", "failed": "danger"}.get(event.phase, "info")
        self.tasks.value = (
            f'<span style="{FONT}">&nbsp;{event.tasks_done} / '
            f"{total if total is not None else '?'} tasks</span>"
        )
        self.steps.value = self._steps_html(event.phase)
        self.stats.value = (
            f'<span style="{FONT}">files <b>{event.files}</b> &middot; uploaded '
            f"<b>{esc(format_bytes(event.bytes))}</b> &middot; elapsed "
            f"<b>{esc(format_seconds(event.elapsed_s))}</b></span>"
        )
        self.message.value = self._message_html(event)

    def _steps_html(self, phase: str) -> str:
        current = self.failed_in if phase == "failed" else phase
        index = STEPS.index(current) if current in STEPS else 0
        chips = []
        for i, step in enumerate(STEPS):
            if phase == "failed" and i == index:
                color, weight, mark = "#c62828", "bold", "✖ "
            elif i < index or (phase == "done" and step == "done"):
                color, weight, mark = "#2e7d32", "normal", "✔ "
            elif i == index:
                color, weight, mark = "#1565c0", "bold", "▶ "
            else:
                color, weight, mark = "#888", "normal", ""
            chips.append(
                f'<span style="color:{color}; font-weight:{weight}">'
                f"{mark}{esc(STEP_TITLES[step])}</span>"
            )
        title = f"<b>{esc(self.title)}</b> &nbsp; "
        return f'<div style="{FONT}">{title}{" &rarr; ".join(chips)}</div>'

    def _message_html(self, event: ProgressEvent) -> str:
        if event.phase == "done":
            return (
                f'<div class="s3commit-summary" style="{FONT} color:#2e7d32">'
                f"✔ Committed {event.files} file(s), {esc(format_bytes(event.bytes))} from "
                f"{event.tasks_done} task(s) in {esc(format_seconds(event.elapsed_s))}. "
                "Nothing is left pending; the files are visible now.</div>"
            )
        if event.phase == "failed":
            where = STEP_TITLES.get(self.failed_in or "", self.failed_in or "?")
            return (
                f'<div class="s3commit-error" style="{FONT} color:#c62828; max-width:720px">'
                f"✖ Failed during {esc(where)}: {esc(event.message)}</div>"
                f'<div class="s3commit-advice" style="{FONT} max-width:720px">'
                f"What to do: {esc(what_to_do(self.failed_in or '', event.message))}</div>"
            )
        return ""
