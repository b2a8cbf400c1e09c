"""The notebook widgets as objects: state after real commits, aborts through the real endpoint.

No kernel is needed: ipywidgets models work without a front end, so the tests read the same
traitlets a browser would render. Every upload a test starts is aborted (the ``dest`` fixture
checks that nothing is left pending).
"""

from __future__ import annotations

import re
import subprocess
import sys
from datetime import timedelta
from html import unescape

import ipywidgets as widgets
import pandas as pd
import pyarrow as pa
import pytest
from conftest import BUCKET, NESTED_PHASES, pending_uploads

from s3commit_sdk import ConflictError, InvalidArgumentError, TaskFailedError, write_committed
from s3commit_sdk.progress import ProgressEvent
from s3commit_sdk.widgets import CommitProgress, PendingUploads, SuccessReport

JOB_A = "0b1e8f0e-1111-4222-8333-444455556666"
JOB_B = "7c2d9a1b-aaaa-4bbb-8ccc-dddddddddddd"
SCRIPT_KEY = "<script>alert('pwned')</script>&<img src=x onerror=alert(1)>.parquet"
MIB = 2**20


def html_values(widget) -> list[str]:
    """Every HTML/Label text in a widget tree (what the browser would render)."""
    found = []
    if isinstance(widget, (widgets.HTML, widgets.Label)):
        found.append(widget.value)
    for child in getattr(widget, "children", ()):
        found += html_values(child)
    return found


def start_upload(s3, key: str, parts: list[bytes] = ()) -> str:
    upload_id = s3.create_multipart_upload(Bucket=BUCKET, Key=key)["UploadId"]
    for number, body in enumerate(parts, start=1):
        s3.upload_part(Bucket=BUCKET, Key=key, UploadId=upload_id, PartNumber=number, Body=body)
    return upload_id


def pending_ids(s3, prefix: str) -> set[str]:
    return {u["UploadId"] for u in pending_uploads(s3, prefix)}


def table(days: list[str], rows_per_day: int = 10) -> pa.Table:
    ids = list(range(len(days) * rows_per_day))
    return pa.table({"id": ids, "day": [days[i % len(days)] for i in ids]})


# -- CommitProgress -----------------------------------------------------------------------------
def test_commit_progress_after_a_real_spark_commit(spark, dest):
    panel = CommitProgress()
    result = write_committed(spark.range(0, 400, numPartitions=4), dest.url, progress=panel)
    state = panel.state
    assert state["phase"] == "done" and state["failed_in"] is None
    assert (state["tasks_done"], state["tasks_total"], state["tasks_running"]) == (4, 4, 0)
    assert (state["files"], state["bytes"], state["rows"]) == (4, result.bytes, 400)
    assert state["elapsed_s"] == result.duration_s  # one duration: the _SUCCESS phases'
    assert (panel.bar.value, panel.bar.max, panel.bar.bar_style) == (4, 4, "success")
    assert "4 / 4 tasks" in panel.tasks.value
    assert "Committed 4 file(s), 400 rows" in panel.message.value
    assert "✔ done" in panel.steps.value and "✖" not in panel.steps.value
    assert panel.text().startswith("s3commit write: done in ")
    assert "committed 4 file(s), 400 rows" in panel.text()


def test_commit_progress_shows_the_error_and_what_a_listing_found(spark, dest):
    from pyspark.sql import functions as F

    panel = CommitProgress()
    df = spark.range(0, 10, numPartitions=1).withColumn(
        "x", F.expr("cast(raise_error('bad row <img src=x onerror=alert(1)>') as int)")
    )
    with pytest.raises(TaskFailedError):
        write_committed(df, dest.url, progress=panel)
    assert panel.phase == "failed" and panel.failed_in == "writing"
    assert panel.bar.bar_style == "danger" and not panel.state["interrupted"]
    message = panel.message.value
    assert "Failed during tasks write + commit" in message
    assert "&lt;img src=x onerror=alert(1)&gt;" in message and "<img" not in message
    assert "Fix the cause and run the write again" in message
    assert f"Visible of this job at {dest.url}: nothing." in message
    assert "Checked after the failure: no upload of this job is pending" in message
    assert "✖ tasks write + commit" in panel.steps.value


