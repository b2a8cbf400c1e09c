"""``StreamMonitor``: a live panel of one stream committing micro-batches into a destination.

Its figures come from the batches' records (their ``_SUCCESS`` documents, kept under
``__s3commit/streams/<stream>/``, as ``s3commit streams show`` reads them), from the pending
multipart uploads under the destination, and, when the Spark ``StreamingQuery`` is given, from
its ``lastProgress`` and ``status``. A background thread polls every ``interval_s``; each poll
lists the records (one request per 1,000) and reads only the records it has not read before
(a record never changes once written), then lists the pending uploads.

:func:`stream_figures` computes every figure from the records alone (plus the pending count and
the query's progress), so what the panel shows can be checked without S3 or a browser.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import ipywidgets as widgets

from .. import layout
from .. import uploads as up
from ..errors import NoStreamError, PendingSetError
from ..formats import parse_success
from ..paths import parse_s3_url
from ..streaming import ledger
from ..streaming.batch import StreamBatch, is_stream_id
from ._common import FONT, WidgetWrapper, esc, format_bytes, format_count, html_table
from .pending import PendingUploads

#: how the pending-uploads line names the cleanup (aborting uploads younger than the longest
#: batch would abort the running batch's own uploads, and fail it)
CLEANUP_AGE = "1h"


@dataclass(frozen=True)
class StreamFigures:
    """What the monitor shows; ``None`` where a figure is unknown (too few batches, no query)."""

    batches: int  #: batch records listed (the records of expired batches are gone)
    first_batch: int | None
    last_batch: int | None
    last_committed_ms: int | None  #: the last batch's commit time, ms since the epoch
    rows: int
    files: int
    bytes: int
    #: rows committed per second over the records' commit times: the rows of every batch but
    #: the earliest-committed one, over the time from its commit to the latest commit
    rows_per_s: float | None
    last_commit_ms: float | None  #: the last batch's job commit, in ms
    mean_commit_ms: float | None
    pending_uploads: int | None
    #: the query, when one is watched: "active", "stopped", "failed" (stopped with an error)
    query_state: str | None = None
    query_message: str | None = None  #: its ``status["message"]``, or the error's
    query_batch: int | None = None  #: ``lastProgress["batchId"]``
    processed_rows_per_s: float | None = None  #: ``lastProgress["processedRowsPerSecond"]``
    input_rows_per_s: float | None = None  #: ``lastProgress["inputRowsPerSecond"]``

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _finite(value: Any) -> float | None:
    """A number Spark reported, or None (absent, or NaN before the first batch)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def stream_figures(
    records: Sequence[ledger.BatchRecord],
    *,
    pending: int | None = None,
    progress: Mapping[str, Any] | None = None,
    status: Mapping[str, Any] | None = None,
    active: bool | None = None,
    error: str | None = None,
) -> StreamFigures:
    """The monitor's figures from a stream's batch records (any order), the number of pending
    uploads, and a ``StreamingQuery``'s ``lastProgress``, ``status``, ``isActive`` and
    ``exception()`` text. Pure: no request, no clock."""
    by_batch = sorted(records, key=lambda r: r.batch_id)
    by_time = sorted(records, key=lambda r: (r.committed_ms, r.batch_id))
    rate = None
    if len(by_time) >= 2:
        span_s = (by_time[-1].committed_ms - by_time[0].committed_ms) / 1000
        if span_s > 0:
            rate = sum(r.rows for r in by_time[1:]) / span_s
    last = by_batch[-1] if by_batch else None
    progress = progress or {}
    if active is None and not progress and not status and error is None:
        state = None
    elif active:
        state = "active"
    else:
        state = "failed" if error else "stopped"
    batch_id = progress.get("batchId")
    return StreamFigures(
        batches=len(by_batch),
        first_batch=by_batch[0].batch_id if by_batch else None,
        last_batch=last.batch_id if last else None,
        last_committed_ms=max(r.committed_ms for r in by_batch) if by_batch else None,
        rows=sum(r.rows for r in by_batch),
        files=sum(r.files for r in by_batch),
        bytes=sum(r.bytes for r in by_batch),
        rows_per_s=rate,
        last_commit_ms=last.commit_s * 1000 if last else None,
        mean_commit_ms=(
            sum(r.commit_s for r in by_batch) * 1000 / len(by_batch) if by_batch else None
        ),
        pending_uploads=pending,
        query_state=state,
        query_message=error or (status or {}).get("message"),
        query_batch=batch_id if isinstance(batch_id, int) else None,
        processed_rows_per_s=_finite(progress.get("processedRowsPerSecond")),
        input_rows_per_s=_finite(progress.get("inputRowsPerSecond")),
    )


