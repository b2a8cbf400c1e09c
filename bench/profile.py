"""Where the time goes: one magic write under py-spy, its Python samples sorted into phases.

py-spy attaches to this process with ``--subprocesses``, so it also samples every Python
process started under it: Spark's Python workers (children of the JVM, which is a child of
this process) and the driver's own job commit. The JVM is not Python and py-spy cannot sample
it: what the JVM spends (reading the rows, handing Arrow batches over) shows only as the time
the workers wait for them. Without ``--idle`` py-spy leaves out the threads waiting on I/O or
locks, so every counted sample is one Python thread running or ready to run. The raw
collapsed stacks are kept beside the results.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from .data import spark_frame
from .end_to_end import WRITERS, warm_up
from .harness import Endpoint, Record, Run, aggregate

SCENARIO = "profile"
PY_SPY = Path(sys.executable).with_name("py-spy")
#: samples per second and process: a 1 GiB write of about half a minute gives thousands
RATE = 100
PROFILED = next(w for w in WRITERS if w.committer == "magic")
COMMIT, UPLOAD, BUFFERING, ENCODING, TRANSFER, BETWEEN, OTHER = (
    "commit",
    "upload",
    "buffering",
    "encoding",
    "Arrow transfer",
    "between tasks",
    "other",
)
PHASES = (TRANSFER, ENCODING, BUFFERING, UPLOAD, COMMIT, BETWEEN, OTHER)
#: one collapsed stack: ``process <pid>:"<command line>";...;frame;...;frame <count>``, the
#: processes from this one down to the sampled one
STACK = re.compile(r"(.*) (\d+)", re.DOTALL)
PROCESS = re.compile(r'process (\d+):"(.*?)"(?:;|$)', re.DOTALL)
#: one frame: ``Class.function (file:line)``; py-spy shortens the file to its package path
FRAME = re.compile(r"(.*) \((.*?)(?::\d+)?\)")
UPLOAD_PACKAGES = ("botocore/", "boto3/", "urllib3/", "s3transfer/")
SUMMARY = re.compile(r"Samples: \d+ Errors: \d+")


def frame_phase(function: str, path: str) -> str | None:
    """The phase one frame belongs to, or None when it tells nothing by itself."""
    name = function.rsplit(".", 1)[-1]
    if path.startswith(UPLOAD_PACKAGES):
        return UPLOAD
    if path.endswith("committers/magic.py"):
        # the part buffers' filling, copying and hand-off to the upload threads
        return UPLOAD if name == "_upload" else BUFFERING
    if path.startswith("pyarrow/parquet") or (
        path.endswith("writers.py") and name == "write_batch"
    ):
        return ENCODING
    if path.startswith("pyarrow/ipc") or (
        path.endswith("serializers.py") and name == "load_stream"
    ):
        return TRANSFER  # reading the Arrow stream from the JVM, not writing results back
    return None


def stack_phase(frames: list[tuple[str, str]]) -> str:
    """Commit when any frame is commit code (its requests included); otherwise the phase of
    the innermost frame that has one: what the thread was doing, not who called it."""
    names = [(function.rsplit(".", 1)[-1], path) for function, path in frames]
    if any(
        name in ("commit_task", "commit_job")
        or (name == "finish" and path.endswith("committers/magic.py"))
        for name, path in names
    ):
        return COMMIT
    if names and names[-1] == ("manager", "daemon.py"):
        return BETWEEN  # a reused worker in PySpark's daemon loop: gc.collect() after a task
    for function, path in reversed(frames):
        found = frame_phase(function, path)
        if found:
            return found
    return OTHER


def collapsed_stacks(text: str) -> Iterator[tuple[int, str, list[tuple[str, str]], int]]:
    """(pid, command line, frames outermost first, samples) of each line of py-spy's raw
    output; a command line may span lines (``python -c`` with newlines)."""
    pending = ""
    for line in text.splitlines():
        pending = f"{pending}\n{line}" if pending else line
        found = STACK.fullmatch(pending)
        if not found:
            continue
        pending = ""
        rest, count = found.groups()
        process = PROCESS.match(rest)
        if not process:
            continue  # not a stack of py-spy --subprocesses
        while process:  # the innermost process is the one sampled
            pid, command = process.groups()
            rest = rest[process.end() :]
            process = PROCESS.match(rest)
        frames = [FRAME.fullmatch(f) for f in rest.split(";") if f]
        yield int(pid), command, [m.groups() for m in frames if m], int(count)


def role(pid: int, command: str, driver: int) -> str:
    """Which Python process a stack is from: the driver, a Spark Python worker, or else
    (e.g. the moto server this process started)."""
    if pid == driver:
        return "driver"
    return "worker" if "pyspark.daemon" in command or "pyspark.worker" in command else "other"


def phase_samples(text: str, driver: int) -> dict[str, dict[str, int]]:
    """Per phase, the samples of the Python workers and of the driver."""
    counts: Counter[tuple[str, str]] = Counter()
    for pid, command, frames, samples in collapsed_stacks(text):
        counts[stack_phase(frames), role(pid, command, driver)] += samples
    return {phase: {who: counts[phase, who] for who in ("worker", "driver")} for phase in PHASES}


class Sampling:
    """py-spy recording this process and its Python descendants until :meth:`stop`."""

    def __init__(self, output: Path) -> None:
        output.parent.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(
            [
                str(PY_SPY),
                "record",
                "--pid",
                str(os.getpid()),
                "--subprocesses",
                "--nonblocking",  # sampled processes are not paused: less perturbation
                "--format",
                "raw",
                "--rate",
                str(RATE),
                "--output",
                str(output),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        # py-spy announces on stdout that it samples; an attach failure closes it unannounced
        announced = self.process.stdout.readline()
        if "Sampling" not in announced:
            _, errors = self.process.communicate(timeout=60)
            raise RuntimeError(f"py-spy could not attach: {(announced + errors).strip()}")

    def stop(self) -> str:
        """Stop sampling (py-spy writes its file on SIGINT); py-spy's count of samples and
        errors (stacks it failed to read), or all it said when it gave none."""
        self.process.send_signal(signal.SIGINT)
        out, errors = self.process.communicate(timeout=120)
        summary = SUMMARY.search(out + errors)
        return summary.group(0) if summary else (out + errors).strip()


def run_profile(run: Run, endpoint: Endpoint, spark, size_mib: int, raw: Path) -> None:
    """One flat magic write of ``size_mib`` under py-spy (after an untimed warm-up, as in
    scenario 1); its phases go into the record, the raw stacks into ``raw``."""
    df = spark_frame(spark, size_mib)
    warm_up(df, endpoint, {})
    labels = {
        "endpoint": endpoint.kind,
        "writer": PROFILED.name,
        "size_mib": size_mib,
        "partitioned": False,
    }
    try:
        sampling = Sampling(raw)
    except (OSError, RuntimeError) as error:
        run.add(Record(SCENARIO, labels, {}, {"error": f"{type(error).__name__}: {error}"}))
        return
    started = time.monotonic()
    try:
        outcome = PROFILED.write(df, f"{endpoint.url}/profile", [], {})
    finally:
        sampled_s = time.monotonic() - started
        summary = sampling.stop()
    phases = phase_samples(raw.read_text(), os.getpid())
    workers = sum(p["worker"] for p in phases.values())
    sample = {
        "seconds": outcome["seconds"],
        "worker_samples": workers,
        "driver_samples": sum(p["driver"] for p in phases.values()),
        # worker threads at work on average: one thread busy all along gives RATE a second
        "busy_worker_threads": workers / (RATE * sampled_s),
    }
    notes = {"phases": phases, "rate": RATE, "raw": raw.name, "py_spy": summary}
    run.add(Record(SCENARIO, labels, aggregate([sample]), notes))
    endpoint.reset()
