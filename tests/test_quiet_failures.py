"""What a notebook cell shows when a write fails or is interrupted: the text block of the
progress log and the error, its own line last; no frame of the SDK, no py4j or JVM output.

A real Jupyter kernel (started by jupyter_client, as papermill and JupyterLab start theirs) runs
the cells; the test reads the messages the kernel sends its front end.
"""

from __future__ import annotations

import os
import queue
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from conftest import pending_uploads

pytestmark = pytest.mark.notebook

ANSI = re.compile(r"\x1b\[[0-9;]*m")
#: a frame of the SDK in a traceback: its file's path
SDK_FRAME = re.compile(r"s3commit_sdk[/\\]\w+")


@dataclass
class Output:
    """What one cell sent: its streams, and its error's name and traceback lines (no colours)."""

    stdout: str = ""
    stderr: str = ""
    ename: str = ""
    traceback: list[str] = field(default_factory=list)

    def last_line(self) -> str:
        return [line for line in self.traceback if line.strip()][-1]


class Kernel:
    """A python3 kernel with the test's S3 endpoint in its environment."""

    def __init__(self, env: dict[str, str], cwd: Path) -> None:
        from jupyter_client.manager import KernelManager

        self.manager = KernelManager(kernel_name="python3")
        self.manager.start_kernel(env=env, cwd=str(cwd))
        self.client = self.manager.client()
        self.client.start_channels()
        self.client.wait_for_ready(timeout=120)

    def start(self, code: str) -> str:
        return self.client.execute(code)

    def outputs(self, msg_id: str, timeout: float = 600) -> Output:
        """Everything the cell ``msg_id`` sent until the kernel is idle again."""
        out = Output()
        deadline = time.monotonic() + timeout
        while True:
            try:
                message = self.client.get_iopub_msg(timeout=max(deadline - time.monotonic(), 1))
            except queue.Empty:
                raise AssertionError(f"the cell did not end in {timeout} s: {out}") from None
            if message["parent_header"].get("msg_id") != msg_id:
                continue
            kind, content = message["msg_type"], message["content"]
            if kind == "stream":
                setattr(out, content["name"], getattr(out, content["name"]) + content["text"])
            elif kind == "error":
                out.ename = content["ename"]
                out.traceback = ANSI.sub("", "\n".join(content["traceback"])).splitlines()
            elif kind == "status" and content["execution_state"] == "idle":
                return out

    def run(self, code: str, timeout: float = 600) -> Output:
        return self.outputs(self.start(code), timeout)

    def close(self) -> None:
        self.client.stop_channels()
        self.manager.shutdown_kernel(now=True)


@pytest.fixture
def kernel(s3_server, tmp_path):
    env = {
        **os.environ,
        **s3_server.env,
        "S3COMMIT_PROGRESS": "",
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    }
    env.pop("S3COMMIT_TRACEBACK", None)
    started = Kernel(env, tmp_path)
    try:
        yield started
    finally:
        started.close()


def assert_quiet(cell: Output, error: str) -> None:
    """The error's own line last, none of the SDK's frames, the caller's cell shown."""
    assert cell.ename == error, cell
    assert cell.last_line().startswith(f"{error}"), cell.traceback
    assert not [line for line in cell.traceback if SDK_FRAME.search(line)], cell.traceback
    assert any(line.startswith("Cell In[") for line in cell.traceback), cell.traceback


def test_a_failed_write_in_a_kernel_shows_one_block_and_the_error_last(kernel, s3, dest):
    setup = kernel.run(
        "import pandas as pd\n"
        "from s3commit_sdk import write_committed\n"
        'frame = pd.DataFrame({"id": range(10)})\n'
        f"write_committed(frame, {dest.url!r}, progress=False)\n"
    )
    assert not setup.ename, setup
    cell = kernel.run(f'write_committed(frame, {dest.url!r}, committer="directory")')
    assert_quiet(cell, "ConflictError")
    assert "already holds data" in cell.last_line()
    # the text log (papermill, nbconvert and this kernel have no widgets): one block
    block = cell.stdout.splitlines()
    assert any(": FAILED after " in line for line in block), block
    assert sum("Failed during job setup" in line for line in block) == 1, block
    assert cell.stderr == ""
    full = kernel.run(
        "import os\n"
        'os.environ["S3COMMIT_TRACEBACK"] = "full"\n'
        f'write_committed(frame, {dest.url!r}, committer="directory", progress=False)'
    )
    assert full.ename == "ConflictError"
    assert [line for line in full.traceback if SDK_FRAME.search(line)], "asked for: shown"
    assert pending_uploads(s3, dest.dir) == []


@pytest.mark.spark
@pytest.mark.timeout(900)
def test_spark_failure_and_interrupt_in_a_kernel_stay_quiet(kernel, s3, dest, tmp_path):
    """A failed task: the error's line last, Spark's error on .engine_error, no Java stack.
    Kernel > Interrupt during a task: KeyboardInterrupt last, none of py4j's log records
    ("KeyboardInterrupt while sending command", BrokenPipeError), and no logging handler left
    installed by them; the JVM's output stays in local_spark's log file."""
    started = tmp_path / "task-started"
    setup = kernel.run(
        "import time\n"
        "from pyspark.sql import functions as F\n"
        "from s3commit_sdk import write_committed\n"
        "from s3commit_sdk.testing.sandbox import local_spark\n"
        'spark = local_spark("local[2]", app_name="quiet")\n'
        'spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "500")\n'
        "@F.udf('long')\n"
        "def slow(x):\n"
        f"    open({str(started)!r}, 'a').close()\n"
        "    time.sleep(0.0002)\n"
        "    return x\n",
        timeout=300,
    )
    assert not setup.ename, setup

    failed = kernel.run(
        "df = spark.range(0, 20, numPartitions=2).withColumn("
        "'x', F.expr(\"cast(raise_error('bad row 17') as int)\"))\n"
        f"write_committed(df, {dest.url + '/failed'!r})"
    )
    assert_quiet(failed, "TaskFailedError")
    assert "bad row 17" in failed.last_line()
    assert any(".engine_error" in line for line in failed.traceback), failed.traceback
    assert not [line for line in failed.traceback if "org.apache" in line or "py4j" in line]
    assert "Traceback" not in failed.stderr and "ERROR" not in failed.stderr, failed.stderr

    running = kernel.start(
        "df = spark.range(0, 2_000_000, numPartitions=1).withColumn('y', slow('id'))\n"
        f"write_committed(df, {dest.url + '/interrupted'!r})"
    )
    deadline = time.monotonic() + 300
    while not started.exists():  # the task runs: its first row went through the UDF
        assert time.monotonic() < deadline, "the task never started"
        time.sleep(0.1)
    kernel.manager.interrupt_kernel()
    interrupted = kernel.outputs(running)
    assert_quiet(interrupted, "KeyboardInterrupt")
    assert any("Spark cancelled the job's running tasks" in line for line in interrupted.traceback)
    for noise in ("while sending command", "BrokenPipeError", "py4j", "Traceback"):
        assert noise not in interrupted.stderr, interrupted.stderr
    assert "Interrupted during tasks write + commit" in interrupted.stdout
    after = kernel.run("import logging\nprint(len(logging.root.handlers))")
    assert after.stdout.strip() == "0", after
    assert pending_uploads(s3, dest.dir) == []
