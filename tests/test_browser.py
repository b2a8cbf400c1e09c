"""The widgets in a real browser: Voila on 127.0.0.1, Debian's chromium driven by Playwright.

The page runs a small notebook: a committed write (its live ``CommitProgress`` panel, then a
second write that fails), ``PendingUploads`` over two leftover uploads (one with a hostile
key), and the ``SuccessReport`` of the first write. The test ticks one upload, clicks "Abort
selected", confirms, and checks through boto3 that exactly that upload is gone. Screenshots of
the three widgets go to ``docs/`` (the Jupyter guide, docs/guides/jupyter-papermill.md, shows them).

Chromium comes from apt (``apt-get install -y chromium``; ``make setup`` installs it), never from
``playwright install``. Set ``S3COMMIT_SKIP_BROWSER=1`` to skip on a machine without it.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import boto3
import nbformat
import pytest
from conftest import BUCKET, pending_uploads

from s3commit_sdk.testing.sandbox import free_port, wait_until_answers

pytestmark = pytest.mark.browser

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
DOCS = Path(__file__).parents[1] / "docs"
JOB = "5f0c2a8e-3b1d-4c6e-9a7f-0123456789ab"
HOSTILE = '<img src=x onerror="window.__xss=1">.parquet'

if os.environ.get("S3COMMIT_SKIP_BROWSER") == "1":
    pytest.skip("S3COMMIT_SKIP_BROWSER=1", allow_module_level=True)


def page_notebook(committed: str, leftovers: str, now: str) -> nbformat.NotebookNode:
    cells = [
        f"""
import datetime as dt

import ipywidgets as widgets
import pandas as pd
from IPython.display import display

from s3commit_sdk import ConflictError, write_committed
from s3commit_sdk.widgets import PendingUploads, SuccessReport

COMMITTED, LEFTOVERS = {committed!r}, {leftovers!r}
days = ["2026-11-20", "2026-11-21", "2026-11-22"]
data = pd.DataFrame({{"id": range(3000), "amount": [i * 0.5 for i in range(3000)],
                      "day": [days[i % 3] for i in range(3000)]}})
""",
        """
display(widgets.HTML("<h3>CommitProgress</h3>"))
result = write_committed(data, COMMITTED, partition_by=["day"], options={"tasks": 4})
try:  # the same destination again with committer=directory and mode fail: a conflict
    write_committed(data, COMMITTED, committer="directory")
except ConflictError:
    pass
""",
        f"""
display(widgets.HTML("<h3>PendingUploads</h3>"))
pending = PendingUploads(LEFTOVERS, now=dt.datetime.fromisoformat({now!r}))
display(pending)
""",
        """
display(widgets.HTML("<h3>SuccessReport</h3>"))
display(SuccessReport(COMMITTED))
""",
    ]
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c.strip()) for c in cells]
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    return nb


def children_of(pid: int) -> list[int]:
    """PIDs whose parent is ``pid`` (the Voila kernel runs in its own session)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                stat = (entry / "stat").read_text()
                if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(entry.name))
    return found


def started(what: str, url: str, process: subprocess.Popen, timeout_s: float, log: Path) -> None:
    """Wait for a server of the test to answer; if it never does, fail with its log."""
    try:
        wait_until_answers(url, process, timeout_s, what)
    except RuntimeError as exc:
        pytest.fail(f"{exc}\n{log.read_text()}")


def stop(process: subprocess.Popen, log) -> None:
    """Stop Voila (its process group) and the kernels it started, by PID."""
    kernels = children_of(process.pid)
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    for pid in kernels:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    log.close()


