"""The RGW matrix rule (``tests/rgw_matrix.py``) on a small suite collected by a real pytest.

A child pytest collects a module whose tests take an ``s3_server`` fixture with the suite's two
parameters; what it prints is what would run.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

CONFTEST = """
import os
import pytest
from rgw_matrix import select_rgw_matrix

@pytest.fixture(params=["moto", pytest.param("rgw", marks=pytest.mark.rgw)])
def s3_server(request):
    return request.param

def pytest_collection_modifyitems(config, items):
    select_rgw_matrix(config, items, os.environ["MODE"])
"""

TESTS = """
import pytest

@pytest.mark.parametrize("committer", ["directory", "magic", "file"])
def test_matrix(s3_server, committer):
    pass

@pytest.mark.spark
@pytest.mark.parametrize("point", ["before", "after"])
def test_spark_side(s3_server, point):
    pass

def test_plain(s3_server):
    pass

@pytest.mark.parametrize("n", [1, 2])
def test_no_server(n):
    pass
"""


def collect(tmp_path: Path, mode: str) -> tuple[list[str], str, int]:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_suite.py").write_text(TESTS)
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    rgw\n    spark\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}  # the child's own run
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # its conftest alone: no nbval, playwright...
    env |= {"MODE": mode, "PYTHONPATH": str(Path(__file__).parent)}
    child = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    ids = [line.split("::", 1)[1] for line in child.stdout.splitlines() if "::" in line]
    return ids, child.stdout + child.stderr, child.returncode


def test_rgw_runs_each_in_process_test_once_with_its_first_parameters(tmp_path):
    ids, out, code = collect(tmp_path, "first")
    assert sorted(i for i in ids if "rgw" in i) == ["test_matrix[rgw-directory]", "test_plain[rgw]"]
    moto = [i for i in ids if "moto" in i]
    assert len(moto) == 6 and "test_matrix[moto-file]" in moto, out
    assert "test_spark_side[moto-after]" in moto
    assert "test_no_server[1]" in ids and "test_no_server[2]" in ids
    assert "10/14 tests collected (4 deselected)" in out and code == 0, out


def test_full_runs_the_whole_matrix_on_rgw(tmp_path):
    ids, out, code = collect(tmp_path, "full")
    assert len([i for i in ids if "rgw" in i]) == 6 and len(ids) == 14 and code == 0, out


@pytest.mark.parametrize("mode", ["all", ""])
def test_an_unknown_mode_is_a_usage_error(tmp_path, mode):
    _, out, code = collect(tmp_path, mode)
    assert code != 0 and f"S3COMMIT_TEST_RGW_MATRIX={mode!r}: use one of" in out, out
