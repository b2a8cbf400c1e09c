"""A ``pip install`` of the package alone (no extras) writes a pandas frame to S3.

A clean virtualenv (no system site packages) gets the repository's package and its runtime
dependencies only; Spark, the widgets, the local S3 server and the notebook test runners must
not come with it. The child writes to the session's S3 server, and this test reads the committed
object back with its own boto3 client.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from conftest import BUCKET, rows_of

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

REPO = Path(__file__).resolve().parents[1]
OPTIONAL = ("pyspark", "moto", "ipywidgets", "papermill", "nbval")

CHILD = """
import importlib.util, json, sys
import pandas as pd
import s3commit_sdk
from s3commit_sdk import write_committed

spec = json.loads(sys.argv[1])
present = [name for name in spec["optional"] if importlib.util.find_spec(name) is not None]
frame = pd.DataFrame({"id": [1, 2, 3], "name": ["a", "b", "c"]})
result = write_committed(frame, spec["dest"], progress=False)
print(json.dumps({"present": present, "package": s3commit_sdk.__file__,
                  "keys": [f.key for f in result.files]}))
"""


def copy_sources(target: Path) -> Path:
    """What a wheel is built from, outside the shared working tree (the build writes there)."""
    target.mkdir()
    for name in ("pyproject.toml", "README.md", "pyspark_s3commit.py"):
        shutil.copy2(REPO / name, target / name)
    shutil.copytree(
        REPO / "s3commit_sdk", target / "s3commit_sdk", ignore=shutil.ignore_patterns("__pycache__")
    )
    return target


def test_pip_install_without_extras_writes_a_pandas_frame(tmp_path, s3_server, s3, dest):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    source = copy_sources(tmp_path / "src")
    started = time.monotonic()
    subprocess.run(
        [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", str(source)],
        check=True,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )
    print(f"pip install without extras: {time.monotonic() - started:.0f} s")
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), **s3_server.env}
    done = subprocess.run(
        [python, "-I", "-c", CHILD, json.dumps({"dest": dest.url, "optional": OPTIONAL})],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["present"] == []
    assert report["package"].startswith(str(venv))
    rows = []
    for key in report["keys"]:
        body = s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()
        rows += rows_of(pq.read_table(io.BytesIO(body)))
    assert sorted(rows) == [("1", "a"), ("2", "b"), ("3", "c")]