@pytest.fixture
def voila(tmp_path, s3, dest):
    """Voila serving the page notebook on a free loopback port; yields (url, leftovers)."""
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: apt-get install -y chromium (as `make setup` does)")
    leftovers = {
        "job": s3.create_multipart_upload(
            Bucket=BUCKET, Key=f"{dest.dir}leftovers/day=2026-11-20/part-00002-{JOB}.c000.parquet"
        )["UploadId"],
        "hostile": s3.create_multipart_upload(Bucket=BUCKET, Key=f"{dest.dir}leftovers/{HOSTILE}")[
            "UploadId"
        ],
    }
    key = f"{dest.dir}leftovers/day=2026-11-20/part-00002-{JOB}.c000.parquet"
    s3.upload_part(
        Bucket=BUCKET, Key=key, UploadId=leftovers["job"], PartNumber=1, Body=b"x" * 300_000
    )
    initiated = pending_uploads(s3, dest.dir)[0]["Initiated"]
    now = (initiated.replace(microsecond=0) + timedelta(hours=30)).isoformat()
    notebook = tmp_path / "widgets.ipynb"
    nbformat.write(page_notebook(f"{dest.url}/committed", f"{dest.url}/leftovers", now), notebook)
    port = free_port()
    log = open(tmp_path / "voila.log", "w")  # noqa: SIM115 (closed by stop())
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "voila",
            str(notebook),
            "--no-browser",
            "--Voila.ip=127.0.0.1",
            f"--port={port}",
            "--VoilaConfiguration.show_tracebacks=True",
        ],
        cwd=tmp_path,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        url = f"http://127.0.0.1:{port}/"
        started("Voila", url + "voila/static/", process, 60, tmp_path / "voila.log")
        yield url, leftovers, key
    finally:
        stop(process, log)
        for upload in pending_uploads(s3, dest.dir):
            s3.abort_multipart_upload(Bucket=BUCKET, Key=upload["Key"], UploadId=upload["UploadId"])


def screenshot(page, locator, path: Path, pad: int = 8) -> None:
    """A PNG of everything the locator matches (one box around all of them).

    JupyterLab may open its kernel dialog over the notebook while a cell runs; it is
    cancelled first (Escape keeps the running kernel), so that the picture shows the widget.
    """
    dialogs = page.locator(".jp-Dialog")
    for _ in range(3):
        if not dialogs.count():
            break
        page.keyboard.press("Escape")
        page.wait_for_timeout(300)
    assert not dialogs.count(), "a JupyterLab dialog stays over the notebook"
    locator.first.scroll_into_view_if_needed()
    boxes = [locator.nth(i).bounding_box() for i in range(locator.count())]
    left = min(b["x"] for b in boxes) - pad
    top = min(b["y"] for b in boxes) - pad
    right = max(b["x"] + b["width"] for b in boxes) + pad
    bottom = max(b["y"] + b["height"] for b in boxes) + pad
    clip = {"x": max(left, 0), "y": max(top, 0), "width": right - left, "height": bottom - top}
    page.screenshot(path=str(path), clip=clip)


