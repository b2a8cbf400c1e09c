"""Ctrl-C at every moment of job commit, for every committer: never lost, never half a commit.

A real driver process (tests/interrupt_driver.py) replaces two days of a partitioned destination
through the fault proxy. When its job commit starts it says so and waits; the test then sets one
rule, hold the k-th request of job commit, lets it go on, and once that request is held sends
SIGINT (k = 0: before the first request) and releases the request. k steps through every request
of job commit, one at a time, until a run finishes its commit before the k-th request (that run,
with no signal, must succeed); a last run is interrupted when the write has returned to the
caller's progress hook. The moments are the requests themselves, never a sleep.

After every interrupted run: the process did not exit 0 and raised KeyboardInterrupt; nothing of
the job is pending and no hidden file of it is left (listings); and the destination holds the old
data exactly (same keys, same ETags) or the new data, or the error names `s3commit recover`, which
then brings it to the new data.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import Dest, list_keys, pending_uploads, read_back
from crash_driver import data
from test_interrupts import visible_state

from s3commit_sdk import write_committed
from s3commit_sdk.interrupts import held_interrupts
from s3commit_sdk.recovery import recover
from s3commit_sdk.testing.faultproxy import hold

pytestmark = pytest.mark.fault

DRIVER = Path(__file__).with_name("interrupt_driver.py")
OLD_DAYS, NEW_DAYS = ["d1", "d2"], ["d2", "d3"]
COMMITTERS = ["directory", "partitioned", "magic", "manifest", "file"]
#: how long one driver may take (a Spark driver starts a JVM)
RUN_TIMEOUT = 180


class Driver:
    """The child driver, its stdout read by a thread so the test can wait on several things."""

    def __init__(self, spec: dict) -> None:
        env = {**os.environ, "PYTHONPATH": str(DRIVER.parent)}
        self.process = subprocess.Popen(
            [sys.executable, str(DRIVER), json.dumps(spec)],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.errors: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        self._stderr = threading.Thread(target=self.errors.extend, args=(self.process.stderr,))
        self._stderr.start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.put(line.strip())
        self.lines.put("")  # the end of its output

    def expect(self, line: str) -> None:
        got = self.lines.get(timeout=RUN_TIMEOUT)
        assert got == line, f"the driver said {got!r}, not {line!r}:\n{self.finish()[1]}"

    def go(self) -> None:
        self.process.stdin.write("\n")
        self.process.stdin.flush()

    def interrupt(self) -> None:
        self.process.send_signal(signal.SIGINT)

    def finish(self) -> tuple[int, str]:
        """Let it run to its end (stdin closed: no more waiting): exit status and stderr."""
        with contextlib.suppress(OSError):
            self.process.stdin.close()
        try:
            self.process.wait(timeout=RUN_TIMEOUT)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()
        self._stderr.join()
        return self.process.returncode, "".join(self.errors)


def requests_seen(proxy) -> int:
    return sum(n for op, n in proxy.counts.items() if op != "MotoApi")


def wait_for_request(proxy, driver: Driver, k: int) -> bool:
    """True once the k-th request of job commit is held; False if the driver got past job
    commit first (it announced "done")."""
    deadline = time.monotonic() + RUN_TIMEOUT
    while requests_seen(proxy) < k:
        try:
            line = driver.lines.get(timeout=0.01)
        except queue.Empty:
            assert time.monotonic() < deadline, f"no request #{k} of job commit in time"
            continue
        assert line == "done", f"the driver said {line!r} before request #{k}"
        return False
    return True


def write(url: str, committer: str, seed_: int, days: list[str], options: dict) -> None:
    """A job in this process, straight to the server (not through the proxy)."""
    write_committed(
        data(seed_, days),
        url,
        committer=committer,
        partition_by=["day"],
        conflict_mode="replace",
        options=options,
        progress=False,
    )


def leftovers(s3, dest: Dest) -> list[str]:
    """Hidden files of a job: its metadata, journal, marker, temporary directories."""
    return [k for k in list_keys(s3, dest.dir) if "/__" in k or "/_temporary" in k]


def outcome(s3, s3_server, dest: Dest, before: dict, new: list[tuple], err: str) -> str:
    """Which state the destination is in after an interrupted run; fails on any other."""
    assert pending_uploads(s3, dest.dir) == [], f"pending uploads left:\n{err}"
    if visible_state(s3, dest) == before:  # the old files, the very same objects
        assert leftovers(s3, dest) == [], err
        return "old"
    if read_back(s3_server, dest.prefix) == new and leftovers(s3, dest) == []:
        return "new"
    assert f"s3commit recover {dest.url}" in err, f"neither old nor new data:\n{err}"
    recover(dest.url)
    assert read_back(s3_server, dest.prefix) == new
    assert leftovers(s3, dest) == [] and pending_uploads(s3, dest.dir) == []
    return "recovered"


def interrupted_at(proxy, spec: dict, moment: int | str, rule=None) -> tuple[bool, int, str]:
    """One driver, sent SIGINT at ``moment``: 0 before the first request of job commit, k
    while its k-th is held, "done" in the progress hook after job commit; ``rule`` holds another
    request instead. Whether the signal was sent (no k-th request: not), exit status, stderr."""
    driver = Driver(spec)
    sent = False
    try:
        driver.expect("job commit")
        proxy.reset()
        if rule is not None or moment not in (0, "done"):
            proxy.set_rules([rule or hold("*", occurrences=[moment])])
        if moment == 0:
            driver.interrupt()
            sent = True
        driver.go()
        if moment == "done":
            driver.expect("done")
            driver.interrupt()
            sent = True
        elif moment != 0 and wait_for_request(proxy, driver, 1 if rule else moment):
            driver.interrupt()
            sent = True
        proxy.release()
        return sent, *driver.finish()
    finally:
        proxy.reset()
        driver.finish()


class Sweep:
    """One committer's runs: each on a fresh destination holding the old data."""

    def __init__(self, s3, s3_server, proxy, dest, committer: str, options: dict, **spec) -> None:
        self.s3, self.s3_server, self.proxy = s3, s3_server, proxy
        self.dest, self.committer, self.options, self.spec = dest, committer, options, spec
        reference = Dest(f"{dest.prefix}/reference")
        write(reference.url, "partitioned", 1, OLD_DAYS, options)
        write(reference.url, committer, 2, NEW_DAYS, options)
        self.new = read_back(s3_server, reference.prefix)
        self.outcomes: dict[str, str] = {}

    def run(self, moment: int | str, rule=None) -> bool:
        """Interrupt a run at ``moment``; False when job commit had no such moment."""
        dest = Dest(f"{self.dest.prefix}/at-{moment}")
        write(dest.url, "partitioned", 1, OLD_DAYS, self.options)
        before = visible_state(self.s3, dest)
        spec = {
            "dest": dest.url,
            "committer": self.committer,
            "seed": 2,
            "days": NEW_DAYS,
            "options": {**self.options, "endpoint": self.proxy.endpoint},
            **self.spec,
        }
        sent, status, err = interrupted_at(self.proxy, spec, moment, rule)
        if not sent:  # job commit ended before its request #moment: a plain, successful run
            assert status == 0, err
            assert read_back(self.s3_server, dest.prefix) == self.new
            return False
        assert status != 0, f"at {moment}: the driver exited 0 after SIGINT:\n{err}"
        assert "KeyboardInterrupt" in err, f"at {moment}: no KeyboardInterrupt:\n{err}"
        self.outcomes[str(moment)] = outcome(self.s3, self.s3_server, dest, before, self.new, err)
        return True


