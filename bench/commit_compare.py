"""Job-commit cost of the rename committers vs the zero-rename ones, for one 200-file write.

On ``file://``: manifest vs classic v1 vs classic v2. On the local S3 endpoint: classic v1 vs
the directory committer, with the bytes each copies server-side (CopyObject requests x size).

    python -m bench.commit_compare        # or: make bench-commit
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from s3commit_sdk import write_committed
from s3commit_sdk.testing.sandbox import S3Sandbox

RESULTS = Path(__file__).parent / "results"
FILES = 200
REPEATS = 3


def data() -> pd.DataFrame:
    """200 files: 4 tasks x 10 partitions x 5 rolled files of 200 rows (~100 KiB each)."""
    rows = 4 * 10 * 5 * 200
    return pd.DataFrame(
        {
            "day": [f"d{i % 10}" for i in range(rows)],
            "payload": [os.urandom(512).hex() for _ in range(rows)],
        }
    ).sort_values("day", kind="stable")


def run(url: str, committer: str, options: dict) -> dict:
    frame = data()
    samples = []
    for _ in range(REPEATS):
        target = f"{url}/{committer}-{options.get('algorithm.version', '')}-{len(samples)}"
        result = write_committed(
            frame,
            target,
            committer=committer,
            partition_by=["day"],
            progress=False,
            options={"tasks": 4, "max_records_per_file": 200, **options},
        )
        assert len(result.files) == FILES, len(result.files)
        copies = result.requests.get("CopyObject", 0)
        samples.append(
            {
                "job_commit_s": result.phases["job_commit"],
                "tasks_s": result.phases["tasks"],
                "copied_bytes": copies * result.bytes // FILES,
                "requests": result.requests,
            }
        )
    commit = [s["job_commit_s"] for s in samples]
    return {
        "committer": committer
        + (f" v{options['algorithm.version']}" if "algorithm.version" in options else ""),
        "job_commit_s_median": round(statistics.median(commit), 3),
        "job_commit_s_min": round(min(commit), 3),
        "job_commit_s_max": round(max(commit), 3),
        "tasks_s_median": round(statistics.median(s["tasks_s"] for s in samples), 3),
        "copied_bytes": samples[0]["copied_bytes"],
        "copy_requests": samples[0]["requests"].get("CopyObject", 0),
    }


def main() -> int:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for committer, options in [
            ("manifest", {}),
            ("file", {"algorithm.version": 1}),
            ("file", {"algorithm.version": 2}),
        ]:
            rows.append({"store": "file://", **run(f"file://{tmp}", committer, options)})
            print(rows[-1], flush=True)
    with S3Sandbox(bucket="bench"):
        for committer, options in [("file", {"algorithm.version": 1}), ("directory", {})]:
            rows.append({"store": "s3 (moto)", **run("s3://bench/out", committer, options)})
            print(rows[-1], flush=True)
    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    (RESULTS / f"commit-compare-{stamp}.json").write_text(json.dumps(rows, indent=2))
    lines = [
        f"# Job commit of one {FILES}-file partitioned write (median of {REPEATS}, min-max)",
        "",
        "| store | committer | job commit s | tasks s | CopyObject | bytes copied |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        lines.append(
            f"| {r['store']} | {r['committer']} | {r['job_commit_s_median']} "
            f"({r['job_commit_s_min']}-{r['job_commit_s_max']}) | {r['tasks_s_median']} | "
            f"{r['copy_requests']} | {r['copied_bytes']} |"
        )
    lines += [
        "",
        "moto copies in memory; real S3 copies at a few MB/s"
        ' ("A Zero-Rename Committer", "Results").',
    ]
    (RESULTS / f"commit-compare-{stamp}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