@pytest.mark.timeout(300)
def test_pending_uploads_abort_in_a_real_browser(voila, s3, dest, tmp_path):
    from playwright.sync_api import expect, sync_playwright

    url, leftovers, _ = voila
    DOCS.mkdir(exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1400})
            page.goto(url, wait_until="domcontentloaded", timeout=120_000)
            report = page.locator(".s3commit-success-report")
            try:
                report.wait_for(timeout=120_000)
            except Exception:
                page.screenshot(path=str(tmp_path / "failure.png"), full_page=True)
                raise AssertionError(
                    (tmp_path / "voila.log").read_text()[-3000:] + page.inner_text("body")[-3000:]
                ) from None

            # CommitProgress: the write's panel ended in its summary, the conflict in advice
            panels = page.locator(".s3commit-progress")
            expect(panels).to_have_count(2)
            expect(panels.nth(0)).to_contain_text("Committed 12 file(s)")
            expect(panels.nth(0)).to_contain_text("4 / 4 tasks")
            expect(panels.nth(1)).to_contain_text("Failed during job setup")
            expect(panels.nth(1)).to_contain_text("already holds data")  # the error's own text
            expect(panels.nth(1)).to_contain_text("Checked after the failure: no upload")
            screenshot(page, panels, DOCS / "widget-commit-progress.png")

            # PendingUploads: the hostile key is text, not markup
            table = page.locator(".s3commit-pending-uploads")
            expect(table).to_contain_text(HOSTILE)
            expect(table).to_contain_text(JOB)
            assert page.evaluate("window.__xss") is None
            expect(table.locator(".s3commit-uploads-summary")).to_contain_text(
                "2 pending upload(s) shown"
            )
            key_cell = table.locator(".s3commit-uploads-table > .widget-html", has_text=JOB)
            key_cell.locator("xpath=preceding-sibling::*[1]").locator("input").check()
            expect(table.locator(".s3commit-uploads-summary")).to_contain_text("1 selected")
            table.locator("button.s3commit-abort").click()
            confirm = table.locator("button.s3commit-confirm")
            expect(confirm).to_be_visible()
            expect(table).to_contain_text("Abort 1 upload(s)")
            assert len(pending_uploads(s3, dest.dir)) == 2  # nothing before confirmation
            screenshot(page, table, DOCS / "widget-pending-uploads.png")
            confirm.click()
            expect(table.locator(".s3commit-uploads-status")).to_contain_text(
                "aborted 1 upload(s)", timeout=30_000
            )
            expect(table.locator(".s3commit-uploads-summary")).to_contain_text(
                "1 pending upload(s) shown"
            )

            # SuccessReport
            expect(report).to_contain_text("bytes per partition")
            expect(report).to_contain_text("day=2026-11-21")
            report.screenshot(path=str(DOCS / "widget-success-report.png"))
        finally:
            browser.close()

    remaining = {u["UploadId"] for u in pending_uploads(s3, dest.dir)}
    assert leftovers["job"] not in remaining  # aborted through the browser
    assert remaining == {leftovers["hostile"]}
    for name in ("commit-progress", "pending-uploads", "success-report"):
        assert (DOCS / f"widget-{name}.png").stat().st_size > 5_000


# -- JupyterLab: progress inside one task, and Kernel > Interrupt -------------------------------
LAB_ROWS = 10_000_000
LAB_CELLS = [
    """
import time

import numpy as np
import pyarrow as pa
from pyspark.sql import functions as F

from s3commit_sdk import write_committed
from s3commit_sdk.testing.sandbox import S3Sandbox, local_spark
sandbox = S3Sandbox(bucket="lab").start()
spark = local_spark("local[2]", app_name="lab")
spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "500")
rng = np.random.default_rng(7)
big = pa.table({
    "id": np.arange(ROWS),
    "amount": rng.random(ROWS),
    "user": pa.array(np.char.add("user-", rng.integers(0, 10**9, ROWS).astype(str))),
})
print("READY", sandbox.endpoint)
""",
    """
# one large task, in this process: the bar counts rows
one_task = write_committed(big, "s3://lab/one-task", options={"tasks": 1})
""",
    """
# one large Spark task, slowed by a Python UDF; the test interrupts it
@F.udf("long")
def slow(x):
    time.sleep(0.0002)
    return x

spark_df = spark.range(0, 2_000_000, numPartitions=1).withColumn("y", slow("id"))
write_committed(spark_df, "s3://lab/spark-one-task")
""",
]


def lab_notebook(cells: list[str] | None = None) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    sources = [c.replace("ROWS", str(LAB_ROWS)) for c in cells or LAB_CELLS]
    nb.cells = [nbformat.v4.new_code_cell(c.strip()) for c in sources]
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    return nb