def options_for(committer: str, tmp_path: Path) -> dict:
    if committer in ("manifest", "file"):
        return {"tasks": 2, "threads": 1}
    return {"tasks": 2, "threads": 1, "buffer.dir": str(tmp_path / "buffer")}


@pytest.mark.parametrize("committer", COMMITTERS)
@pytest.mark.long
def test_sigint_at_every_request_of_job_commit(s3, s3_server, proxy, dest, committer, tmp_path):
    sweep = Sweep(s3, s3_server, proxy, dest, committer, options_for(committer, tmp_path))
    moment = 0
    while sweep.run(moment):
        moment += 1
    assert moment > 5, f"job commit made only {moment - 1} requests"
    assert sweep.run("done")
    print(committer, sweep.outcomes)
    assert sweep.outcomes["0"] == "old" and sweep.outcomes["done"] == "new"


@pytest.mark.spark  # a Spark driver in a child: on moto only (tests/rgw_matrix.py)
def test_sigint_during_a_spark_magic_commit(s3, s3_server, proxy, dest, tmp_path):
    """Classic Spark: the interrupt lands while the second completion is held."""
    options = {"threads": 1, "buffer.dir": str(tmp_path / "buffer")}
    sweep = Sweep(s3, s3_server, proxy, dest, "magic", options, spark=True)
    assert sweep.run(1, rule=hold("CompleteMultipartUpload", occurrences=[2]))
    assert sweep.outcomes["1"] in ("old", "recovered")


class _Finalized:
    """Its finalizer receives the interrupt: Python would print "Exception ignored" and lose it."""

    def __del__(self) -> None:
        signal.raise_signal(signal.SIGINT)


def test_an_interrupt_landing_in_a_finalizer_is_held_not_lost():
    """How 2 of 6 interrupts of a magic commit were lost: SIGINT arriving while the main thread
    ran a finalizer (the garbage of the tasks' streams and clients is collected during job
    commit). Held, it is raised when the commit ends, saying the job committed; the handler
    before the block (Python's, or a live SparkContext's) is back afterwards."""
    before = signal.getsignal(signal.SIGINT)
    with (
        pytest.raises(KeyboardInterrupt) as info,
        held_interrupts("s3commit: committed all the same"),
    ):
        _Finalized()  # dropped at once: the signal lands inside __del__
    assert info.value.__notes__ == ["s3commit: committed all the same"]
    assert signal.getsignal(signal.SIGINT) is before
