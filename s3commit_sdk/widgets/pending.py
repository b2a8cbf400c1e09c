"""``PendingUploads``: the multipart uploads under a path that S3 bills until someone aborts them.

Listing, filtering and aborting go through :mod:`s3commit_sdk.uploads`, exactly as the
``s3commit uploads`` CLI does: always under the directory with its trailing ``/`` (``ds1``
never reaches ``ds10``), the job UUID read from the key, abort refused outside the directory.
"""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

import ipywidgets as widgets

from .. import uploads as up
from ..errors import InvalidArgumentError, S3CommitError
from ..paths import parse_s3_url
from ..store import PendingUploadInfo
from ._common import FONT, WidgetWrapper, esc, format_bytes

COLUMNS = ("", "key", "job", "initiated (UTC)", "age", "parts", "bytes")
GRID_COLUMNS = "28px minmax(220px, 3fr) minmax(120px, 290px) 150px 80px 50px 80px"


@dataclass(frozen=True)
class UploadRow:
    """One pending upload as the table shows it; ``parts``/``bytes`` None when not listable."""

    key: str
    upload_id: str
    job: str | None
    initiated: datetime | None
    age: timedelta | None
    parts: int | None
    bytes: int | None
    info: PendingUploadInfo = field(repr=False)


def _utc(moment: datetime | None) -> datetime | None:
    moment = up.as_utc(moment)
    return moment.astimezone(timezone.utc) if moment is not None else None