def test_commit_progress_of_a_conflict_at_job_setup(dest):
    write_committed(table(["a"]), dest.url, committer="directory", progress=False)
    panel = CommitProgress()
    with pytest.raises(ConflictError):
        write_committed(table(["a"]), dest.url, committer="directory", progress=panel)
    assert panel.phase == "failed" and panel.failed_in == "setup"
    assert "Failed during job setup" in panel.message.value
    assert "already holds data" in panel.message.value  # the error's own words, not a guess
    assert f"Visible of this job at {dest.url}: nothing." in panel.message.value  # its field
    assert "What to do" not in panel.message.value


def interrupted_reader(rows_before: int, schema: pa.Schema):
    """Batches of data until ``rows_before`` rows were read, then Ctrl-C (as the input's
    reader would see it, in the middle of a task)."""

    def batches():
        sent = 0
        while sent < rows_before:
            yield pa.record_batch({"id": list(range(sent, sent + 1000))}, schema=schema)
            sent += 1000
        raise KeyboardInterrupt

    return pa.RecordBatchReader.from_batches(schema, batches())


def test_commit_progress_of_an_interrupt_while_tasks_write(dest, s3):
    """Ctrl-C in the write phase: reported as an interrupt, with what the SDK did and what a
    listing after it found (nothing pending, nothing locked)."""
    panel = CommitProgress()
    schema = pa.schema([("id", pa.int64())])
    with pytest.raises(KeyboardInterrupt) as info:
        write_committed(interrupted_reader(5000, schema), dest.url, progress=panel)
    assert any(
        "was interrupted before its commit and was aborted" in n for n in info.value.__notes__
    )
    state = panel.state
    assert state["phase"] == "failed" and state["interrupted"] and state["failed_in"] == "writing"
    assert state["rows"] == 5000  # what the task had written when it was stopped
    assert panel.bar.bar_style == "warning"
    html = panel.message.value
    assert "Interrupted during tasks write + commit." in html
    assert "Failed" not in html and "TaskFailedError" not in html
    assert "was aborted: nothing of it is visible" in html
    assert "Checked after the failure: no upload of this job is pending" in html
    assert "■ tasks write + commit" in panel.steps.value
    assert "INTERRUPTED" in panel.text()
    assert pending_uploads(s3, dest.dir) == []


def test_commit_progress_names_the_command_for_what_is_left(proxy, s3, dest):
    """The abort after an interrupt fails (the store refuses every abort): the panel says how
    many of the job's uploads a listing still finds, and the command that removes them."""
    from s3commit_sdk.testing.faultproxy import internal_error

    proxy.set_rules([internal_error("AbortMultipartUpload")])
    panel = CommitProgress()
    schema = pa.schema([("id", pa.int64())])
    options = {"endpoint": proxy.endpoint, "retry.max-attempts": 1, "multipart.size": "5M"}
    with pytest.raises(KeyboardInterrupt):
        write_committed(
            interrupted_reader(3000, schema),
            dest.url,
            committer="magic",
            options=options,
            progress=panel,
        )
    failure = panel.last_event.failure
    job = failure.job_id
    left = [u for u in pending_uploads(s3, dest.dir) if job in u["Key"]]
    assert failure.interrupted and failure.pending_uploads == len(left) >= 1
    assert failure.locked is False
    html = panel.message.value
    assert "aborting it failed" in html
    assert f"<code>s3commit uploads abort {dest.url} --job {job}</code>" in html
    proxy.reset()
    for upload in left:
        s3.abort_multipart_upload(Bucket=BUCKET, Key=upload["Key"], UploadId=upload["UploadId"])


def test_commit_progress_of_a_job_left_locked():
    """A failure whose listing found the destination locked by the job names recover/abort."""
    from s3commit_sdk.progress import Failure

    url, job = "s3://bucket/tables/t", JOB_A
    failure = Failure(
        interrupted=True,
        error="KeyboardInterrupt",
        reason="interrupted",
        destination=url,
        job_id=job,
        notes=("job ... was interrupted after every file was completed",),
        pending_uploads=0,
        hidden_files=3,
        locked=True,
    )
    panel = CommitProgress()
    panel(ProgressEvent("writing", tasks_done=2, tasks_total=2))
    panel(ProgressEvent("job commit", tasks_done=2, tasks_total=2))
    panel(ProgressEvent("failed", tasks_done=2, tasks_total=2, failure=failure))
    assert panel.failed_in == "job commit"
    html = panel.message.value
    assert "Interrupted during job commit." in html
    assert f"<code>s3commit recover {url}</code>" in html
    assert f"<code>s3commit abort {url}</code>" in html
    assert "hidden metadata" not in html  # recover / abort deal with those too


