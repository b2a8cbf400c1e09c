"""Scenario 4: peak RSS and local disk of one Python process writing a single large file.

Magic (parts streamed straight into an uncompleted multipart upload) against the directory
staging committer (the whole file on local disk, then uploaded). Each run is its own process
writing to an emptied endpoint, so RSS and disk belong to that run alone.

    python -m bench.memory --worker magic --size-mib 256 --dest s3://bench/big   # one run
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

from .harness import BUCKET, Endpoint, Record, Run, aggregate

ROW_BYTES = 1024 * 1024
ROWS_PER_BATCH = 8
APPROACHES = ("magic", "directory")


def batches(size_mib: int):
    """Incompressible rows generated on the fly, so the input itself costs no memory."""
    import pyarrow as pa

    schema = pa.schema([("blob", pa.binary())])
    total = size_mib

    def gen():
        left = total
        while left > 0:
            n = min(ROWS_PER_BATCH, left)
            left -= n
            yield pa.record_batch([pa.array([os.urandom(ROW_BYTES) for _ in range(n)])], schema)

    return pa.RecordBatchReader.from_batches(schema, gen())


def rss_mib() -> float:
    """This process's peak RSS (VmHWM; unlike ru_maxrss it does not inherit the parent's peak)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def dir_bytes(path: str) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(root, name))
            except OSError:
                continue
    return total


class DiskSampler(threading.Thread):
    """Largest size the buffer directory reached, sampled every 50 ms."""

    def __init__(self, path: str) -> None:
        super().__init__(daemon=True)
        self.path, self.peak, self._halt = path, 0, threading.Event()

    def run(self) -> None:
        while not self._halt.is_set():
            self.peak = max(self.peak, dir_bytes(self.path))
            self._halt.wait(0.05)

    def stop(self) -> int:
        self._halt.set()
        self.join()
        return max(self.peak, dir_bytes(self.path))


def worker(approach: str, size_mib: int, dest: str, part: str) -> dict:
    import pyarrow  # noqa: F401  (import cost belongs to the baseline)

    from s3commit_sdk import write_committed

    baseline = rss_mib()
    buffer_dir = tempfile.mkdtemp(prefix="s3commit-bench-")
    sampler = DiskSampler(buffer_dir)
    sampler.start()
    started = time.monotonic()
    options = {"multipart.size": part, "buffer.dir": buffer_dir, "upload.threads": 4}
    result = write_committed(
        batches(size_mib), dest, committer=approach, options=options, progress=False
    )
    seconds = time.monotonic() - started
    disk = sampler.stop()
    shutil.rmtree(buffer_dir, ignore_errors=True)
    return {
        "file_mib": result.bytes / 2**20,
        "peak_rss_mib": rss_mib(),
        "added_rss_mib": rss_mib() - baseline,
        "peak_local_disk_mib": disk / 2**20,
        "seconds": seconds,
    }


def run_once(endpoint: Endpoint, approach: str, size_mib: int, part: str) -> dict:
    """One write in a process of its own, so its peak RSS is that write's alone."""
    endpoint.reset()
    cmd = [sys.executable, "-m", "bench.memory", "--worker", approach]
    cmd += ["--size-mib", str(size_mib), "--part", part, "--dest", f"s3://{BUCKET}/big"]
    env = {**os.environ, **endpoint.server.env}
    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if out.returncode != 0:  # say why: a lost traceback cannot be diagnosed after a long run
        raise RuntimeError(
            f"{approach} writing {size_mib} MiB failed (exit {out.returncode}):\n"
            + out.stderr[-4000:]
        )
    if endpoint.pending_uploads():
        raise RuntimeError(f"{approach} left pending uploads")
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_memory(
    run: Run, endpoint: Endpoint, sizes_mib: tuple[int, ...], part: str, repeats: int
) -> None:
    for size in sizes_mib:
        for approach in APPROACHES:
            samples = [run_once(endpoint, approach, size, part) for _ in range(repeats)]
            run.add(
                Record(
                    "memory",
                    {"endpoint": endpoint.kind, "committer": approach, "size_mib": size},
                    aggregate(samples),
                    {"part_size": part, "upload_threads": 4},
                )
            )
    endpoint.reset()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size-mib", type=int, default=256)
    parser.add_argument("--part", default="16M", help="multipart.size")
    parser.add_argument("--worker", choices=APPROACHES, required=True)
    parser.add_argument("--dest", required=True)
    args = parser.parse_args()
    print(json.dumps(worker(args.worker, args.size_mib, args.dest, args.part)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
