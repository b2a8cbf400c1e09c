"""What each make target installs: `make demo` needs only Python and Java.

A newcomer's `make demo` used to demand Ceph's radosgw and chromium and install the bench and
dev extras; without apt-get (any Mac) it stopped at once. These tests read the Makefile's plan
with `make -n` (a dry run: nothing is installed) into a virtualenv path that does not exist,
and run its system-deps step with a PATH that lacks apt-get (and java): it must name the
packages per platform and fail, never install anything.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parent.parent
MAKE = shutil.which("make")
if MAKE is None:
    pytest.skip("no make on this machine", allow_module_level=True)

DEMO_EXTRAS = {"spark", "notebook", "testing", "delta", "iceberg"}
JAVA = {"openjdk-17-jre-headless"}
CHROMIUM = {"chromium"}
CEPH = {"ceph-mon", "ceph-osd", "radosgw"}
POSTGRES = {"postgresql"}
#: make's own variables, set when the suite itself runs under `make test`
MAKE_ENV = ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES")
#: what chooses the test target's needs (tests/conftest.py, tests/test_browser.py)
NEEDS_ENV = ("S3COMMIT_TEST_ENDPOINTS", "S3COMMIT_SKIP_BROWSER")


def dry_run(target: str, venv: Path, **env: str) -> str:
    """`make -n TARGET` with the virtualenv at ``venv``: the commands it would run."""
    clean = {k: v for k, v in os.environ.items() if k not in MAKE_ENV + NEEDS_ENV}
    done = subprocess.run(
        [MAKE, "-n", "-C", str(REPO), f"VENV={venv}", target],
        capture_output=True,
        text=True,
        env={**clean, **env},
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def extras_installed(plan: str) -> set[str]:
    """The extras of every `pip install -e '.[...]'` in the plan."""
    found = re.findall(r"pip install .*-e '\.\[([^\]]*)\]'", plan)
    return {extra for group in found for extra in group.split(",")}


def apt_packages(plan: str) -> set[str]:
    """The packages of every `$apt install -y -q ...` in the plan."""
    found = re.findall(r"\$apt install -y -q ([^|]*?) \|\|", plan)
    return {name for group in found for name in group.split() if not name.startswith("-")}


@pytest.mark.parametrize(
    ("target", "extras", "packages"),
    [
        ("setup", DEMO_EXTRAS, JAVA),
        ("demo", DEMO_EXTRAS, JAVA),
        ("test", DEMO_EXTRAS | {"dev", "docs", "bench"}, JAVA | CHROMIUM | CEPH | POSTGRES),
        ("test-fast", DEMO_EXTRAS | {"dev"}, JAVA),
        ("lint", {"dev"}, set()),
        ("docs", DEMO_EXTRAS | {"docs"}, set()),
        ("bench-quick", DEMO_EXTRAS | {"bench"}, JAVA | CEPH),
    ],
)
def test_each_target_installs_what_it_needs(tmp_path, target, extras, packages):
    plan = dry_run(target, tmp_path / "venv")
    assert extras_installed(plan) == extras
    assert apt_packages(plan) == packages


def test_make_demo_runs_the_demo_and_the_suite_says_how_long_it_takes(tmp_path):
    assert "-m s3commit_sdk.demo" in dry_run("demo", tmp_path / "venv")
    test = dry_run("test", tmp_path / "venv")
    assert "about 60 minutes on 2 cores" in test and "make test-all: about 2 hours" in test
    assert '-m "not long"' in test and "not long" not in dry_run("test-all", tmp_path / "venv")


def test_the_suite_on_moto_without_the_browser_needs_only_java_and_postgresql(tmp_path):
    skips = {"S3COMMIT_TEST_ENDPOINTS": "moto", "S3COMMIT_SKIP_BROWSER": "1"}
    plan = dry_run("test", tmp_path / "venv", **skips)
    assert apt_packages(plan) == JAVA | POSTGRES


def test_make_test_after_make_setup_installs_the_dev_docs_and_bench_extras(tmp_path):
    """The suite builds the docs site and runs the benchmarks' code (its charts need
    matplotlib): a fresh clone's `make test` installs those extras, as CI's does."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").touch()
    (venv / ".extras-demo").touch()  # what `make setup` leaves, newer than pyproject.toml
    plan = dry_run("test", venv)
    assert extras_installed(plan) == {"dev", "docs", "bench"}
    assert "-m venv" not in plan


def test_make_wheel_builds_the_wheel_a_cluster_installs(tmp_path):
    """`make wheel` for real: the package and the top-level module Spark finds the data source
    by (pyspark_s3commit), and no tests or notebooks."""
    venv = Path(sys.executable).parent.parent
    done = subprocess.run(
        [MAKE, "-s", "-C", str(REPO), f"VENV={venv}", "wheel"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    wheels = sorted((REPO / "dist").glob("s3commit_sdk-*-py3-none-any.whl"))
    assert wheels, "no wheel in dist/"
    with zipfile.ZipFile(wheels[-1]) as wheel:
        names = set(wheel.namelist())
    assert {"pyspark_s3commit.py", "s3commit_sdk/api.py", "s3commit_sdk/cli.py"} <= names
    assert not any(name.startswith(("tests/", "notebooks/")) for name in names)


def system_deps(target: str, tmp_path: Path, *programs: str) -> subprocess.CompletedProcess:
    """The Makefile's system-deps step ``target`` on a PATH holding only ``programs`` (and
    what its shell needs besides builtins): no apt-get, and no java unless given."""
    path = tmp_path / "bin"
    path.mkdir()
    for program in ("sed", "head", *programs):
        (path / program).symlink_to(shutil.which(program))
    return subprocess.run(
        [MAKE, "-s", "-C", str(REPO), target],
        capture_output=True,
        text=True,
        env={"PATH": str(path)},
        timeout=60,
    )


def test_without_apt_get_the_test_deps_are_named_per_platform(tmp_path):
    done = system_deps("system-deps", tmp_path)
    assert done.returncode != 0
    message = done.stdout
    assert "this machine has no apt-get" in message
    assert "apt-get install openjdk-17-jre-headless" in message
    assert "brew install openjdk@17" in message
    assert "apt-get install --no-install-recommends ceph-mon ceph-osd radosgw" in message
    assert "no Homebrew package" in message and "S3COMMIT_TEST_ENDPOINTS=moto" in message
    if not os.access("/usr/bin/chromium", os.X_OK):
        assert "brew install --cask chromium" in message


def test_without_apt_get_the_demo_asks_for_java_alone(tmp_path):
    done = system_deps("system-deps-demo", tmp_path)
    assert done.returncode != 0
    assert "openjdk-17-jre-headless" in done.stdout and "openjdk@17" in done.stdout
    assert "radosgw" not in done.stdout and "chromium" not in done.stdout


@pytest.mark.skipif(shutil.which("java") is None, reason="no java on this machine")
def test_with_java_the_demo_needs_nothing_else(tmp_path):
    done = system_deps("system-deps-demo", tmp_path, "java")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout == ""