# -- SuccessReport ------------------------------------------------------------------------------
@pytest.mark.filterwarnings("ignore:the classic file committer on S3:UserWarning")
@pytest.mark.parametrize("committer", ["directory", "partitioned", "magic", "manifest", "file"])
def test_success_report_of_every_committer(committer, dest, tmp_path):
    # manifest renames files: a file:// destination; file (classic) on S3 copies and deletes
    url = f"file://{tmp_path}/out" if committer == "manifest" else dest.url
    result = write_committed(
        table(["2026-11-20", "2026-11-21", "2026-11-22"]),
        url,
        committer=committer,
        partition_by=["day"],
        options={"tasks": 2},
        progress=False,
    )
    from_path, from_result = SuccessReport(url), SuccessReport(result)
    if committer == "file":  # Hadoop's 0-byte _SUCCESS: the path says so, the result has data
        assert from_path.classic and from_path.doc is None
        assert "0-byte marker of the classic FileOutputCommitter" in from_path.html
        assert from_path.summary["committer"] == "classic (FileOutputCommitter)"
        assert from_result.classic and from_result.success_file == "empty"
        assert "0-byte marker" in from_result.html and "WriteResult in memory" in from_result.html
        reports = [from_result]
    else:
        assert from_path.success_file == from_result.success_file == "json"
        reports = [from_path, from_result]
    for report in reports:
        summary = report.summary
        assert summary["committer"] == committer and summary["job"] == result.job_id
        assert (summary["rows"], summary["bytes"], summary["files"]) == (30, result.bytes, 6)
        assert summary["durations"] and all(v >= 0 for v in summary["durations"].values())
        assert [p["partition"] for p in report.partitions] == [
            "day=2026-11-20",
            "day=2026-11-21",
            "day=2026-11-22",
        ]
        assert sum(p["rows"] for p in report.partitions) == 30
        assert sum(p["bytes"] for p in report.partitions) == result.bytes
        for f in result.files:
            assert f.key in report.html
        # phases, bytes per partition, and the distribution of task durations
        assert report.html.count("<svg") == 3 and "task durations (2 tasks)" in report.html
        assert "bytes per partition" in report.html and "duration per phase" in report.html
        tasks = {f["task"] for f in result.success["files"]}
        assert set(report.task_durations) == tasks == set(result.success["taskDurations"])
        assert "records no task durations" not in report.html
        assert committer in report.text()


def test_success_report_charts_task_durations_when_recorded(dest):
    result = write_committed(table(["a", "b"]), dest.url, options={"tasks": 2}, progress=False)
    doc = {**result.success, "taskDurations": {"task_00000": 1.5, "task_00001": 4.0}}
    report = SuccessReport(doc)
    assert report.task_durations == {"task_00000": 1.5, "task_00001": 4.0}
    assert "task durations (2 tasks)" in report.html
    assert "records no task durations" not in report.html


def test_success_report_says_when_success_is_the_classic_empty_file(s3, dest):
    s3.put_object(Bucket=BUCKET, Key=dest.dir + "_SUCCESS", Body=b"")
    report = SuccessReport(dest.url)
    assert report.classic and report.summary["committer"] == "classic (FileOutputCommitter)"
    assert "0-byte marker of the classic FileOutputCommitter" in report.html
    assert "<table" not in report.html
    assert "0-byte" in report.text()


def test_success_report_escapes_partition_values(dest):
    evil = "<script>alert(1)</script>"
    result = write_committed(
        pa.table({"id": [1, 2], "tag": [evil, "plain"]}),
        dest.url,
        partition_by=["tag"],
        progress=False,
    )
    report = SuccessReport(dest.url)
    assert any("<script>" in f.key for f in result.files)  # the value reached the keys
    assert "<script" not in report.html
    assert "&lt;script&gt;alert(1)&lt;" in report.html


