"""The benchmark's CPU accounting: what a process tree used in a window, exited processes too."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from bench.harness import CpuWindow

#: a parent reaping its children unaccounted (SIGCHLD ignored, as PySpark's daemon does) and
#: one worker: CPU before the window, then, once told, more CPU and its exit inside it
DAEMON = """
import os, signal, sys, time
from pathlib import Path

def burn(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass

signal.signal(signal.SIGCHLD, signal.SIG_IGN)
folder = Path(sys.argv[1])
worker = os.fork()
if worker == 0:
    burn(1.0)
    (folder / "ready").touch()
    while not (folder / "go").exists():
        time.sleep(0.01)
    burn(0.5)
    os._exit(0)
print(worker, flush=True)
while not (folder / "stop").exists():
    time.sleep(0.05)
"""


def wait_until(check, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_a_worker_exiting_unreaped_in_the_window_counts_its_time_in_the_window(tmp_path: Path):
    daemon = subprocess.Popen(
        [sys.executable, "-c", DAEMON, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        worker = int(daemon.stdout.readline())
        wait_until(lambda: (tmp_path / "ready").exists())
        with CpuWindow({"daemon": ([daemon.pid], [])}, interval=0.05) as cpu:
            (tmp_path / "go").touch()
            wait_until(lambda: not Path(f"/proc/{worker}").exists())
        used = cpu.seconds["daemon"]
    finally:
        (tmp_path / "stop").touch()
        daemon.wait(timeout=60)
    # 0.5 s burnt in the window, less what it burnt after its last sample (at most 0.05 s);
    # not the 1.0 s before the window, and never below zero as the reaped times made it
    assert 0.4 <= used <= 0.65, used


def test_two_point_windows_count_a_surviving_process_from_the_windows_start():
    with CpuWindow({"me": ([os.getpid()], [])}, interval=None) as cpu:
        end = time.process_time() + 0.3
        while time.process_time() < end:
            pass
    assert 0.28 <= cpu.seconds["me"] <= 0.6, cpu.seconds
