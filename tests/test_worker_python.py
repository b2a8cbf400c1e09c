"""Spark's Python workers find the SDK: sessions the SDK starts use the interpreter that runs
it, and a worker that cannot import it fails the write with an error naming the interpreter.

The interpreter without the SDK is this Python run with ``-S`` (no site-packages), through a
two-line launcher: what a worker gets from ``python3`` on a PATH without the virtualenv.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import list_keys, pending_uploads

from s3commit_sdk import WorkerPythonError, write_committed
from s3commit_sdk.testing.sandbox import local_spark

NOTEBOOK_06 = Path(__file__).parents[1] / "notebooks" / "06_spark_native_api.ipynb"


@pytest.fixture
def bare_python(tmp_path) -> str:
    """An interpreter without any installed package: neither pyspark, pyarrow nor the SDK."""
    launcher = tmp_path / "bare-python"
    base = os.path.realpath(sys.executable)  # a virtualenv's python links to its base
    launcher.write_text(f'#!/bin/sh\nexec {base} -S "$@"\n')
    launcher.chmod(0o755)
    return str(launcher)


def test_local_spark_refuses_a_pyspark_python_without_the_sdk(bare_python, monkeypatch):
    """Refused before any JVM starts, naming the interpreter and the one to use instead."""
    monkeypatch.setenv("PYSPARK_PYTHON", bare_python)
    with pytest.raises(WorkerPythonError) as raised:
        local_spark("local[1]")
    message = str(raised.value)
    assert f"run {bare_python}, chosen by PYSPARK_PYTHON" in message
    assert "cannot import pyspark" in message
    assert f"set PYSPARK_PYTHON to {sys.executable}" in message


def test_a_worker_without_the_sdk_fails_the_write_naming_its_interpreter(
    spark, s3, dest, bare_python
):
    """The classic session's workers run another interpreter (``pythonExec``, what
    ``PYSPARK_PYTHON`` said when the session started): the typed error names it, nothing is
    visible or pending."""
    context = spark.sparkContext
    kept = context.pythonExec
    context.pythonExec = bare_python
    try:
        with pytest.raises(WorkerPythonError) as raised:
            write_committed(spark.range(10), dest.url, committer="magic")
    finally:
        context.pythonExec = kept
    error = raised.value
    assert f"run {bare_python}, chosen by the session's PYSPARK_PYTHON" in str(error)
    assert "cannot import" in str(error) and error.visible == "nothing"
    assert list_keys(s3, dest.dir) == []
    assert pending_uploads(s3, dest.dir) == []


@pytest.mark.notebook
@pytest.mark.cluster
@pytest.mark.timeout(600)
def test_notebook_06_runs_from_the_venvs_papermill_without_the_venv_on_path(tmp_path):
    """As a scheduler starts it: ``.venv/bin/papermill`` from a shell whose PATH has no
    virtualenv and no PYSPARK_PYTHON. The notebook's Spark Connect server then runs its workers
    with the SDK's interpreter, not ``python3`` from the PATH."""
    venv_bin = Path(sys.executable).parent
    path = [p for p in os.environ["PATH"].split(os.pathsep) if Path(p) != venv_bin]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_")}
    env.pop("VIRTUAL_ENV", None)
    env["PATH"] = os.pathsep.join(path)
    out = tmp_path / "06.ipynb"
    command = [str(venv_bin / "papermill"), str(NOTEBOOK_06), str(out), "--no-progress-bar"]
    command += ["--cwd", str(NOTEBOOK_06.parent), "-k", "python3"]
    child = subprocess.run(
        command, env=env, capture_output=True, text=True, timeout=580, check=False
    )
    assert child.returncode == 0, child.stderr[-4000:]
    assert "ModuleNotFoundError" not in out.read_text()