# -- the figures as text, for the HTML table and the plain text alike ------------------------------
def format_rate(value: float | None) -> str:
    return "?" if value is None else f"{value:,.1f} rows/s"


def format_ms(value: float | None) -> str:
    return "?" if value is None else f"{value:,.0f} ms"


def _utc(epoch_ms: int) -> str:
    moment = datetime.fromtimestamp(epoch_ms / 1000, tz=timezone.utc)
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def figure_lines(f: StreamFigures, directory: str) -> list[tuple[str, str]]:
    """(label, value) pairs: the rows of the panel's table and the lines of its text."""
    lines = []
    if f.batches:
        lines += [
            ("batches committed", f"{f.batches} (batches {f.first_batch}..{f.last_batch})"),
            ("last batch", f"{f.last_batch}, committed {_utc(f.last_committed_ms or 0)}"),
        ]
    else:
        lines.append(("batches committed", "0 (no batch of this stream has committed yet)"))
    lines.append(("rows", format_count(f.rows)))
    rate = format_rate(f.rows_per_s)
    if f.rows_per_s is None:
        rate += " (needs two committed batches)" if f.batches < 2 else ""
    lines.append(("rows/s (commits)", rate))
    if f.query_state is not None:
        query = f.query_state + (f": {f.query_message}" if f.query_message else "")
        lines.append(("query", query))
        batch = "" if f.query_batch is None else f" (batch {f.query_batch})"
        lines.append(
            (
                "rows/s (query)",
                f"{format_rate(f.processed_rows_per_s)} processed, "
                f"{format_rate(f.input_rows_per_s)} input{batch}",
            )
        )
    lines += [
        ("last commit", f"{format_ms(f.last_commit_ms)} (mean {format_ms(f.mean_commit_ms)})"),
        ("written", f"{format_bytes(f.bytes)} ({f.bytes} B) in {f.files} files"),
    ]
    if f.pending_uploads is None:
        lines.append(("pending uploads", "?"))
    elif f.pending_uploads == 0:
        lines.append(("pending uploads", "0"))
    else:
        lines.append(
            (
                "pending uploads",
                f"{f.pending_uploads} (a running batch's own until it commits; abort those "
                f"left behind: s3commit uploads abort {directory} --older-than {CLEANUP_AGE})",
            )
        )
    return lines


# -- reading the records ---------------------------------------------------------------------------
def choose_stream(path: str, options: Mapping[str, Any] | None, query: Any = None) -> str:
    """The stream to watch when none is named: the query's (its id is the data source's stream
    id) if it has records, else the only stream, else the one that committed last; the query's
    id when no stream has committed yet. ``NoStreamError`` when there is nothing to watch."""
    found = ledger.list_streams(path, options)
    query_id = None
    if query is not None:
        query_id = str(getattr(query, "id", "") or "")
        if any(s.stream == query_id for s in found):
            return query_id
    if found:
        return max(found, key=lambda s: (s.last_committed_ms, s.stream)).stream
    if is_stream_id(query_id):
        return query_id  # type: ignore[return-value]
    location = parse_s3_url(path)
    where = f"s3://{location.bucket}/{location.dir_prefix}"
    raise NoStreamError(
        f"no stream has committed a batch under {where} (no batch records under "
        f"{layout.streams_prefix(location)}): start the query first, or pass stream= its id "
        "(the query's id for the s3commit data source, your name for foreachBatch)",
        destination=where,
        remedy=f"s3commit streams list {where}",
    )