def test_success_report_rejects_other_input():
    with pytest.raises(TypeError, match="WriteResult"):
        SuccessReport(42)


TASK_SECONDS = {"task_00000": 1.2, "task_00001": 1.9, "task_00002": 1.5, "task_00003": 1.4}


def chart_bars(html: str, title: str) -> list[tuple[str, str]]:
    """(label, value) of each bar of the chart titled ``title``, top to bottom."""
    chart = re.search(rf'<svg [^>]*aria-label="{re.escape(title)}".*?</svg>', html).group(0)
    return re.findall(r"<title>(.*?): (.*?)</title>", chart)


@pytest.fixture
def nested_report(dest) -> SuccessReport:
    """The report of a real job's document with the phases and task times above."""
    result = write_committed(table(["a", "b"]), dest.url, options={"tasks": 2}, progress=False)
    doc = {**result.success, "durations": NESTED_PHASES, "taskDurations": TASK_SECONDS}
    return SuccessReport(doc)


def test_success_report_draws_each_phase_above_its_parts(nested_report):
    """Tasks holds writing and task commit, job commit its stages: a part is drawn under its
    phase and marked, and the parts of a phase add up to it (the rest of job commit is its
    "other steps"), so no bar reads as time added to the job."""
    assert chart_bars(nested_report.html, "duration per phase") == [
        ("job_setup", "100 ms"),
        ("tasks", "12.0 s"),
        ("└ task_write", "9.0 s"),
        ("└ task_commit", "3.0 s"),
        ("job_commit", "500 ms"),
        ("└ conflict_resolution", "50 ms"),
        ("└ complete_uploads", "200 ms"),
        ("└ cleanup", "50 ms"),
        ("└ other steps", "200 ms"),
    ]
    text = unescape(nested_report.html)
    assert "The job's duration (12.6 s) is job_setup + tasks + job_commit" in text
    assert "the parts of a phase add up to it" in text


def test_success_report_says_what_a_task_duration_is(nested_report):
    """1.2 s to 1.9 s per task beside a 12 s tasks phase: the report says the first is each
    task's own time and the second the wall time of all of them, with the totals of both."""
    histogram = chart_bars(nested_report.html, "task durations (4 tasks)")
    assert sum(int(tasks.split()[0]) for _, tasks in histogram) == 4
    text = unescape(nested_report.html)
    assert "Task durations are each task's own time, from its first row to its task commit" in text
    assert "the tasks phase is the wall time of all of them" in text
    assert "Here: 4 tasks, 6.0 s in all; the tasks phase: 12.0 s." in text


def test_success_report_of_a_resumed_commit_shows_no_task_durations(dest):
    """``s3commit recover`` records 0 s for the tasks it did not see run: no histogram of
    zeros, the bytes per task instead."""
    result = write_committed(table(["a", "b"]), dest.url, options={"tasks": 2}, progress=False)
    zeros = dict.fromkeys(result.success["taskDurations"], 0.0)
    report = SuccessReport({**result.success, "taskDurations": zeros})
    assert report.task_durations is None
    assert "records no task durations" in report.html and "bytes per task" in report.html


def test_success_report_of_a_delta_replace_says_what_was_replaced(dest):
    """A Delta replace deletes no object: its transaction removes the files from the table.
    The report says that once, not "replaced objects 0" beside "1 files removed"."""
    kwargs = {"format": "delta", "partition_by": ["day"], "options": {"tasks": 1}}
    write_committed(table(["a", "b"]), dest.url, progress=False, **kwargs)
    result = write_committed(
        table(["a"]), dest.url, conflict_mode="replace", progress=False, **kwargs
    )
    assert result.success["replacedObjects"] == 0 and result.success["deltaRemovedFiles"] == 1
    report = SuccessReport(result)
    table_html = re.search(r'<table class="s3commit-summary".*?</table>', report.html).group(0)
    summary = dict(re.findall(r"<tr><td [^>]*>(.*?)</td><td [^>]*>(.*?)</td></tr>", table_html))
    by = "the Delta transaction of version 1"
    assert summary["replaced"] == f"1 files (removed from the table by {by}; no object deleted)"
    assert "replaced objects" not in report.html
    assert summary["Delta table version"] == "1 (1 files removed)"
    assert report.summary["delta_removed_files"] == 1


