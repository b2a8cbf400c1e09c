"""The sandbox's S3 server survives a notebook's Kernel > Interrupt and ends with its owner.

A child Python process stands in for the kernel: it holds an ``S3Sandbox`` and, as a kernel
does, survives SIGINT (KeyboardInterrupt is caught). Jupyter interrupts a kernel by signalling
its whole process group; the test does the same with ``os.killpg``.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from s3commit_sdk.errors import InvalidArgumentError
from s3commit_sdk.testing.rgw import RGWServer
from s3commit_sdk.testing.sandbox import S3Sandbox

KERNEL = """
import sys, time
from s3commit_sdk.errors import InvalidArgumentError
from s3commit_sdk.testing.rgw import RGWServer
from s3commit_sdk.testing.sandbox import S3Sandbox

sandbox = S3Sandbox(bucket="kernel").start()
print(sandbox.endpoint, sandbox.process.pid, flush=True)
for line in sys.stdin:
    try:
        if line.strip() == "stop":
            sandbox.stop()
            print("stopped", flush=True)
        elif line.strip() == "exit":
            break  # without stop(): the interpreter's exit must stop the server
        elif line.strip() == "wait":
            print("waiting", flush=True)  # inside the try: an interrupt from now on is caught
            time.sleep(60)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
"""


def answers(endpoint: str) -> bool:
    try:
        urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=2).close()
        return True
    except OSError:
        return False


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:  # a zombie has exited
        return stat.read().rsplit(")", 1)[1].split()[0] != "Z"


def gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


@pytest.fixture
def kernel():
    """The stand-in kernel, leader of its own process group; yields (process, endpoint, pid)."""
    child = subprocess.Popen(
        [sys.executable, "-c", KERNEL],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    endpoint, pid = child.stdout.readline().split()
    try:
        yield child, endpoint, int(pid)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        if alive(int(pid)):
            os.kill(int(pid), signal.SIGKILL)


def send(child: subprocess.Popen, line: str) -> None:
    child.stdin.write(line + "\n")
    child.stdin.flush()


def test_an_interrupt_of_the_kernel_leaves_the_server_running(kernel):
    child, endpoint, server = kernel
    send(child, "wait")
    assert child.stdout.readline().strip() == "waiting"  # not a race with the kernel's loop
    os.killpg(child.pid, signal.SIGINT)  # what Kernel > Interrupt does
    assert child.stdout.readline().strip() == "interrupted"
    assert answers(endpoint) and alive(server)
    send(child, "stop")
    assert child.stdout.readline().strip() == "stopped"
    assert gone_within(server, 10) and not answers(endpoint)


def test_the_server_stops_when_the_kernel_exits(kernel):
    child, _endpoint, server = kernel
    send(child, "exit")
    child.wait(30)
    assert gone_within(server, 10)


def test_the_server_stops_when_the_kernel_is_killed(kernel):
    child, _endpoint, server = kernel
    child.kill()  # no atexit: the server notices its parent is gone
    child.wait()
    assert gone_within(server, 10)


def test_uploads_are_listed_with_the_moment_they_were_started():
    """moto lists every upload as initiated on 2010-11-10; the sandbox's server does not."""
    with S3Sandbox(bucket="ages", export=False) as sandbox:
        client = sandbox.client()
        before = datetime.now(timezone.utc)
        client.create_multipart_upload(Bucket="ages", Key="a/part-0.parquet")
        time.sleep(1.1)
        client.create_multipart_upload(Bucket="ages", Key="a/part-1.parquet")
        listed = client.list_multipart_uploads(Bucket="ages")["Uploads"]
    initiated = {u["Key"]: u["Initiated"] for u in listed}
    first, second = initiated["a/part-0.parquet"], initiated["a/part-1.parquet"]
    assert before - timedelta(seconds=2) <= first <= before + timedelta(seconds=2)
    assert second - first >= timedelta(seconds=1)


@pytest.mark.parametrize(
    "bucket",
    ["p", "ab", "Sandbox", "a" * 64, "-sandbox", "sandbox-", "my..bucket", "my_bucket", "10.0.0.1"],
)
@pytest.mark.parametrize("server", [S3Sandbox, RGWServer])
def test_an_invalid_bucket_name_is_refused_before_anything_starts(server, bucket):
    """`S3Sandbox(bucket="p")` gave a bare botocore error once the server was up."""
    with pytest.raises(InvalidArgumentError, match="3 to 63 lowercase letters") as info:
        server(bucket=bucket, export=False)  # the constructor: no server process yet
    assert repr(bucket) in str(info.value)


@pytest.mark.parametrize("bucket", ["abc", "a" * 63, "my.bucket-1", None, ""])
def test_valid_bucket_names_and_none_are_accepted(bucket):
    assert S3Sandbox(bucket=bucket, export=False).bucket == bucket


def test_a_taken_port_is_refused_instead_of_using_the_server_there():
    """With --port naming a busy port the sandbox took the other server's answer for its own."""
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        sandbox = S3Sandbox(bucket="taken", port=other.getsockname()[1], export=False)
        with pytest.raises(RuntimeError, match="is taken"):
            sandbox.start()
    assert sandbox.process is None


SPARK_START = """
from s3commit_sdk.testing.sandbox import local_spark
spark = local_spark({quiet})
print(spark.range(5).count(), spark.conf.get("spark.s3commit.sandbox.log", ""), flush=True)
spark.stop()
"""


@pytest.mark.parametrize("quiet", [True, False])
@pytest.mark.spark
def test_local_spark_keeps_the_jvm_start_up_noise_out_of_the_notebook(quiet):
    """A notebook's first output was a red block of Spark's start-up warnings."""
    done = subprocess.run(
        [sys.executable, "-c", SPARK_START.format(quiet=f"quiet={quiet}")],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr
    count, _, log = done.stdout.strip().partition(" ")
    assert count == "5"
    noisy = "Setting default log level" in done.stderr or "WARN" in done.stderr
    if quiet:
        assert not noisy, done.stderr
        assert "Setting default log level" in Path(log).read_text()
    else:  # the control: without quiet the same start does print it
        assert noisy and log == ""