class _RecordReader:
    """A stream's batch records, as :func:`~s3commit_sdk.streaming.ledger.stream_batches` reads
    them, but each record read once: a listing per poll, a GET per new record."""

    def __init__(self, path: str, stream: str, options: Mapping[str, Any] | None) -> None:
        self.location = parse_s3_url(path)
        self.stream = stream
        self.store = up.open_uploads_store(dict(options) if options else None)
        self._read: dict[str, ledger.BatchRecord] = {}

    def records(self) -> list[ledger.BatchRecord]:
        keys = ledger.record_keys(self.store, self.location, self.stream)
        bucket = self.location.bucket
        found = {k: self._read[k] for k in keys if k in self._read}  # expired ones dropped
        for key in keys:
            if key in found:
                continue
            body = self.store.get_if_present(bucket, key)
            if body is None:  # expired meanwhile
                continue
            doc = parse_success(body)
            batch = None if doc is None else StreamBatch.from_fields(doc.table)
            if batch is None or batch.query_id != self.stream or batch.job_id != doc.job_id:
                raise PendingSetError(
                    f"{self.location.url(key)} is not a record of stream {self.stream!r}"
                )
            found[key] = ledger.BatchRecord.of(doc)
        self._read = found
        return [found[k] for k in sorted(found)]

    def pending(self, path: str) -> int:
        return len(up.find_uploads(path, store=self.store))


