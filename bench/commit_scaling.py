"""Scenario 2: job commit time and driver memory by file count, threads and bytes.

Task output is prepared without Spark: one multipart upload per file whose single part is a
server-side copy of a source object (so 4 GiB of parts cost no client bandwidth), grouped into
pendingsets as tasks would have returned them. Then the committer's real job commit runs on them,
timed alone; ``RECOVERED`` times ``s3commit recover`` finishing the same job commit killed after
its journal (it must cost no more than 1.2x the uninterrupted one). Driver memory is the Python
heap peak (tracemalloc) of a separate, untimed job commit of the same size, so tracing does not
slow the timed ones; every timed run also reports its RSS growth per file (``VmHWM`` reset
before it), which costs nothing and works at any size.
"""

from __future__ import annotations

import time
import tracemalloc
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from s3commit_sdk.committers import make_committer
from s3commit_sdk.committers.commit_run import CommitRun
from s3commit_sdk.committers.s3_job import S3Committer
from s3commit_sdk.formats import PendingSet, PendingUpload
from s3commit_sdk.protocol import JobContext, TaskCommit, TaskSummary
from s3commit_sdk.recovery import recover
from s3commit_sdk.stages import run_stages

from .harness import BUCKET, MIB, Endpoint, Record, Run, Sample, aggregate

TASKS = 16
SOURCE_KEY = "scaling-source.bin"


def prepare(endpoint: Endpoint, job: JobContext, files: int, file_bytes: int) -> list[TaskCommit]:
    """Pending uploads for ``files`` files of ``file_bytes`` each; the tasks' messages."""
    client = endpoint.client(threads=32)
    client.put_object(Bucket=BUCKET, Key=SOURCE_KEY, Body=b"\0" * file_bytes)
    location = job.location

    def one(index: int) -> PendingUpload:
        key = location.key(f"part-{index:05d}-{job.job_id}.c000.snappy.parquet")
        upload = client.create_multipart_upload(Bucket=BUCKET, Key=key)["UploadId"]
        part = client.upload_part_copy(
            Bucket=BUCKET,
            Key=key,
            UploadId=upload,
            PartNumber=1,
            CopySource={"Bucket": BUCKET, "Key": SOURCE_KEY},
        )
        return PendingUpload(
            uri=location.url(key),
            bucket=BUCKET,
            destinationKey=key,
            uploadId=upload,
            etags=[part["CopyPartResult"]["ETag"]],
            length=file_bytes,
            rows=1,
            partition={},
            jobId=job.job_id,
            taskId=f"task_{index % TASKS:05d}",
        )

    with ThreadPoolExecutor(32) as pool:
        commits = list(pool.map(one, range(files)))
    client.delete_object(Bucket=BUCKET, Key=SOURCE_KEY)
    messages = []
    for task in range(TASKS):
        task_id = f"task_{task:05d}"
        mine = [c for c in commits if c.taskId == task_id]
        if mine:
            attempt = f"{task_id}_0"
            summary = TaskSummary(len(mine), len(mine) * file_bytes, len(mine))
            payload = PendingSet(job.job_id, task_id, attempt, mine).to_dict()
            messages.append(TaskCommit(task_id, attempt, summary, payload))
    return messages


RAW = "raw boto3 complete"
#: the same job commit, killed after its journal and finished by ``s3commit recover``
RECOVERED = "directory, recovered"


def leave_unfinished(worker: S3Committer, messages: list[TaskCommit]) -> None:
    """The state a driver killed right after writing its journal leaves: the tasks' saved
    pendingsets, the marker and the journal, every upload still pending."""
    for message in messages:
        worker.save_pendingset(PendingSet.from_dict(message.payload))
    before_completion = worker.stages[: [s.name for s in worker.stages].index("complete")]
    run_stages(CommitRun(worker, messages, {}), before_completion, {}, worker.job.job_id)


def complete_raw(endpoint: Endpoint, messages: list[TaskCommit], threads: int) -> int:
    """The store's limit for a job commit: only the completions, from a plain boto3 pool."""
    client = endpoint.client(threads=threads)
    commits = [c for m in messages for c in PendingSet.from_dict(m.payload).commits]

    def one(commit: PendingUpload) -> None:
        parts = [{"PartNumber": i + 1, "ETag": e} for i, e in enumerate(commit.etags)]
        client.complete_multipart_upload(
            Bucket=BUCKET,
            Key=commit.destinationKey,
            UploadId=commit.uploadId,
            MultipartUpload={"Parts": parts},
        )

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(one, commits))
    return len(commits)


def list_once(endpoint: Endpoint, messages: list[TaskCommit]) -> float:
    """Seconds to list the committed keys' directory once (1000 keys a page): the least a job
    commit must add on a store whose completion answers carry no ETag (RGW), to check them."""
    keys = sorted(
        c.destinationKey for m in messages for c in PendingSet.from_dict(m.payload).commits
    )
    client = endpoint.client()
    prefix = keys[0].rsplit("/", 1)[0] + "/"
    started = time.monotonic()
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
    listed = sum(len(page.get("Contents", [])) for page in pages)
    if listed < len(keys):
        raise RuntimeError(f"listed {listed} of {len(keys)} committed keys")
    return time.monotonic() - started


