"""`make demo` says what day two replaced, and checks it against the destination's keys."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.spark
def test_the_demo_says_what_day_two_replaced():
    done = subprocess.run(
        [sys.executable, "-m", "s3commit_sdk.demo"], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert (
        "day two replaced day=2026-11-21 (1 file of day one removed), added day=2026-11-22; "
        "day=2026-11-20 untouched (2 files kept)"
    ) in lines
    assert lines[-1] == "demo OK"