# -- PendingUploads -----------------------------------------------------------------------------
@pytest.fixture
def leftovers(s3, dest):
    """Uploads of two dead jobs and one with a hostile key, plus one in a sibling directory."""
    keys = {
        "a1": f"{dest.dir}day=1/part-00000-{JOB_A}.c000.snappy.parquet",
        "a2": f"{dest.dir}day=2/part-00001-{JOB_A}.c000.snappy.parquet",
        "b": f"{dest.dir}part-00000-{JOB_B}-c000.snappy.parquet",
        "evil": f"{dest.dir}{SCRIPT_KEY}",
    }
    ids = {
        "a1": start_upload(s3, keys["a1"], [b"x" * (5 * MIB), b"y" * 1000]),
        "a2": start_upload(s3, keys["a2"], [b"z" * 2000]),
        "b": start_upload(s3, keys["b"]),
        "evil": start_upload(s3, keys["evil"], [b"e" * 10]),
    }
    sibling_key = f"{dest.prefix}0/part-00000-{JOB_A}.c000.snappy.parquet"
    sibling = start_upload(s3, sibling_key)
    # RGW stamps each upload to the millisecond, moto to the second: take a1's own time
    initiated = next(
        u["Initiated"] for u in pending_uploads(s3, dest.dir) if u["Key"] == keys["a1"]
    )
    yield keys, ids, initiated
    s3.abort_multipart_upload(Bucket=BUCKET, Key=sibling_key, UploadId=sibling)
    for upload in pending_uploads(s3, dest.dir):
        s3.abort_multipart_upload(Bucket=BUCKET, Key=upload["Key"], UploadId=upload["UploadId"])


def test_pending_uploads_lists_parts_bytes_and_jobs(leftovers, dest):
    keys, ids, initiated = leftovers
    view = PendingUploads(dest.url, now=initiated + timedelta(hours=3))
    rows = {r.key: r for r in view.uploads}
    assert set(rows) == set(keys.values())  # never the sibling dest + "0/"
    a1 = rows[keys["a1"]]
    assert (a1.job, a1.parts, a1.bytes, a1.upload_id) == (JOB_A, 2, 5 * MIB + 1000, ids["a1"])
    assert (rows[keys["b"]].job, rows[keys["b"]].parts, rows[keys["b"]].bytes) == (JOB_B, 0, 0)
    assert rows[keys["evil"]].job is None
    assert a1.age == timedelta(hours=3)
    assert view.billed_bytes == 5 * MIB + 1000 + 2000 + 10
    assert "5.0 MiB" in view.summary.value and "<b>4</b> pending upload(s)" in view.summary.value
    job_options = [value for _, value in view.job.options]
    assert job_options == ["", JOB_A, JOB_B]


def test_pending_uploads_filters(leftovers, dest):
    keys, _, initiated = leftovers
    view = PendingUploads(dest.url, now=initiated + timedelta(hours=3))
    view.set_filters(job=JOB_A)
    assert sorted(r.key for r in view.shown) == sorted([keys["a1"], keys["a2"]])
    view.set_filters(older_than="2h")
    assert len(view.shown) == 4
    view.set_filters(older_than="4h")
    assert view.shown == [] and view.billed_bytes == 0
    view.older_than.value = "1d2x"  # typed in the box: shown as an error, not raised
    assert "cannot read the duration" in view.status.value
    with pytest.raises(InvalidArgumentError):
        view.set_filters(older_than="soon")
    with pytest.raises(InvalidArgumentError):
        view.set_filters(job="not-a-uuid")
    filtered = PendingUploads(
        dest.url, now=initiated + timedelta(hours=3), older_than=timedelta(hours=1), job=JOB_B
    )
    assert [r.key for r in filtered.shown] == [keys["b"]]