class PendingUploads(WidgetWrapper):
    """A table of the pending multipart uploads under ``path``, with filters and abort.

    ``now`` fixes the clock ages are measured against (tests; stores that report one fixed
    initiation time). Programmatic use: :attr:`uploads`, :attr:`shown`, :meth:`refresh`,
    :meth:`set_filters`, :meth:`select`, :meth:`abort_selected`.
    """

    def __init__(
        self,
        path: str,
        options: dict[str, Any] | None = None,
        now: datetime | None = None,
        *,
        older_than: str | timedelta | None = None,
        job: str | None = None,
        list_parts: bool = True,
        max_rows: int = 500,
    ) -> None:
        self.location = parse_s3_url(path)  # InvalidPathError before any request
        self.path = path
        self.now = now
        self.list_parts = list_parts
        self.max_rows = max_rows
        self._store = up.open_uploads_store(options)
        self.uploads: list[UploadRow] = []
        self._selected: set[str] = set()  # upload ids
        self._syncing = False
        self.last_results: list[tuple[UploadRow, bool]] = []

        where = f"s3://{self.location.bucket}/{self.location.dir_prefix}"
        self.header = widgets.HTML(
            f'<div style="{FONT}"><b>Pending multipart uploads</b> under <code>{esc(where)}'
            "</code> (S3 bills their parts until they are completed or aborted)</div>"
        )
        self.older_than = widgets.Text(
            description="older than",
            placeholder="e.g. 24h, 1d12h",
            layout=widgets.Layout(width="230px"),
        )
        self.job = widgets.Dropdown(
            description="job", options=[("all jobs", "")], layout=widgets.Layout(width="420px")
        )
        self.refresh_button = widgets.Button(description="Refresh", icon="refresh")
        self.select_all = widgets.Checkbox(
            description="select all shown", indent=False, layout=widgets.Layout(width="150px")
        )
        self.table = widgets.GridBox(
            layout=widgets.Layout(
                grid_template_columns=GRID_COLUMNS, grid_gap="0 8px", align_items="center"
            )
        )
        self._column_titles = [
            widgets.HTML(f'<b style="{FONT}">{esc(title)}</b>' if title else "")
            for title in COLUMNS
        ]
        self._row_widgets: dict[str, list[widgets.Widget]] = {}
        self.summary = widgets.HTML()
        self.abort_button = widgets.Button(
            description="Abort selected", button_style="danger", icon="trash", disabled=True
        )
        self.confirm_text = widgets.HTML()
        self.confirm_button = widgets.Button(description="Yes, abort", button_style="danger")
        self.cancel_button = widgets.Button(description="Cancel")
        self.confirm_box = widgets.HBox(
            [self.confirm_text, self.confirm_button, self.cancel_button],
            layout=widgets.Layout(display="none", align_items="center"),
        )
        self.status = widgets.HTML()
        for widget, name in (
            (self.abort_button, "s3commit-abort"),
            (self.confirm_button, "s3commit-confirm"),
            (self.cancel_button, "s3commit-cancel"),
            (self.refresh_button, "s3commit-refresh"),
            (self.table, "s3commit-uploads-table"),
            (self.summary, "s3commit-uploads-summary"),
            (self.status, "s3commit-uploads-status"),
        ):
            widget.add_class(name)
        self.widget = widgets.VBox(
            [
                self.header,
                widgets.HBox([self.older_than, self.job, self.refresh_button]),
                self.select_all,
                self.table,
                self.summary,
                widgets.HBox([self.abort_button, self.confirm_box]),
                self.status,
            ],
            layout=widgets.Layout(border="1px solid #ccc", padding="6px 10px"),
        )
        self.widget.add_class("s3commit-pending-uploads")

        self.refresh_button.on_click(lambda _: self._guard(self.refresh))
        self.abort_button.on_click(lambda _: self._ask_confirmation())
        self.confirm_button.on_click(lambda _: self._guard(self._confirmed))
        self.cancel_button.on_click(lambda _: self._hide_confirmation("not confirmed"))
        self.older_than.observe(lambda _: self._guard(self._render), names="value", type="change")
        self.job.observe(lambda _: self._guard(self._render), names="value", type="change")
        self.select_all.observe(self._on_select_all, names="value", type="change")

        if older_than is not None or job is not None:
            self.set_filters(older_than=older_than, job=job, _render=False)
        self.refresh()

    # -- data -----------------------------------------------------------------------------------
    def refresh(self) -> list[UploadRow]:
        """List the uploads again (and their parts); keeps the selection of those still there."""
        found = up.find_uploads(self.path, store=self._store)
        sizes: list[tuple[int, int] | None] = [None] * len(found)
        if self.list_parts and found:
            workers = min(up.PARALLEL_REQUESTS, len(found))
            with ThreadPoolExecutor(workers, "s3commit-parts") as pool:
                sizes = list(pool.map(self._parts, found))
        rows = [
            UploadRow(
                key=u.key,
                upload_id=u.upload_id,
                job=up.job_of_key(u.key),
                initiated=_utc(u.initiated),
                age=up.upload_age(u, self.now),
                parts=s[0] if s else None,
                bytes=s[1] if s else None,
                info=u,
            )
            for u, s in zip(found, sizes, strict=True)
        ]
        rows.sort(key=lambda r: (r.key, r.upload_id))
        self.uploads = rows
        self._selected &= {r.upload_id for r in rows}
        jobs: dict[str, int] = {}
        for row in rows:
            if row.job:
                jobs[row.job] = jobs.get(row.job, 0) + 1
        chosen = self.job.value
        self._syncing = True
        try:
            self.job.options = [("all jobs", "")] + [
                (f"{job} ({count})", job) for job, count in sorted(jobs.items())
            ]
            self.job.value = chosen if chosen in jobs else ""
        finally:
            self._syncing = False
        self._render()
        self._drop_row_widgets({r.upload_id for r in rows})
        return rows

    def _parts(self, upload: PendingUploadInfo) -> tuple[int, int] | None:
        try:
            return up.upload_parts(self.path, upload, store=self._store)
        except S3CommitError:
            return None

    @property
    def filters(self) -> dict[str, Any]:
        """The filters in force: ``older_than`` (timedelta or None) and ``job`` (or None)."""
        text = self.older_than.value.strip()
        return {
            "older_than": up.parse_duration(text) if text else None,
            "job": self.job.value or None,
        }

    def set_filters(
        self,
        older_than: str | timedelta | None = None,
        job: str | None = None,
        *,
        _render: bool = True,
    ) -> None:
        """Set both filters (None clears one); rows no longer shown are deselected."""
        if isinstance(older_than, timedelta):
            older_than = f"{int(older_than.total_seconds())}s"
        if older_than:
            up.parse_duration(older_than)  # InvalidArgumentError now, not at render time
        if job:
            up.filter_uploads([], job=job)  # validates the UUID
        self._syncing = True
        try:
            self.older_than.value = older_than or ""
            if job and job.lower() not in [value for _, value in self.job.options]:
                self.job.options = [*self.job.options, (job.lower(), job.lower())]
            self.job.value = job.lower() if job else ""
        finally:
            self._syncing = False
        if _render:
            self._render()

    @property
    def shown(self) -> list[UploadRow]:
        """The uploads that pass the filters, in table order."""
        filters = self.filters
        kept = up.filter_uploads(
            [r.info for r in self.uploads],
            older_than=filters["older_than"],
            job=filters["job"],
            now=self.now,
        )
        ids = {u.upload_id for u in kept}
        return [r for r in self.uploads if r.upload_id in ids]

    @property
    def selected(self) -> list[UploadRow]:
        return [r for r in self.shown if r.upload_id in self._selected]

    def select(self, keys: Iterable[str] | str) -> list[UploadRow]:
        """Select exactly the shown uploads with these keys (or upload ids); returns them.

        A key that no shown upload has raises ``InvalidArgumentError``: a stale list never
        silently selects nothing.
        """
        wanted = {keys} if isinstance(keys, str) else set(keys)
        shown = self.shown
        chosen: set[str] = set()
        matched: set[str] = set()
        for row in shown:
            for name in {row.key, row.upload_id} & wanted:
                matched.add(name)
                chosen.add(row.upload_id)
        missing = sorted(wanted - matched)
        if missing:
            raise InvalidArgumentError(
                f"no pending upload shown with key or id {missing[:5]}; call refresh() or "
                "change the filters"
            )
        self._selected = chosen
        self._render()
        return self.selected

    def abort_selected(self) -> list[tuple[UploadRow, bool]]:
        """Abort the selected uploads through S3 now; True where this call aborted one.

        (The button asks for confirmation first; this method is the confirmed action.)
        """
        chosen = self.selected
        self._hide_confirmation("")
        if not chosen:
            self._set_status("nothing selected; nothing aborted")
            return []
        by_id = {r.upload_id: r for r in chosen}
        results = up.abort_uploads(self.path, [r.info for r in chosen], store=self._store)
        self.last_results = [(by_id[u.upload_id], done) for u, done in results]
        aborted = sum(1 for _, done in results if done)
        gone = len(results) - aborted
        freed = sum(r.bytes or 0 for r, done in self.last_results if done)
        self._selected -= set(by_id)
        self.refresh()
        self._set_status(
            f"aborted {aborted} upload(s) ({format_bytes(freed)} no longer billed)"
            + (f"; {gone} were already gone" if gone else ""),
            color="#2e7d32",
        )
        return self.last_results

    @property
    def billed_bytes(self) -> int:
        """Bytes in the listed parts of the shown uploads (what S3 stores and bills now)."""
        return sum(r.bytes or 0 for r in self.shown)

    def text(self) -> str:
        shown = self.shown
        lines = [
            f"PendingUploads: {len(shown)} pending upload(s) under "
            f"s3://{self.location.bucket}/{self.location.dir_prefix} "
            f"(estimated billed: {format_bytes(self.billed_bytes)})"
        ]
        for row in shown[: self.max_rows]:
            lines.append(
                f"  {row.key}  job={row.job or '-'}  age={up.format_duration(row.age)}  "
                f"parts={'?' if row.parts is None else row.parts}  {format_bytes(row.bytes)}"
            )
        return "\n".join(lines)

    # -- rendering ------------------------------------------------------------------------------
    def _render(self, *_: Any) -> None:
        if self._syncing:
            return
        self._set_status("")
        self.confirm_box.layout.display = "none"  # a confirmation is for one selection only
        try:
            shown = self.shown
        except InvalidArgumentError as exc:
            self._set_status(str(exc), color="#c62828")
            shown = list(self.uploads)
        visible_ids = {r.upload_id for r in shown}
        self._selected &= visible_ids
        cells: list[widgets.Widget] = list(self._column_titles)
        self._syncing = True
        try:
            for row in shown[: self.max_rows]:
                cells += self._row_cells(row)
            if tuple(cells) != tuple(self.table.children):
                self.table.children = cells
            self.select_all.value = bool(shown) and visible_ids <= self._selected
        finally:
            self._syncing = False
        self._render_summary(shown)

    def _row_cells(self, row: UploadRow) -> list[widgets.Widget]:
        """The checkbox and text cells of one upload, made once and then updated in place
        (re-creating widgets on every filter change would pile up models in the kernel)."""
        relative = self.location.relative(row.key)
        initiated = row.initiated.strftime("%Y-%m-%d %H:%M:%S") if row.initiated else "?"
        texts = (
            f'<span title="{esc(row.key)}" style="word-break: break-all">{esc(relative)}</span>',
            esc(row.job or "-"),
            esc(initiated),
            esc(up.format_duration(row.age)),
            esc("?" if row.parts is None else row.parts),
            esc(format_bytes(row.bytes)),
        )
        values = [f'<span style="{FONT}">{text}</span>' for text in texts]
        cached = self._row_widgets.get(row.upload_id)
        if cached is None:
            box = widgets.Checkbox(indent=False, layout=widgets.Layout(width="24px"))
            box.observe(self._on_checkbox(row.upload_id), names="value", type="change")
            cached = [box, *(widgets.HTML(v) for v in values)]
            self._row_widgets[row.upload_id] = cached
        else:
            for cell, value in zip(cached[1:], values, strict=True):
                if cell.value != value:
                    cell.value = value
        cached[0].value = row.upload_id in self._selected  # callers hold _syncing
        return cached

    def _drop_row_widgets(self, keep: set[str]) -> None:
        for upload_id in [u for u in self._row_widgets if u not in keep]:
            for cell in self._row_widgets.pop(upload_id):
                cell.close()

    def _render_summary(self, shown: list[UploadRow]) -> None:
        unknown = sum(1 for r in shown if r.bytes is None)
        selected = [r for r in shown if r.upload_id in self._selected]
        billed = sum(r.bytes or 0 for r in shown)
        selected_bytes = format_bytes(sum(r.bytes or 0 for r in selected))
        text = (
            f"<b>{len(shown)}</b> pending upload(s) shown (of {len(self.uploads)}), "
            f"<b>{len(selected)}</b> selected ({esc(selected_bytes)}). "
            f"Estimated billed storage: <b>{esc(format_bytes(billed))}</b> in "
            f"{sum(r.parts or 0 for r in shown)} part(s)"
        )
        if unknown:
            text += f" ({unknown} upload(s) whose parts could not be listed not counted)"
        if len(shown) > self.max_rows:
            text += f"; first {self.max_rows} rows shown, narrow with the filters"
        self.summary.value = f'<div style="{FONT}">{text}.</div>'
        self.abort_button.disabled = not selected

    def _set_status(self, text: str, color: str = "inherit") -> None:
        self.status.value = f'<div style="{FONT} color:{color}">{esc(text)}</div>' if text else ""

    # -- events ---------------------------------------------------------------------------------
    def _on_checkbox(self, upload_id: str):
        def changed(change: dict) -> None:
            if self._syncing:
                return
            if change["new"]:
                self._selected.add(upload_id)
            else:
                self._selected.discard(upload_id)
            self.confirm_box.layout.display = "none"
            self._render_summary(self.shown)
            self._syncing = True
            try:
                shown_ids = {r.upload_id for r in self.shown}
                self.select_all.value = bool(shown_ids) and shown_ids <= self._selected
            finally:
                self._syncing = False

        return changed

    def _on_select_all(self, change: dict) -> None:
        if self._syncing:
            return
        self._selected = {r.upload_id for r in self.shown} if change["new"] else set()
        self._render()

    def _ask_confirmation(self) -> None:
        chosen = self.selected
        if not chosen:
            self._set_status("select uploads to abort first")
            return
        size = format_bytes(sum(r.bytes or 0 for r in chosen))
        self.confirm_text.value = (
            f'<span style="{FONT}">Abort {len(chosen)} upload(s) ({esc(size)})? Their parts '
            "are deleted and cannot be completed any more. &nbsp;</span>"
        )
        self.confirm_box.layout.display = "flex"

    def _hide_confirmation(self, status: str) -> None:
        self.confirm_box.layout.display = "none"
        if status:
            self._set_status(status)

    def _confirmed(self) -> None:
        self.abort_selected()

    def _guard(self, action) -> None:
        """Run a button's action; show a failure in the panel instead of losing it in a log."""
        try:
            action()
        except (S3CommitError, ValueError) as exc:
            self._set_status(f"failed: {exc}", color="#c62828")
