"""``python -m s3commit_sdk.testing.sandbox serve``: one local endpoint for scripts and the CLI.

Before it, pointing ``s3commit`` at a notebook's sandbox meant printing the kernel's
environment (its port changes every run). Here the endpoint runs as a process of its own, its
environment in a file; the CLI and a write from other processes use it through that file alone,
and SIGTERM (or Ctrl-C) ends it cleanly: exit 0, port closed, file removed.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from s3commit_sdk.testing.sandbox import free_port

SERVE = [sys.executable, "-m", "s3commit_sdk.testing.sandbox", "serve"]
WRITE = """
import pandas as pd
from s3commit_sdk import write_committed

frame = pd.DataFrame({"id": [1, 2, 3], "day": ["a", "a", "b"]})
result = write_committed(frame, "s3://served/table", partition_by=["day"], progress=False)
print(result.rows)
"""


def without_aws_env() -> dict[str, str]:
    """This environment minus every AWS_ variable: the children see the served endpoint only
    through what the env file gives them."""
    return {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}


def port_open(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def wait_for_file(path: Path, process: subprocess.Popen, timeout_s: float = 60) -> None:
    """Until ``path`` exists; fails when ``process`` exits first or the time runs out."""
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert process.poll() is None, f"serve exited with {process.returncode}"
        assert time.monotonic() < deadline, f"no {path} after {timeout_s} s"
        time.sleep(0.05)


def read_env_lines(lines: list[str]) -> dict[str, str]:
    """``KEY=value`` lines (values shell-quoted) as a dict; blank and ``#`` lines skipped."""
    pairs = (line.partition("=") for line in lines if line and not line.startswith("#"))
    return {key: shlex.split(value)[0] for key, _, value in pairs}


@pytest.fixture
def serving(tmp_path: Path) -> Iterator[tuple[subprocess.Popen, int, Path]]:
    """``serve`` on a free port with bucket ``served`` and an env file; killed if a test left it
    running. Yields (process, port, env file)."""
    port, env_file = free_port(), tmp_path / "sandbox.env"
    process = subprocess.Popen(
        [*SERVE, "--port", str(port), "--bucket", "served", "--env-file", str(env_file)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=without_aws_env(),
    )
    try:
        yield process, port, env_file
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate()


def sourced(env_file: Path, *command: str) -> subprocess.CompletedProcess:
    """``command`` run by a POSIX shell that sourced ``env_file`` as the file says to."""
    script = 'set -a; . "$1"; set +a; shift; exec "$@"'
    return subprocess.run(
        ["sh", "-c", script, "sh", str(env_file), *command],
        capture_output=True,
        text=True,
        env=without_aws_env(),
        timeout=120,
    )


def stop(process: subprocess.Popen, signum: int) -> tuple[str, str]:
    process.send_signal(signum)
    out, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    return out, err


def test_the_cli_and_another_process_write_through_the_env_file(serving):
    process, port, env_file = serving
    wait_for_file(env_file, process)
    env = read_env_lines(env_file.read_text().splitlines())
    assert env["AWS_ENDPOINT_URL"] == env["AWS_ENDPOINT_URL_S3"] == f"http://127.0.0.1:{port}"
    assert env["AWS_ACCESS_KEY_ID"] and env["AWS_REGION"]

    write = sourced(env_file, sys.executable, "-c", WRITE)
    assert write.returncode == 0, write.stderr
    assert write.stdout.split()[-1] == "3"
    cli = [sys.executable, "-m", "s3commit_sdk.cli"]
    success = sourced(env_file, *cli, "success", "--json", "s3://served/table")
    assert success.returncode == 0, success.stderr
    assert json.loads(success.stdout)["rows"] == 3
    console_script = str(Path(sys.executable).with_name("s3commit"))
    pending = sourced(env_file, console_script, "uploads", "expect", "s3://served/", "0")
    assert pending.returncode == 0, pending.stdout + pending.stderr

    out, err = stop(process, signal.SIGTERM)
    assert not port_open(port)
    assert not env_file.exists()  # it described an endpoint that is gone
    exports = [line.removeprefix("export ") for line in out.splitlines()]
    assert read_env_lines(exports) == env  # printed: the same variables
    assert f"http://127.0.0.1:{port}" in err and "s3://served" in err


def test_ctrl_c_stops_it_cleanly(serving):
    process, port, env_file = serving
    wait_for_file(env_file, process)
    assert port_open(port)
    stop(process, signal.SIGINT)
    assert not port_open(port) and not env_file.exists()


def test_a_taken_port_and_a_bad_bucket_name_are_refused():
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        taken = subprocess.run(
            [*SERVE, "--port", str(port)], capture_output=True, text=True, timeout=60
        )
    assert taken.returncode == 1 and f"port {port} on 127.0.0.1 is taken" in taken.stderr
    bad = subprocess.run([*SERVE, "--bucket", "p"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "not a valid S3 bucket name" in bad.stderr
