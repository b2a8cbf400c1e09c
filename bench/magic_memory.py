"""Peak memory and local disk of one Python process writing a single large file.

Compares the magic committer (parts streamed straight into an uncompleted multipart upload),
the directory (staging) committer (the whole file on local disk, then uploaded) and the naive
approach (the whole file buffered in memory, then uploaded). Each approach runs in its own
process against its own local S3 endpoint, so RSS and disk belong to that approach alone.

    python -m bench.magic_memory --size-mib 1024          # or: make bench-memory
"""

from __future__ import annotations

import argparse
import io
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

RESULTS = Path(__file__).parent / "results"
ROW_BYTES = 1024 * 1024
ROWS_PER_BATCH = 8
APPROACHES = ("magic", "directory", "naive")


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
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


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
    import pyarrow as pa  # noqa: F401  (import cost belongs to the baseline)
    import pyarrow.parquet as pq

    from s3commit_sdk import write_committed
    from s3commit_sdk.options import resolve_options
    from s3commit_sdk.paths import parse_s3_url
    from s3commit_sdk.store import S3Settings, S3Store

    baseline = rss_mib()
    buffer_dir = tempfile.mkdtemp(prefix="s3commit-bench-")
    sampler = DiskSampler(buffer_dir)
    sampler.start()
    started = time.monotonic()
    if approach == "naive":
        sink = io.BytesIO()
        reader = batches(size_mib)
        with pq.ParquetWriter(sink, reader.schema, compression="snappy") as writer:
            for batch in reader:
                writer.write_batch(batch)
        location = parse_s3_url(dest)
        store = S3Store(S3Settings.resolve(resolve_options(None)))
        store.put(location.bucket, location.key("part-00000.snappy.parquet"), sink.getvalue())
        size = sink.tell()
    else:
        options = {"multipart.size": part, "buffer.dir": buffer_dir, "upload.threads": 4}
        result = write_committed(batches(size_mib), dest, committer=approach, options=options)
        size = result.bytes
    seconds = time.monotonic() - started
    disk = sampler.stop()
    shutil.rmtree(buffer_dir, ignore_errors=True)
    return {
        "approach": approach,
        "file_bytes": size,
        "peak_rss_mib": round(rss_mib(), 1),
        "baseline_rss_mib": round(baseline, 1),
        "added_rss_mib": round(rss_mib() - baseline, 1),
        "peak_local_disk_mib": round(disk / 2**20, 1),
        "seconds": round(seconds, 2),
        "part_size": part,
    }


def run(size_mib: int, part: str) -> list[dict]:
    from s3commit_sdk.sandbox import S3Sandbox

    rows = []
    for approach in APPROACHES:
        with S3Sandbox(bucket="bench") as sandbox:  # a fresh endpoint: moto keeps data in memory
            cmd = [
                sys.executable,
                "-m",
                "bench.magic_memory",
                "--worker",
                approach,
                "--size-mib",
                str(size_mib),
                "--part",
                part,
                "--dest",
                "s3://bench/big",
            ]
            env = {**os.environ, **sandbox.env}
            out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True)
            rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
            uploads = sandbox.client().list_multipart_uploads(Bucket="bench").get("Uploads", [])
            rows[-1]["pending_uploads_after"] = len(uploads)
        print(f"{approach:>10}: {rows[-1]}", flush=True)
    return rows


def report(rows: list[dict], size_mib: int, part: str) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    doc = {
        "benchmark": "magic_memory",
        "size_mib": size_mib,
        "part_size": part,
        "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]},
        "results": rows,
    }
    json_path = RESULTS / f"magic-memory-{stamp}.json"
    json_path.write_text(json.dumps(doc, indent=2))
    lines = [
        f"# Peak memory and local disk writing one {size_mib} MiB file (part size {part})",
        "",
        "| approach | file MiB | peak RSS MiB | RSS above baseline MiB | peak local disk MiB | s |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        lines.append(
            f"| {r['approach']} | {r['file_bytes'] / 2**20:.0f} | {r['peak_rss_mib']} | "
            f"{r['added_rss_mib']} | {r['peak_local_disk_mib']} | {r['seconds']} |"
        )
    lines += [
        "",
        "Command: `python -m bench.magic_memory --size-mib "
        f"{size_mib} --part {part}` (or `make bench-memory`).",
    ]
    md_path = RESULTS / f"magic-memory-{stamp}.md"
    md_path.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return md_path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size-mib", type=int, default=1024)
    parser.add_argument("--part", default="16M", help="multipart.size")
    parser.add_argument("--worker", choices=APPROACHES)
    parser.add_argument("--dest")
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.size_mib, args.dest, args.part)))
        return 0
    rows = run(args.size_mib, args.part)
    report(rows, args.size_mib, args.part)
    return 0 if all(r["pending_uploads_after"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