@contextlib.contextmanager
def lab_serving(tmp_path: Path, notebook: nbformat.NotebookNode) -> Iterator[str]:
    """JupyterLab on a free loopback port serving ``notebook`` as ``lab.ipynb``; its URL with
    the token."""
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: apt-get install -y chromium (as `make setup` does)")
    nbformat.write(notebook, tmp_path / "lab.ipynb")
    port, token = free_port(), "s3commit-test"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(JUPYTER_CONFIG_DIR=str(tmp_path / "config"), S3COMMIT_PROGRESS="")
    env.pop("S3COMMIT_TRACEBACK", None)
    settings = tmp_path / "settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)  # no "get notified about news?" toast over the screenshots
    (settings / "notification.jupyterlab-settings").write_text('{"fetchNews": "false"}')
    tracker = tmp_path / "settings" / "@jupyterlab" / "notebook-extension"
    tracker.mkdir(parents=True)  # the notebook's own kernel, without the "Select Kernel" dialog
    (tracker / "tracker.jupyterlab-settings").write_text('{"autoStartDefaultKernel": true}')
    log = open(tmp_path / "lab.log", "w")  # noqa: SIM115 (closed by stop())
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jupyterlab",
            "--ip=127.0.0.1",
            f"--port={port}",
            "--no-browser",
            "--allow-root",
            f"--IdentityProvider.token={token}",
            "--LabApp.expose_app_in_browser=True",
            f"--ServerApp.root_dir={tmp_path}",
            f"--LabApp.workspaces_dir={tmp_path / 'workspaces'}",
            f"--LabApp.user_settings_dir={tmp_path / 'settings'}",
        ],
        cwd=tmp_path,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        started("JupyterLab", f"{base}/api/status?token={token}", process, 90, tmp_path / "lab.log")
        yield f"{base}/lab/tree/lab.ipynb?token={token}&reset"
    finally:
        stop(process, log)


@pytest.fixture
def jupyterlab(tmp_path):
    """JupyterLab serving the notebook of one large task and an interrupt."""
    with lab_serving(tmp_path, lab_notebook()) as url:
        yield url


def panel_numbers(panel) -> dict[str, int]:
    """The tasks line and the rows/bytes line of a CommitProgress panel, as numbers."""
    text = panel.inner_text()
    tasks = re.search(r"(\d+) / (\d+|\?) tasks(?:, (\d+) running)?", text)
    rows = re.search(r"rows ([\d,]+)", text)
    return {
        "done": int(tasks[1]),
        "running": int(tasks[3] or 0),
        "rows": int(rows[1].replace(",", "")) if rows else 0,
    }


def bar_fraction(panel) -> float:
    return panel.locator(".widget-hprogress .progress-bar").evaluate(
        "bar => bar.getBoundingClientRect().width / bar.parentElement.getBoundingClientRect().width"
    )


def run_command(page, command: str) -> None:
    """Start a JupyterLab command without waiting for it (run-all resolves when cells end)."""
    page.evaluate("command => { window.jupyterapp.commands.execute(command); }", command)


KERNEL_LISTENS = """() => {
    const context = window.jupyterapp.shell.currentWidget?.sessionContext;
    const kernel = context?.session?.kernel;
    return kernel?.connectionStatus === "connected" && kernel.status === "idle";
}"""


def run_all_in_lab(page, url: str):
    """Open the lab's notebook at ``url``, wait for its kernel, run all; its code cells."""
    page.goto(url, wait_until="domcontentloaded", timeout=120_000)
    page.locator(".jp-Notebook-ExecutionIndicator[data-status=idle]").wait_for(timeout=120_000)
    cells = page.locator(".jp-Notebook .jp-CodeCell")
    run_all_when_the_kernel_listens(page, cells)
    return cells


def run_all_when_the_kernel_listens(page, cells) -> None:
    """Run all cells once the notebook's kernel is connected and idle.

    A run-all issued before that leaves the cells it reaches without a kernel unexecuted
    (JupyterLab clears them), so it is issued again until every cell is queued or ran.
    """
    page.wait_for_function(KERNEL_LISTENS, timeout=120_000)
    prompts = cells.locator(".jp-InputPrompt")
    for _ in range(6):
        run_command(page, "notebook:run-all-cells")
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if all(re.search(r"\[(\*|\d+)\]", text) for text in prompts.all_inner_texts()):
                return
            page.wait_for_timeout(500)
    raise AssertionError(f"the kernel never queued every cell: {prompts.all_inner_texts()}")