def commit_once(
    endpoint: Endpoint, committer: str, files: int, file_bytes: int, threads: int, traced: bool
) -> dict[str, float]:
    endpoint.reset()
    driven = "directory" if committer in (RAW, RECOVERED) else committer
    job = JobContext.on_s3(f"{endpoint.url}/scaling", driven, {"threads": threads})
    worker = make_committer(job)
    worker.setup_job()
    messages = prepare(endpoint, job, files, file_bytes)
    if committer == RECOVERED:
        leave_unfinished(worker, messages)
    if traced:
        tracemalloc.start()
    rss_before = _reset_peak_rss()
    started = time.monotonic()
    if committer == RAW:
        committed = complete_raw(endpoint, messages, threads)
    elif committer == RECOVERED:
        report = recover(job.location.url(), {"threads": threads})
        committed = len(report.completed) + len(report.already_visible)
    else:
        committed = len(worker.commit_job(messages, {}).files)
    seconds = time.monotonic() - started
    rss_growth = _status_kib("VmHWM") - rss_before
    peak = tracemalloc.get_traced_memory()[1] if traced else 0
    tracemalloc.stop()
    if committed != files or endpoint.pending_uploads():
        raise RuntimeError(f"{committer}: {committed} of {files} files committed")
    # a traced run is slowed by the tracing: it gives memory only
    if traced:
        return {"driver_heap_peak_mib": peak / MIB, "driver_heap_kib_per_file": peak / 1024 / files}
    timed = {
        "job_commit_s": seconds,
        "completions_per_s": files / seconds,
        "driver_rss_kib_per_file": rss_growth / files,
    }
    if committer == RAW:
        timed["list_s"] = list_once(endpoint, messages)
    return timed


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def _reset_peak_rss() -> int:
    """This process's RSS in KiB, which its peak (VmHWM) is reset to: the growth a job commit
    causes is then its VmHWM afterwards minus this (the memory it needs beyond the tasks'
    messages, which the driver holds before job commit)."""
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")
    return _status_kib("VmRSS")


#: one timed job commit: (committer, files, bytes per file, threads)
Case = tuple[str, int, int, int]


def interleaved(
    endpoint: Endpoint,
    cases: list[Case],
    repeats: int,
    done: Callable[[Case, dict[str, dict[str, float]]], None],
) -> None:
    """Each case's timed commits, ``repeats`` rounds that each time every case once, in order:
    load from other work on the shared cores falls on all cases alike, so the ratios between
    them (ours against ``RAW``, 4 GiB against 1 GiB) compare. ``done`` takes each case's
    figures as soon as its last round is in: a 100,000-file case takes half an hour, and a run
    stopped in the next case keeps it."""
    samples: dict[Case, list[Sample]] = {case: [] for case in cases}
    for _ in range(repeats):
        for case in cases:
            committer, files, file_bytes, threads = case
            samples[case].append(
                commit_once(endpoint, committer, files, file_bytes, threads, traced=False)
            )
            if len(samples[case]) == repeats:
                done(case, aggregate(samples[case]))


#: a traced job commit needs its own prepared uploads; beyond this many files it costs too long
TRACED_MAX_FILES = 1000


def run_scaling(
    run: Run,
    endpoint: Endpoint,
    cases: tuple[tuple[str, int, tuple[int, ...]], ...],
    repeats: int,
    file_bytes: int = 64 * 1024,
) -> None:
    """Job commit time by file count and threads, small files (the cost is per file).

    ``cases``: (committer, files, thread counts). ``RAW`` as the committer times only the
    completions from a plain boto3 pool: the most any job commit could get out of this endpoint.
    Driver memory is measured for up to ``TRACED_MAX_FILES`` files, for the committers; the
    timed commits are :func:`interleaved`.
    """
    heaps = {
        (committer, files): aggregate(
            [commit_once(endpoint, committer, files, file_bytes, thread_counts[0], True)]
        )
        for committer, files, thread_counts in cases
        if files <= TRACED_MAX_FILES and committer not in (RAW, RECOVERED)  # ours, committing
    }

    def add(case: Case, metrics: dict[str, dict[str, float]]) -> None:
        committer, files, _, threads = case
        run.add(
            Record(
                "commit_scaling",
                {
                    "endpoint": endpoint.kind,
                    "committer": committer,
                    "files": files,
                    "threads": threads,
                },
                {**metrics, **heaps.get((committer, files), {})},
                {"file_bytes": file_bytes},
            )
        )

    interleaved(
        endpoint,
        [(c, files, file_bytes, threads) for c, files, counts in cases for threads in counts],
        repeats,
        add,
    )
    endpoint.reset()


def run_bytes(
    run: Run,
    endpoint: Endpoint,
    committer: str,
    files: int,
    totals_mib: tuple[int, ...],
    threads: int,
    repeats: int,
) -> None:
    """The same file count at different total bytes: commit time should not follow the bytes."""
    totals = {total * MIB // files: total for total in totals_mib}

    def add(case: Case, metrics: dict[str, dict[str, float]]) -> None:
        file_bytes = case[2]
        labels = {"endpoint": endpoint.kind, "committer": committer, "files": files}
        run.add(
            Record(
                "commit_bytes",
                {**labels, "total_mib": totals[file_bytes], "threads": threads},
                metrics,
                {"file_bytes": file_bytes},
            )
        )

    interleaved(endpoint, [(committer, files, size, threads) for size in totals], repeats, add)
    endpoint.reset()
