"""``StreamMonitor``: a stream's committed micro-batches as a live panel.

The batches are real commits (``write_committed(..., stream=StreamBatch(...))``) on the test S3
servers; what the panel shows is checked against the batch records read back with boto3 (and
``stream_batches``). The figures themselves are checked on hand-built records, with the
expected values worked out by hand. No test sleeps: ``refresh()`` is synchronous, and the
polling thread is waited for by joining it.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from html import unescape

import pyarrow as pa
import pytest
from conftest import BUCKET, list_keys

from s3commit_sdk import write_committed
from s3commit_sdk.errors import StoreError
from s3commit_sdk.streaming import StreamBatch, stream_batches
from s3commit_sdk.streaming.ledger import BatchRecord
from s3commit_sdk.textformat import format_bytes
from s3commit_sdk.widgets import NoStreamError, PendingUploads, StreamMonitor, stream_figures

STREAM = "orders"
DAYS = ["2026-11-01", "2026-11-02", "2026-11-03"]


def write_batch(dest, batch_id: int, n: int = 12, stream: str = STREAM):
    """Batch ``batch_id``: ``n`` rows (a different count per batch keeps the sums honest)."""
    ids = [batch_id * 1000 + i for i in range(n)]
    table = pa.table(
        {"id": pa.array(ids, pa.int64()), "day": [DAYS[i % len(DAYS)] for i in range(n)]}
    )
    return write_committed(
        table,
        dest.url,
        partition_by=["day"],
        stream=StreamBatch(stream, batch_id),
        progress=False,
    )


def records_by_boto3(s3, dest) -> list[dict]:
    """The stream's batch records as the server holds them, oldest batch first."""
    prefix = f"{dest.dir}__s3commit/streams/{STREAM}/"
    docs = []
    for key in list_keys(s3, prefix):
        docs.append(json.loads(s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()))
    return sorted(docs, key=lambda d: d["streamBatchId"])


def expected_lines(docs: list[dict]) -> list[str]:
    """The panel's lines, worked out from the records' own fields."""
    rows = [d["rows"] for d in docs]
    stamps = [d["timestamp"] for d in docs]
    commits_ms = [d["durations"]["job_commit"] * 1000 for d in docs]
    total_bytes = sum(d["bytes"] for d in docs)
    files = sum(len(d["files"]) for d in docs)
    rate = sum(rows[1:]) / ((stamps[-1] - stamps[0]) / 1000)
    committed = datetime.fromtimestamp(stamps[-1] / 1000, tz=timezone.utc)
    last = docs[-1]["streamBatchId"]
    return [
        f"batches committed: {len(docs)} (batches 0..{last})",
        f"last batch:        {last}, committed {committed:%Y-%m-%d %H:%M:%S} UTC",
        f"rows:              {sum(rows):,}",
        f"rows/s (commits):  {rate:,.1f} rows/s",
        f"last commit:       {commits_ms[-1]:,.0f} ms (mean {sum(commits_ms) / len(docs):,.0f} ms)",
        f"written:           {format_bytes(total_bytes)} ({total_bytes} B) in {files} files",
        "pending uploads:   0",
    ]


def shown_html(monitor) -> str:
    return unescape(monitor.table.value)


def test_the_panel_shows_the_figures_of_the_batch_records(s3, dest):
    for batch_id, n in ((0, 12), (1, 30), (2, 7)):
        write_batch(dest, batch_id, n)
    monitor = StreamMonitor(dest.url, interval_s=None)  # the destination's only stream
    try:
        assert monitor.stream == STREAM and not monitor.polling
        monitor.refresh()
        docs = records_by_boto3(s3, dest)
        assert [d["rows"] for d in docs] == [12, 30, 7]
        listed = stream_batches(dest.url, STREAM)
        assert monitor.records == listed
        assert [(r.rows, r.bytes, r.files) for r in listed] == [
            (d["rows"], d["bytes"], len(d["files"])) for d in docs
        ]
        text = monitor.text()
        assert text.splitlines()[0] == (
            f"StreamMonitor: stream 'orders' into s3://{BUCKET}/{dest.dir} (not refreshing)"
        )
        assert [line.strip() for line in text.splitlines()[1:]] == expected_lines(docs)
        html = shown_html(monitor)
        for line in expected_lines(docs):  # the same label and value, as table cells
            label, value = (part.strip() for part in line.split(":", 1))
            assert f">{label}</td>" in html and f">{value}</td>" in html, (label, value)

        # a fourth batch: the next refresh shows it (and reads only its record)
        write_batch(dest, 3, 50)
        figures = monitor.refresh()
        docs = records_by_boto3(s3, dest)
        assert (figures.batches, figures.last_batch, figures.rows) == (4, 3, 99)
        assert [line.strip() for line in monitor.text().splitlines()[1:]] == expected_lines(docs)
        assert "4 (batches 0..3)" in shown_html(monitor)
        assert monitor._repr_mimebundle_()["text/plain"] == monitor.text()
    finally:
        monitor.close()


def test_a_destination_without_a_stream_is_a_typed_error(dest):
    write_committed(pa.table({"id": [1, 2]}), dest.url, progress=False)  # a batch job's
    with pytest.raises(NoStreamError, match="no stream has committed a batch under") as caught:
        StreamMonitor(dest.url)
    assert isinstance(caught.value, StoreError)
    assert caught.value.remedy == f"s3commit streams list s3://{BUCKET}/{dest.dir}"


def test_a_named_stream_without_batches_waits_for_its_first(dest):
    monitor = StreamMonitor(dest.url, "not-started-yet", interval_s=None)
    assert monitor.figures.batches == 0
    assert "0 (no batch of this stream has committed yet)" in monitor.text()
    write_batch(dest, 0, stream="not-started-yet")
    assert monitor.refresh().batches == 1