def rows_change(page, panel, rows: int, seconds: float, every_ms: int) -> dict:
    """The panel's numbers once its row count is no longer ``rows``."""
    deadline = time.monotonic() + seconds
    while (numbers := panel_numbers(panel))["rows"] == rows:
        assert time.monotonic() < deadline, panel.inner_text()
        page.wait_for_timeout(every_ms)
    return numbers


@pytest.mark.timeout(600)
def test_progress_inside_one_task_and_an_interrupt_in_jupyterlab(jupyterlab, tmp_path):
    """Run-all in a real JupyterLab: a single large task moves the bar (in-process engine) and
    the counters (Spark); Kernel > Interrupt during the Spark task ends as an interrupt, with
    what a listing found left, and the sandbox's S3 server survives it."""
    from playwright.sync_api import expect, sync_playwright

    DOCS.mkdir(exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        try:
            page = browser.new_page(viewport={"width": 1300, "height": 1100})
            cells = run_all_in_lab(page, jupyterlab)
            ready = cells.nth(0).locator(".jp-OutputArea-output", has_text="READY http")
            expect(ready).to_have_count(1, timeout=180_000)
            endpoint = re.search(r"READY (\S+)", ready.inner_text())[1]

            # one large in-process task: the bar moves while "0 / 1 tasks, 1 running"
            panel = cells.nth(1).locator(".s3commit-progress")
            expect(panel).to_contain_text("1 running", timeout=120_000)
            first, first_bar = panel_numbers(panel), bar_fraction(panel)
            screenshot(page, panel, DOCS / "progress-one-task-1.png")
            # the next change the panel shows (sampled often: a fast machine ends the task in
            # a few seconds) must still be inside the task
            second = rows_change(page, panel, first["rows"], seconds=60, every_ms=250)
            second_bar = bar_fraction(panel)
            screenshot(page, panel, DOCS / "progress-one-task-2.png")
            assert first["done"] == second["done"] == 0, (first, second)
            assert 0 < first["rows"] < second["rows"] < LAB_ROWS
            assert 0 < first_bar < second_bar < 1
            expect(panel).to_contain_text("Committed 1 file(s)", timeout=120_000)

            # one large Spark task: rows grow while it runs; then Kernel > Interrupt
            panel = cells.nth(2).locator(".s3commit-progress")
            expect(panel).to_contain_text("1 running", timeout=180_000)
            before = rows_change(page, panel, 0, seconds=120, every_ms=500)
            after = rows_change(page, panel, before["rows"], seconds=120, every_ms=500)
            assert before["done"] == after["done"] == 0 and after["rows"] > before["rows"]
            screenshot(page, panel, DOCS / "progress-spark-one-task.png")
            run_command(page, "notebook:interrupt-kernel")
            expect(panel).to_contain_text(
                "Interrupted during tasks write + commit", timeout=120_000
            )
            expect(panel).to_contain_text("was aborted: nothing of it is visible")
            expect(panel).to_contain_text("Checked after the failure: no upload of this job")
            assert "progress-bar-warning" in panel.locator(
                ".widget-hprogress .progress-bar"
            ).get_attribute("class")
            screenshot(page, panel, DOCS / "widget-interrupted.png")
            error = cells.nth(2).locator(".jp-OutputArea-output[data-mime-type*='stderr']")
            expect(error.last).to_contain_text("KeyboardInterrupt")
            output = cells.nth(2).inner_text()
            assert "TaskFailedError" not in output and "Answer from Java side" not in output

            # the sandbox's server was not in the interrupted process group: it still answers,
            # and the interrupted job left nothing pending
            s3 = boto3.client(
                "s3",
                endpoint_url=endpoint,
                aws_access_key_id="sandbox",
                aws_secret_access_key="sandbox",
                region_name="us-east-1",
            )
            assert s3.list_multipart_uploads(Bucket="lab").get("Uploads", []) == []
            keys = [o["Key"] for o in s3.list_objects_v2(Bucket="lab").get("Contents", [])]
            assert not [k for k in keys if k.startswith("spark-one-task/")], keys
        except Exception:
            page.screenshot(path=str(tmp_path / "failure.png"), full_page=True)
            raise
        finally:
            browser.close()
    for name in ("progress-one-task-1", "progress-one-task-2", "widget-interrupted"):
        assert (DOCS / f"{name}.png").stat().st_size > 5_000


# -- JupyterLab: a write that fails -------------------------------------------------------------
FAILING_CELLS = [
    """
import pandas as pd

from s3commit_sdk import write_committed
from s3commit_sdk.testing.sandbox import S3Sandbox
sandbox = S3Sandbox(bucket="lab").start()
frame = pd.DataFrame({"id": range(100), "day": ["a", "b"] * 50})
write_committed(frame, "s3://lab/daily", partition_by=["day"], progress=False)
print("READY")
""",
    """
# the same destination again with committer=directory and mode fail: a conflict
write_committed(frame, "s3://lab/daily", committer="directory")
""",
]


@pytest.mark.timeout(300)
def test_a_failed_write_shows_its_panel_and_the_error_without_the_sdks_frames(tmp_path):
    """The cell's output: the panel with what failed and what is left, then the error, whose
    last line is the error itself; none of the SDK's frames (runner.py, api.py, ...)."""
    from playwright.sync_api import expect, sync_playwright

    with (
        lab_serving(tmp_path, lab_notebook(FAILING_CELLS)) as url,
        sync_playwright() as playwright,
    ):
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        try:
            page = browser.new_page(viewport={"width": 1300, "height": 1100})
            cells = run_all_in_lab(page, url)
            failed = cells.nth(1)
            error = failed.locator(".jp-OutputArea-output[data-mime-type*='stderr']")
            expect(error).to_have_count(1, timeout=180_000)
            expect(error).to_contain_text("ConflictError: ")
            panel = failed.locator(".s3commit-progress")
            expect(panel).to_have_count(1)
            expect(panel).to_contain_text("Failed during job setup")
            expect(panel).to_contain_text("Checked after the failure: no upload")
            shown = error.inner_text()
            lines = [line for line in shown.splitlines() if line.strip()]
            assert lines[-1].startswith("ConflictError: "), shown
            assert "s3commit_sdk/runner.py" not in shown and "s3commit_sdk/api.py" not in shown
            assert not re.search(r"s3commit_sdk[/\\]\w", shown), shown
            assert "Cell In[" in shown  # the caller's own frame stays
            screenshot(page, failed.locator(".jp-OutputArea"), tmp_path / "failed-cell.png")
        except Exception:
            page.screenshot(path=str(tmp_path / "failure.png"), full_page=True)
            raise
        finally:
            browser.close()


# -- JupyterLab: StreamMonitor follows a batch committed meanwhile ------------------------------
@pytest.mark.timeout(300)
def test_stream_monitor_shows_a_new_batch_in_jupyterlab(s3_server, dest, tmp_path):
    """The panel of a stream with 2 batches; a 3rd committed by this process appears in the
    page through the monitor's polling thread, with no re-run of the cell."""
    from playwright.sync_api import expect, sync_playwright
    from test_stream_widget import write_batch

    write_batch(dest, 0)
    write_batch(dest, 1)
    cell = f"""
import os
os.environ.update({s3_server.env!r})
from s3commit_sdk.widgets import StreamMonitor
StreamMonitor({dest.url!r}, interval_s=0.5)
"""
    with lab_serving(tmp_path, lab_notebook([cell])) as url, sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        try:
            page = browser.new_page(viewport={"width": 1300, "height": 1100})
            monitor = run_all_in_lab(page, url).nth(0).locator(".s3commit-stream-monitor")
            expect(monitor).to_contain_text("2 (batches 0..1)", timeout=180_000)
            write_batch(dest, 2)
            expect(monitor).to_contain_text("3 (batches 0..2)", timeout=60_000)
            expect(monitor).to_contain_text("refreshing every 0.5 s")
        except Exception:
            page.screenshot(path=str(tmp_path / "failure.png"), full_page=True)
            raise
        finally:
            browser.close()