def test_abort_selected_aborts_through_the_endpoint(leftovers, dest, s3):
    keys, ids, _ = leftovers
    view = PendingUploads(dest.url)
    chosen = view.select([keys["a1"], ids["b"]])  # a key and an upload id
    assert sorted(r.upload_id for r in chosen) == sorted([ids["a1"], ids["b"]])
    assert not view.abort_button.disabled
    results = view.abort_selected()
    assert sorted((r.upload_id, done) for r, done in results) == sorted(
        [(ids["a1"], True), (ids["b"], True)]
    )
    assert pending_ids(s3, dest.dir) == {ids["a2"], ids["evil"]}
    assert sorted(r.upload_id for r in view.uploads) == sorted([ids["a2"], ids["evil"]])
    assert view.selected == [] and view.abort_button.disabled
    assert "aborted 2 upload(s)" in view.status.value
    with pytest.raises(InvalidArgumentError, match="no pending upload"):
        view.select([keys["a1"]])  # gone now: a stale key is an error, not a no-op


def test_abort_button_asks_for_confirmation(leftovers, dest, s3):
    _, ids, _ = leftovers
    view = PendingUploads(dest.url)
    view.set_filters(job=JOB_A)
    view.select_all.value = True
    assert sorted(r.upload_id for r in view.selected) == sorted([ids["a1"], ids["a2"]])
    view.abort_button.click()
    assert view.confirm_box.layout.display == "flex"
    assert "Abort 2 upload(s)" in view.confirm_text.value
    assert len(pending_ids(s3, dest.dir)) == 4  # nothing aborted before confirmation
    view.cancel_button.click()
    assert view.confirm_box.layout.display == "none"
    assert len(pending_ids(s3, dest.dir)) == 4
    view.abort_button.click()
    view.confirm_button.click()
    assert pending_ids(s3, dest.dir) == {ids["b"], ids["evil"]}
    assert view.confirm_box.layout.display == "none"
    # a row's checkbox selects it: the table's first column
    view.set_filters()
    boxes = [w for w in view.table.children if isinstance(w, widgets.Checkbox)]
    assert len(boxes) == 2
    boxes[0].value = True
    assert len(view.selected) == 1 and "<b>1</b> selected" in view.summary.value


def test_pending_uploads_escape_every_text_from_s3(leftovers, dest):
    keys, _, _ = leftovers
    view = PendingUploads(dest.url)
    rendered = "".join(html_values(view.widget))
    assert "&lt;script&gt;alert(&#x27;pwned&#x27;)&lt;/script&gt;&amp;&lt;img" in rendered
    assert not re.search(r"<(script|img)", rendered)
    view.select([keys["evil"]])
    view.abort_button.click()
    assert "<script" not in view.confirm_text.value
    view.cancel_button.click()
    assert SCRIPT_KEY in view.text()  # plain text output keeps the key as it is


def test_pending_uploads_refresh_sees_new_uploads(dest, s3):
    view = PendingUploads(dest.url)
    assert view.uploads == [] and view.abort_button.disabled
    key = f"{dest.dir}part-00000-{JOB_A}.c000.parquet"
    upload_id = start_upload(s3, key, [b"p" * 100])
    try:
        view.refresh_button.click()
        assert [(r.key, r.parts, r.bytes) for r in view.uploads] == [(key, 1, 100)]
    finally:
        s3.abort_multipart_upload(Bucket=BUCKET, Key=key, UploadId=upload_id)
    view.refresh()
    assert view.uploads == []


def test_widgets_display_as_ipywidgets_with_a_text_fallback(dest):
    write_committed(pd.DataFrame({"id": [1]}), dest.url, progress=False)
    for obj in (CommitProgress(), PendingUploads(dest.url), SuccessReport(dest.url)):
        bundle = obj._repr_mimebundle_()
        assert "application/vnd.jupyter.widget-view+json" in bundle
        assert bundle["text/plain"] == obj.text()
        obj.close()


def test_a_write_result_is_plain_text_outside_a_kernel(dest):
    """In a notebook `result` draws the SuccessReport (tests/test_notebooks_papermill.py);
    a terminal gets the one-line repr, with no widget machinery."""
    code = (
        "import sys, pandas as pd\n"
        "from s3commit_sdk import write_committed\n"
        f"result = write_committed(pd.DataFrame({{'id': [1]}}), {dest.url!r}, progress=False)\n"
        "bundle = result._repr_mimebundle_()\n"
        "print(sorted(bundle), bundle['text/plain'] == repr(result), 'ipywidgets' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["['text/plain']", "True", "False"]