def test_the_most_recent_stream_is_chosen_when_several_commit_there(dest):
    write_batch(dest, 0, stream="older")
    write_batch(dest, 0, stream="newer")
    assert StreamMonitor(dest.url, interval_s=None).stream == "newer"


def test_pending_uploads_under_the_destination_are_counted(s3, dest):
    write_batch(dest, 0)
    monitor = StreamMonitor(dest.url, interval_s=None)
    key = f"{dest.dir}day=2026-11-01/part-00000-left.c000.parquet"
    upload_id = s3.create_multipart_upload(Bucket=BUCKET, Key=key)["UploadId"]
    try:
        assert monitor.refresh().pending_uploads == 1
        command = f"s3commit uploads abort s3://{BUCKET}/{dest.dir} --older-than 1h"
        assert "pending uploads:   1 (a running batch's own until it commits; abort those " in (
            monitor.text()
        )
        assert command in monitor.text() and command in shown_html(monitor)
        panel = monitor.toggle_pending()  # the PendingUploads panel, with its abort button
        assert isinstance(panel, PendingUploads)
        assert [r.key for r in panel.uploads] == [key]
        assert monitor.pending_box.children == (panel.widget,)
        assert monitor.toggle_pending() is None and monitor.pending_box.children == ()
    finally:
        s3.abort_multipart_upload(Bucket=BUCKET, Key=key, UploadId=upload_id)
    assert monitor.refresh().pending_uploads == 0
    monitor.close()


class FakeQuery:
    """What the monitor reads of a ``StreamingQuery``."""

    def __init__(self, query_id: str) -> None:
        self.id = query_id
        self.isActive = True
        self.lastProgress = {
            "batchId": 7,
            "processedRowsPerSecond": 1234.5,
            "inputRowsPerSecond": float("nan"),
        }
        self.status = {"message": "Waiting for data <img src=x onerror=alert(1)>"}

    def exception(self):
        return None


def test_polling_stops_after_one_last_refresh_once_the_query_ended(dest):
    write_batch(dest, 0)
    query = FakeQuery(STREAM)
    monitor = StreamMonitor(dest.url, query=query, interval_s=0.05)
    try:
        assert monitor.polling and monitor.stream == STREAM
        assert "(refreshing every 0.05 s)" in monitor.text()
        assert "query:             active: Waiting for data <img" in monitor.text()
        assert "1,234.5 rows/s processed, ? input (batch 7)" in monitor.text()
        assert "<img" not in monitor.table.value  # the query's text is escaped in HTML
        write_batch(dest, 1)  # committed before the query ends: the last refresh sees it
        query.isActive = False
        assert monitor.wait(60)
        assert not monitor.polling
        assert (monitor.figures.batches, monitor.figures.query_state) == (2, "stopped")
        assert "(stopped: the query is no longer active)" in monitor.text()
    finally:
        monitor.close()


def test_stop_ends_the_polling(dest):
    write_batch(dest, 0)
    monitor = StreamMonitor(dest.url, interval_s=0.05)
    assert monitor.polling
    monitor.stop()
    assert not monitor.polling and "(stopped)" in monitor.text()
    monitor.close()


# -- the figures, worked out by hand -------------------------------------------------------------
def record(batch_id: int, at_ms: int, rows: int, commit_s: float) -> BatchRecord:
    return BatchRecord(
        stream=STREAM,
        batch_id=batch_id,
        job_id=StreamBatch(STREAM, batch_id).job_id,
        committed_ms=at_ms,
        rows=rows,
        files=batch_id + 1,
        bytes=1000 * (batch_id + 1),
        commit_s=commit_s,
    )


def test_rows_per_second_and_commit_latency():
    records = [
        record(2, 1_006_000, 500, 0.6),
        record(0, 1_000_000, 100, 0.2),
        record(1, 1_002_000, 300, 0.4),
    ]
    f = stream_figures(records, pending=3)
    # after batch 0's commit, 300 + 500 rows committed in 6 s
    assert f.rows_per_s == pytest.approx(800 / 6)
    assert f.last_commit_ms == pytest.approx(600)  # batch 2's
    assert f.mean_commit_ms == pytest.approx(400)  # (200 + 400 + 600) / 3
    assert (f.batches, f.first_batch, f.last_batch, f.last_committed_ms) == (3, 0, 2, 1_006_000)
    assert (f.rows, f.files, f.bytes, f.pending_uploads) == (900, 6, 6000, 3)
    assert f.query_state is None and f.processed_rows_per_s is None


def test_too_few_commits_for_a_rate():
    assert stream_figures([record(0, 5_000, 10, 0.1)]).rows_per_s is None
    same_time = [record(0, 5_000, 10, 0.1), record(1, 5_000, 10, 0.3)]
    f = stream_figures(same_time)
    assert f.rows_per_s is None and f.mean_commit_ms == pytest.approx(200)
    empty = stream_figures([])
    assert (empty.batches, empty.last_batch, empty.rows, empty.mean_commit_ms) == (0, None, 0, None)


def test_the_query_figures():
    progress = {"batchId": 4, "processedRowsPerSecond": 250.0, "inputRowsPerSecond": float("nan")}
    f = stream_figures(
        [], progress=progress, status={"message": "Processing new data"}, active=True
    )
    assert (f.query_state, f.query_message, f.query_batch) == ("active", "Processing new data", 4)
    assert (f.processed_rows_per_s, f.input_rows_per_s) == (250.0, None)  # NaN: not known
    failed = stream_figures([], progress=progress, active=False, error="boom")
    assert (failed.query_state, failed.query_message) == ("failed", "boom")
    assert stream_figures([], active=False).query_state == "stopped"