class StreamMonitor(WidgetWrapper):
    """Batches committed, last batch, rows, rows per second (over the commits; and the query's,
    when ``query`` is given), last and mean commit latency, bytes and files, and the pending
    uploads under the destination, with a button that opens :class:`PendingUploads` there.

    ``stream`` None watches the destination's only stream, or the one that committed last (see
    :func:`choose_stream`). A background thread refreshes every ``interval_s`` seconds (None:
    only :meth:`refresh` and the Refresh button) until :meth:`stop`, or, with ``query``, until
    the query is no longer active (after one last refresh that sees its final batch).
    """

    def __init__(
        self,
        path: str,
        stream: str | None = None,
        options: dict[str, Any] | None = None,
        query: Any = None,
        interval_s: float | None = 2.0,
    ) -> None:
        location = parse_s3_url(path)  # InvalidPathError before any request
        if interval_s is not None and not interval_s > 0:
            raise ValueError(f"interval_s={interval_s!r}: give seconds > 0, or None")
        self.path = path
        self.options = options
        self.query = query
        self.interval_s = interval_s
        self.directory = f"s3://{location.bucket}/{location.dir_prefix}"
        if stream is not None:
            StreamBatch(stream, 0)  # a malformed id is refused as the ledger refuses it
        self.stream = stream if stream is not None else choose_stream(path, options, query)
        self._reader = _RecordReader(path, self.stream, options)
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self.records: list[ledger.BatchRecord] = []
        self.figures = stream_figures([])
        self.last_error: str | None = None
        self.pending_panel: PendingUploads | None = None

        self.header = widgets.HTML()
        self.table = widgets.HTML()
        self.refresh_button = widgets.Button(description="Refresh", icon="refresh")
        self.pending_button = widgets.Button(description="Pending uploads", icon="list")
        self.status = widgets.HTML()
        self.pending_box = widgets.VBox()
        for widget, name in (
            (self.table, "s3commit-stream-figures"),
            (self.refresh_button, "s3commit-refresh"),
            (self.pending_button, "s3commit-show-pending"),
            (self.status, "s3commit-stream-status"),
        ):
            widget.add_class(name)
        self.widget = widgets.VBox(
            [
                self.header,
                self.table,
                widgets.HBox([self.refresh_button, self.pending_button]),
                self.status,
                self.pending_box,
            ],
            layout=widgets.Layout(
                border="1px solid #ccc", padding="6px 10px", width="fit-content", margin="0 0 6px 0"
            ),
        )
        self.widget.add_class("s3commit-stream-monitor")
        self.refresh_button.on_click(lambda _: self._guard(self.refresh))
        self.pending_button.on_click(lambda _: self._guard(self.toggle_pending))

        self.refresh()
        if interval_s is not None and self._query_running():
            self._thread = threading.Thread(
                target=self._poll, name=f"s3commit-stream-monitor-{self.stream}", daemon=True
            )
            self._thread.start()
        self._render()

    # -- data -----------------------------------------------------------------------------------
    def refresh(self) -> StreamFigures:
        """Read the query's state, then the records and the pending uploads; show them."""
        with self._lock:
            query = self._query_state()  # first: records read after it include its last batch
            records = self._reader.records()
            pending = self._reader.pending(self.path)
            self.records = records
            self.figures = stream_figures(records, pending=pending, **query)
            self.last_error = None
            self.status.value = ""
            self._render()
            return self.figures

    def _query_state(self) -> dict[str, Any]:
        if self.query is None:
            return {}
        try:
            active = bool(self.query.isActive)
            state: dict[str, Any] = {
                "active": active,
                "progress": self.query.lastProgress,
                "status": self.query.status,
            }
            failure = None if active else self.query.exception()
        except Exception as exc:  # a stopped session, a lost Connect channel: not running
            return {"active": False, "error": f"the query cannot be read: {exc}"}
        if failure is not None:
            state["error"] = (str(failure).strip().splitlines() or [type(failure).__name__])[0]
        return state

    def _query_running(self) -> bool:
        return self.query is None or self.figures.query_state == "active"

    def _poll(self) -> None:
        assert self.interval_s is not None
        while not self._stopping.wait(self.interval_s):
            try:
                self.refresh()
            except Exception as exc:  # shown in the panel; the next poll tries again
                self._failed(exc)
            if not self._query_running():
                break
        self._stopping.set()  # the header says so from now on
        self._render()

    @property
    def polling(self) -> bool:
        """True while the background thread refreshes the panel."""
        return self._thread is not None and self._thread.is_alive()

    def stop(self, timeout: float | None = 30) -> None:
        """Stop polling (waits for a refresh under way, up to ``timeout`` seconds)."""
        self._stopping.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
        self._render()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until polling ends (``stop()``, or the query ended); False on timeout."""
        if self._thread is not None:
            self._thread.join(timeout)
        return not self.polling

    def close(self) -> None:
        self.stop()
        if self.pending_panel is not None:
            self.pending_panel.close()
        super().close()

    def toggle_pending(self) -> PendingUploads | None:
        """Show (listed afresh) or hide the :class:`PendingUploads` panel of the destination."""
        if self.pending_box.children:
            self.pending_box.children = ()
            return None
        if self.pending_panel is None:
            self.pending_panel = PendingUploads(self.path, self.options)
        else:
            self.pending_panel.refresh()
        self.pending_box.children = (self.pending_panel.widget,)
        return self.pending_panel

    def text(self) -> str:
        lines = [f"StreamMonitor: {self._title()}"]
        width = max(len(label) for label, _ in self._lines())
        lines += [f"  {label + ':':<{width + 1}} {value}" for label, value in self._lines()]
        if self.last_error:
            lines.append(f"  refresh failed: {self.last_error}")
        return "\n".join(lines)

    # -- rendering ------------------------------------------------------------------------------
    def _lines(self) -> list[tuple[str, str]]:
        return figure_lines(self.figures, self.directory)

    def _polling_text(self) -> str:
        if self.polling and not self._stopping.is_set():
            return f"refreshing every {self.interval_s:g} s"
        if self.query is not None and not self._query_running():
            return "stopped: the query is no longer active"
        return "not refreshing" if self.interval_s is None else "stopped"

    def _title(self) -> str:
        return f"stream {self.stream!r} into {self.directory} ({self._polling_text()})"

    def _render(self) -> None:
        self.header.value = (
            f'<div style="{FONT}"><b>Stream {esc(self.stream)}</b> into '
            f"<code>{esc(self.directory)}</code> &middot; {esc(self._polling_text())}</div>"
        )
        table = html_table((), self._lines(), css_class="s3commit-stream-table")
        if self.table.value != table:
            self.table.value = table

    def _failed(self, exc: BaseException) -> None:
        self.last_error = str(exc)
        self.status.value = f'<div style="{FONT} color:#c62828">refresh failed: {esc(exc)}</div>'

    def _guard(self, action) -> None:
        """Run a button's action; show a failure in the panel instead of losing it in a log."""
        try:
            action()
        except Exception as exc:
            self._failed(exc)
