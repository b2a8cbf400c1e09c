"""``CommitProgress``: the live panel ``write_committed(progress="auto")`` shows in a notebook.

It is a listener of :class:`~s3commit_sdk.progress.ProgressTracker`: the driver calls it with a
:class:`~s3commit_sdk.progress.ProgressEvent` (from Spark's status tracker, the running tasks'
reports and the task results, on a background thread), never by polling the destination.
Updating a few traitlets per event costs microseconds, so the job is not slowed. A failure is
shown from its facts (:class:`~s3commit_sdk.progress.Failure`): the error, what the SDK did,
and what a listing found left, with the command for each.
"""

from __future__ import annotations

import re
import threading
from typing import Any

import ipywidgets as widgets

from ..progress import STEP_TITLES, ProgressEvent, status_line
from ._common import FONT, WidgetWrapper, esc, format_bytes, format_count, format_seconds

#: The phases in the order a job goes through them ("writing" includes task commit).
STEPS = ("setup", "writing", "job commit", "done")
_COMMAND = re.compile(r"`([^`]+)`")


def with_code(text: str) -> str:
    """Escaped text whose `backticked` commands become <code>."""
    return _COMMAND.sub(r"<code>\1</code>", esc(text))


class CommitProgress(WidgetWrapper):
    """Phase, a bar over rows (when the input's size is known) or tasks, running tasks, rows and
    bytes written so far, files and elapsed time; at the end the summary, or what failed or was
    interrupted and what is left.

    Call the instance with a ``ProgressEvent`` (that is what the protocol does).
    """

    def __init__(self, title: str = "s3commit write") -> None:
        self._lock = threading.Lock()
        self.title = title
        self.last_event: ProgressEvent | None = None
        self.failed_in: str | None = None
        self._previous_phase = "setup"
        self._display = None
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
        """Create the panel, display it in the current cell and return it (a listener).

        Its final state replaces the display's plain text too, so a saved notebook opened
        without widgets shows how the write ended, not its first state.
        """
        from IPython.display import display

        panel = cls(**kwargs)
        panel._display = display(panel, display_id=True)
        return panel

    def __call__(self, event: ProgressEvent) -> None:
        with self._lock:
            self._render(event)
        if event.phase in ("done", "failed") and self._display is not None:
            self._display.update(self)

    # -- state, for programs and tests ----------------------------------------------------------
    @property
    def phase(self) -> str:
        return self.last_event.phase if self.last_event else "setup"

    @property
    def state(self) -> dict[str, Any]:
        """The latest event as a dict, plus where a failure happened."""
        event = self.last_event or ProgressEvent("setup")
        failure = event.failure
        return {
            "phase": event.phase,
            "tasks_done": event.tasks_done,
            "tasks_total": event.tasks_total,
            "tasks_running": event.tasks_running,
            "rows": event.rows,
            "rows_total": event.rows_total,
            "files": event.files,
            "bytes": event.bytes,
            "elapsed_s": event.elapsed_s,
            "message": event.message,
            "failed_in": self.failed_in,
            "interrupted": bool(failure and failure.interrupted),
        }

    def text(self) -> str:
        event = self.last_event or ProgressEvent("setup")
        lines = [status_line(self.title, event)]
        if event.phase == "failed" and event.failure is not None:
            lines += event.failure.lines(self.failed_in or "")
        elif event.phase == "failed":
            lines.append(event.message)
        return "\n".join(lines)

    # -- rendering ------------------------------------------------------------------------------
    def _render(self, event: ProgressEvent) -> None:
        if event.phase != "failed":
            self._previous_phase = event.phase
            self.failed_in = None
        elif self.failed_in is None:
            self.failed_in = self._previous_phase
        self.last_event = event
        interrupted = bool(event.failure and event.failure.interrupted)
        total = event.tasks_total
        if event.rows_total:
            self.bar.description = "rows"
            self.bar.max, self.bar.value = event.rows_total, min(event.rows, event.rows_total)
        else:
            self.bar.description = "tasks"
            self.bar.max = max(total or 1, 1)
            self.bar.value = min(event.tasks_done, self.bar.max)
        if event.phase == "done":
            self.bar.value = self.bar.max
        self.bar.bar_style = {"done": "success", "failed": "danger"}.get(event.phase, "info")
        if interrupted:
            self.bar.bar_style = "warning"
        running = f", {event.tasks_running} running" if event.tasks_running else ""
        self.tasks.value = (
            f'<span style="{FONT}">&nbsp;{event.tasks_done} / '
            f"{total if total is not None else '?'} tasks{running}</span>"
        )
        self.steps.value = self._steps_html(event.phase, interrupted)
        rows = format_count(event.rows)
        if event.rows_total:
            rows += f" of {format_count(event.rows_total)}"
        self.stats.value = (
            f'<span style="{FONT}">rows <b>{esc(rows)}</b> &middot; written '
            f"<b>{esc(format_bytes(event.bytes))}</b> &middot; files <b>{event.files}</b> "
            f"&middot; elapsed <b>{esc(format_seconds(event.elapsed_s))}</b></span>"
        )
        self.message.value = self._message_html(event)

    def _steps_html(self, phase: str, interrupted: bool) -> str:
        current = self.failed_in if phase == "failed" else phase
        index = STEPS.index(current) if current in STEPS else 0
        chips = []
        for i, step in enumerate(STEPS):
            if phase == "failed" and i == index:
                color, weight = ("#b26a00", "bold") if interrupted else ("#c62828", "bold")
                mark = "■ " if interrupted else "✖ "
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
                f"✔ Committed {event.files} file(s), {esc(format_count(event.rows))} rows, "
                f"{esc(format_bytes(event.bytes))} from {event.tasks_done} task(s) in "
                f"{esc(format_seconds(event.elapsed_s))}. Nothing is left pending; the files "
                "are visible now.</div>"
            )
        if event.phase != "failed":
            return ""
        failure = event.failure
        if failure is None:  # an event from another source, with only a message
            return (
                f'<div class="s3commit-error" style="{FONT} color:#c62828; max-width:720px">'
                f"✖ Failed: {esc(event.message)}</div>"
            )
        color = "#b26a00" if failure.interrupted else "#c62828"
        head_class = "s3commit-interrupted" if failure.interrupted else "s3commit-error"
        block = f'style="{FONT} max-width:720px; margin-top:2px"'
        parts = [
            f'<div class="{head_class}" style="{FONT} color:{color}; max-width:720px">'
            f"{'■' if failure.interrupted else '✖'} "
            f"{with_code(failure.headline(self.failed_in or ''))}</div>"
        ]
        parts += [f'<div class="s3commit-note" {block}>{with_code(n)}</div>' for n in failure.notes]
        parts += [
            f'<div class="s3commit-visible" {block}>{with_code(line)}</div>'
            for line in failure.visible_line()
        ]
        parts += [
            f'<div class="s3commit-left" {block}>{with_code(line)}</div>'
            for line in failure.left_behind()
        ]
        return "".join(parts)
