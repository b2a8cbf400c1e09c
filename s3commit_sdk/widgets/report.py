"""``SuccessReport``: a committed job's ``_SUCCESS`` document as a summary, tables and charts.

Accepts a destination path (the document is read with :func:`s3commit_sdk.uploads.read_success`,
as ``s3commit success`` does), a :class:`~s3commit_sdk.WriteResult`, or a document, parsed
(:class:`~s3commit_sdk.formats.SuccessDocument`) or as its JSON object. The classic committer's
``_SUCCESS`` is an empty file: the report says so plainly instead of showing empty tables.
Charts are inline SVG, so nothing beyond ipywidgets is needed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import ipywidgets as widgets

from .. import uploads as up
from ..errors import S3CommitError, StoreError
from ..formats import CommittedFile, SuccessDocument, parse_success
from ..paths import S3_SCHEMES, SUCCESS_MARKER
from ._common import (
    FONT,
    WidgetWrapper,
    esc,
    format_bytes,
    format_seconds,
    histogram,
    html_table,
    svg_bar_chart,
)

ROOT = "(no partition)"
MAX_FILE_ROWS = 200
CLASSIC = "classic (FileOutputCommitter)"
#: the summary's facts that the classic committer's 0-byte ``_SUCCESS`` does not record
UNRECORDED = (
    "job",
    "conflict_mode",
    "format",
    "rows",
    "bytes",
    "files",
    "replaced_objects",
    "delta_version",
    "delta_removed_files",
    "iceberg_snapshot_id",
    "iceberg_removed_files",
)
#: how a phase timed inside the one above it is labelled in the phase chart
PART_MARK = "└ "


def read_success_file(path: str, options: dict[str, Any] | None = None) -> SuccessDocument | None:
    """The ``_SUCCESS`` under ``path``: s3:// through the store (as ``s3commit success``), other
    URLs (``file://`` of the rename committers) through fsspec. None for the 0-byte marker."""
    scheme = path.split("://", 1)[0] if "://" in path else ""
    if scheme in S3_SCHEMES:
        return up.read_success(path, options)
    import fsspec

    def read(name: str) -> bytes:
        with fsspec.open(path.rstrip("/") + "/" + name, "rb") as handle:
            return handle.read()

    try:
        body = read(SUCCESS_MARKER)
    except FileNotFoundError:
        raise StoreError(
            f"no {SUCCESS_MARKER} at {path.rstrip('/')}/{SUCCESS_MARKER}: no job has committed "
            "there (or it ran with marksuccessfuljobs=false)"
        ) from None
    return up.with_all_files(parse_success(body), read)


class SuccessReport(WidgetWrapper):
    """Summary (committer, mode, rows, bytes, files, durations per phase), partitions and files
    tables, and charts of bytes per partition and of task durations (or, when the document has
    no task timings, bytes per task)."""

    def __init__(self, path_or_result: Any, options: dict[str, Any] | None = None) -> None:
        #: what the ``_SUCCESS`` file at the destination is: "json", "empty" (the classic
        #: 0-byte marker), "missing", or "not read" (a document was passed in)
        self.success_file = "not read"
        self.source, self.doc = self._load(path_or_result, options)
        self.classic = self.success_file == "empty"
        self.files: list[CommittedFile] = list(self.doc.files) if self.doc else []
        self.partitions = up.partition_totals((f.to_dict() for f in self.files), ROOT)
        #: seconds per task when the document records them (``taskDurations``), else None;
        #: a resumed commit records 0 for the tasks it did not see run: not durations
        recorded = dict(self.doc.task_durations) if self.doc else {}
        self.task_durations = recorded if any(recorded.values()) else None
        self.task_bytes: dict[str, int] = {}
        for entry in self.files:
            task = entry.task or "?"
            self.task_bytes[task] = self.task_bytes.get(task, 0) + entry.size
        if self.doc is None:
            self.html = self._classic_html()
        else:
            self.html = self._report_html()
        self.view = widgets.HTML(self.html)
        self.widget = widgets.VBox(
            [self.view],
            layout=widgets.Layout(border="1px solid #ccc", padding="6px 10px", width="fit-content"),
        )
        self.widget.add_class("s3commit-success-report")

    # -- input ----------------------------------------------------------------------------------
    def _load(
        self, value: Any, options: dict[str, Any] | None
    ) -> tuple[str, SuccessDocument | None]:
        if isinstance(value, str):
            doc = read_success_file(value, options)
            self.success_file = "empty" if doc is None else "json"
            return value, doc
        if isinstance(value, SuccessDocument):
            return value.destination, value
        if hasattr(value, "success") and hasattr(value, "destination"):  # a WriteResult
            try:
                stored = read_success_file(value.destination, options)
                self.success_file = "empty" if stored is None else "json"
            except S3CommitError:
                self.success_file = "missing"
            return value.destination, value.success
        if value is None:
            self.success_file = "empty"
            return "?", None
        if isinstance(value, Mapping):
            doc = SuccessDocument.from_dict(value)
            return doc.destination, doc
        raise TypeError(
            "SuccessReport wants a destination path, a WriteResult or a parsed _SUCCESS "
            f"document, not {type(value).__name__}"
        )

    @property
    def summary(self) -> dict[str, Any]:
        doc = self.doc
        if doc is None:  # the classic marker: nothing recorded
            return {
                "destination": self.source,
                "classic": self.classic,
                "committer": CLASSIC,
                **dict.fromkeys(UNRECORDED),
                "partition_by": [],
                "durations": {},
                "requests": {},
            }
        return {
            "destination": self.source,
            "classic": self.classic,
            "committer": doc.committer,
            "job": doc.job_id,
            "conflict_mode": doc.conflict_mode,
            "format": doc.format,
            "partition_by": list(doc.partition_by),
            "rows": doc.rows,
            "bytes": doc.bytes,
            "files": len(self.files),
            "replaced_objects": doc.replaced_objects,
            "delta_version": doc.table.get("deltaVersion"),
            "delta_removed_files": doc.table.get("deltaRemovedFiles"),
            "iceberg_snapshot_id": doc.table.get("icebergSnapshotId"),
            "iceberg_removed_files": doc.table.get("icebergRemovedFiles"),
            "durations": dict(doc.durations),
            "requests": dict(doc.requests),
        }

    def text(self) -> str:
        return f"SuccessReport of {self.source}\n{up.format_success(self.doc)}"

    # -- rendering ------------------------------------------------------------------------------
    def _classic_html(self) -> str:
        return (
            f'<div style="{FONT}"><b>_SUCCESS of {esc(self.source)}</b></div>'
            f'<div class="s3commit-classic" style="{FONT} color:#8a6d00; max-width:720px">'
            "⚠ This _SUCCESS is the <b>0-byte marker of the classic FileOutputCommitter</b>: it "
            "only says that a job finished. It records no committer, files, rows, bytes or "
            "timings, so there is nothing more to report. The other committers (directory, "
            "partitioned, magic, manifest; file with <code>success.json=true</code>) leave a "
            "JSON _SUCCESS with all of that.</div>"
        )

    def _file_note(self) -> str:
        if self.success_file == "empty":
            return (
                f'<div class="s3commit-classic" style="{FONT} color:#8a6d00; max-width:720px">'
                "⚠ The _SUCCESS file at the destination is the <b>0-byte marker of the classic "
                "FileOutputCommitter</b>; it records nothing. This report comes from the "
                "WriteResult in memory.</div>"
            )
        if self.success_file == "missing":
            return (
                f'<div style="{FONT} color:#8a6d00">No _SUCCESS file at the destination '
                "(marksuccessfuljobs=false, or it was removed); this report comes from the "
                "WriteResult in memory.</div>"
            )
        return ""

    def _phase_chart(self, tree: up.PhaseTree) -> str:
        """The phases as they nest: a part is drawn under its phase, marked, never as more
        time; the parts of a phase add up to it (:func:`~s3commit_sdk.uploads.phase_tree`)."""
        labels, values = [], []
        for name, seconds, parts in tree:
            labels.append(name)
            values.append(seconds)
            labels += [PART_MARK + part for part, _ in parts]
            values += [part_seconds for _, part_seconds in parts]
        chart = svg_bar_chart(
            labels, values, title="duration per phase", formatter=format_seconds, width=380
        )
        return chart + (
            f'<div class="s3commit-phase-note" style="{FONT} color:#666; max-width:380px">'
            f"The job's duration ({_duration(tree)}) is {_phase_sum(tree)}. A bar "
            f"marked {PART_MARK.strip()} is a part of the phase above it, not more time: the "
            "parts of a phase add up to it. task_write and task_commit split the tasks phase as "
            "the tasks spent their time.</div>"
        )

    def _task_chart(self, durations: dict[str, float]) -> str:
        """Task durations as a histogram, said to be each task's own time beside the tasks
        phase's wall time; bytes per task when none were recorded."""
        if not self.task_durations:
            tasks = sorted(self.task_bytes)
            return svg_bar_chart(
                tasks,
                [self.task_bytes[t] for t in tasks],
                title="bytes per task",
                formatter=format_bytes,
            ) + (
                f'<div style="{FONT} color:#666">This _SUCCESS records no task durations; '
                "phase durations are above.</div>"
            )
        seconds = list(self.task_durations.values())
        bins = histogram(seconds)
        chart = svg_bar_chart(
            [f"{format_seconds(lo)}–{format_seconds(hi)}" for lo, hi, _ in bins],
            [count for _, _, count in bins],
            title=f"task durations ({len(seconds)} tasks)",
            formatter=lambda n: f"{n:.0f} task(s)",
        )
        wall = durations.get("tasks")
        here = f"{len(seconds)} tasks, {format_seconds(sum(seconds))} in all"
        if wall is not None:
            here += f"; the tasks phase: {format_seconds(wall)}"
        return chart + (
            f'<div class="s3commit-task-note" style="{FONT} color:#666; max-width:420px">'
            f"Task durations are {esc(up.TASK_TIME_NOTE)}. Here: {here}.</div>"
        )

    def _report_html(self) -> str:
        s = self.summary
        doc = self.doc
        tree = up.phase_tree(s["durations"])
        facts = [
            ("committer", s["committer"]),
            ("job", s["job"]),
            ("destination", s["destination"]),
            ("conflict mode", s["conflict_mode"]),
            ("format", s["format"]),
            ("partitioned by", ", ".join(s["partition_by"]) or "-"),
            ("committed", doc.date),
            ("files", s["files"]),
            ("rows", s["rows"]),
            ("bytes", f"{format_bytes(s['bytes'])} ({s['bytes']} B)"),
            ("replaced", up.replaced_text(doc)),
            ("duration", f"{_duration(tree)} ({_phase_sum(tree)})"),
        ]
        if "deltaVersion" in doc.table:
            removed = doc.table.get("deltaRemovedFiles", 0)
            facts.append(("Delta table version", f"{s['delta_version']} ({removed} files removed)"))
        if "icebergSnapshotId" in doc.table:
            removed = doc.table.get("icebergRemovedFiles", 0)
            table = doc.table.get("icebergTable", "")
            snapshot = f"{s['iceberg_snapshot_id']} ({removed} files removed)"
            facts.append((f"Iceberg table {table} snapshot", snapshot))
        phase_chart = self._phase_chart(tree)
        partition_chart = svg_bar_chart(
            [p["partition"] for p in self.partitions],
            [p["bytes"] for p in self.partitions],
            title="bytes per partition",
            formatter=format_bytes,
        )
        task_chart = self._task_chart(s["durations"])
        partitions_table = html_table(
            ["partition", "files", "rows", "bytes"],
            [
                (p["partition"], p["files"], p["rows"], format_bytes(p["bytes"]))
                for p in self.partitions
            ],
            numeric=(1, 2, 3),
            css_class="s3commit-partitions",
        )
        files_table = html_table(
            ["key", "partition", "rows", "size", "task", "ETag"],
            [
                (
                    f.key,
                    up.partition_name(f.partition, ROOT),
                    f.rows,
                    format_bytes(f.size),
                    f.task,
                    f.etag.strip('"'),
                )
                for f in sorted(self.files, key=lambda f: f.key)
            ],
            numeric=(2, 3),
            max_rows=MAX_FILE_ROWS,
            css_class="s3commit-files",
        )
        requests_table = html_table(
            ["S3 operation", "requests"], sorted(s["requests"].items()), numeric=(1,)
        )
        flex = "display:flex; flex-wrap:wrap; gap:28px; align-items:flex-start"
        return (
            f'<div style="{FONT}">'
            f"<div><b>_SUCCESS of {esc(self.source)}</b></div>{self._file_note()}"
            f'<div style="{flex}">'
            f"<div>{html_table((), facts, css_class='s3commit-summary')}</div>"
            f"<div>{phase_chart}</div></div>"
            f'<div style="{flex}"><div>{partition_chart}</div><div>{task_chart}</div></div>'
            f"<details open><summary><b>Partitions ({len(self.partitions)})</b></summary>"
            f"{partitions_table}</details>"
            f"<details><summary><b>Files ({len(self.files)})</b></summary>{files_table}</details>"
            f"<details><summary><b>S3 requests</b></summary>{requests_table}</details>"
            "</div>"
        )


def _duration(tree: up.PhaseTree) -> str:
    """The job's duration: its phases' sum (their parts are inside them)."""
    return format_seconds(sum(seconds for _, seconds, _ in tree))


def _phase_sum(tree: up.PhaseTree) -> str:
    return " + ".join(name for name, _, _ in tree)
