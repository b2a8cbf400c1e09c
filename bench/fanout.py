"""Scenario "fanout": job commit fanned out to executors, simulated (docs/DESIGN.md, "Job commit
fanned out to executors").

Each case prepares ``files`` pending uploads as ``commit_scaling`` does (one task's pendingset
per slice), then completes them from ``processes`` worker processes of ``threads`` threads, each
a stand-in for an executor completing its slices of the journal with plain boto3
(``commit_scaling.complete_raw``). The fault proxy holds every ``CompleteMultipartUpload``
``latency_ms`` before forwarding it: a store whose completions take that long, as large objects'
do on AWS; at 0 ms the workers talk to the endpoint directly, so CPU is the bound. Each case
records completions/s, CPU per completion of the workers, the proxy (this process) and the
server, the endpoint's own round trip for one completion (timed one at a time before the case),
and beside them the scaling law's prediction from those figures:

    completions/s = min(processes x threads / (latency + round trip),
                        processes / client CPU per completion,
                        cores / CPU per completion of everything on this machine)

(the last term is this machine's: workers, proxy and server share its cores; a per-prefix limit
such as S3's 3,500 writes/s is not emulated). Every case checks that every key is listed and
no upload is left pending.
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import threading
import time
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

from s3commit_sdk.protocol import JobContext, TaskCommit
from s3commit_sdk.testing.faultproxy import delay

from .commit_scaling import TASKS, complete_raw, prepare
from .harness import (
    BUCKET,
    CpuWindow,
    Endpoint,
    Record,
    Run,
    aggregate,
    client_config,
    proxied,
    server_pids,
)

SCENARIO = "fanout"
OPERATION = "CompleteMultipartUpload"
FILE_BYTES = 1024
#: how long the workers may take to start, and for their slices, before the case has hung
START_TIMEOUT_S = 120
SLICE_TIMEOUT_S = 600
#: completions timed one at a time for the store's own round trip, per case
PROBE_FILES = 16
#: the cores this process may run on: workers, proxy and server share them
CORES = len(os.sched_getaffinity(0))


@dataclass(frozen=True)
class SliceStore:
    """What ``complete_raw`` needs of an endpoint, rebuilt in a worker process: clients on
    ``url`` (the proxy's, or the endpoint's own), keys from the inherited environment."""

    url: str

    def client(self, threads: int = 10) -> Any:
        import boto3

        return boto3.client("s3", endpoint_url=self.url, config=client_config(threads))


def complete_slice(
    url: str, messages: list[TaskCommit], threads: int, start: Any, results: Any
) -> None:
    """One executor's share: its pendingsets' uploads completed from ``threads`` threads.

    The client is made once before the start barrier, so botocore's models are loaded before
    the clock runs (an executor's Python worker has them loaded too).
    """
    store = SliceStore(url)
    try:
        store.client(threads)
        start.wait()
        cpu, began = time.process_time(), time.monotonic()
        done = complete_raw(store, messages, threads)
        cpu, seconds = time.process_time() - cpu, time.monotonic() - began
        results.put({"completed": done, "cpu_s": cpu, "seconds": seconds})
    except Exception as error:  # the parent raises it: a worker's traceback dies with it
        start.abort()
        results.put({"error": f"{type(error).__name__}: {error}"})


def slices(messages: list[TaskCommit], processes: int) -> list[list[TaskCommit]]:
    """The tasks' pendingsets dealt round-robin to the workers: whole pendingsets, as the
    driver would hand journal slices to executor tasks."""
    return [messages[i::processes] for i in range(processes)]


def fan_out(url: str, messages: list[TaskCommit], processes: int, threads: int) -> dict[str, Any]:
    """Complete ``messages`` from ``processes`` workers. From their common start to the last
    report: wall seconds, and the CPU seconds of this process (the proxy's threads: the main
    thread only waits) and of the server; the workers' reports."""
    context = multiprocessing.get_context("spawn")  # this process runs proxy threads: no fork
    start, results = context.Barrier(processes + 1), context.Queue()
    workers = [
        context.Process(target=complete_slice, args=(url, share, threads, start, results))
        for share in slices(messages, processes)
    ]
    for worker in workers:
        worker.start()
    try:
        with suppress(threading.BrokenBarrierError):  # a worker failed: its report says why
            start.wait(timeout=START_TIMEOUT_S)
        began = time.monotonic()
        # read at its ends only: no sampler thread in the window of own_cpu
        with CpuWindow({"server": (server_pids(), [])}, interval=None) as server_cpu:
            own_cpu = time.process_time()
            reports = collect(results, workers)
            seconds = time.monotonic() - began
            own_cpu = time.process_time() - own_cpu
    finally:
        for worker in workers:
            worker.join(timeout=START_TIMEOUT_S)
            if worker.is_alive():
                worker.kill()
                worker.join()
    failed = [r["error"] for r in reports if "error" in r]
    if failed:
        raise RuntimeError(f"a worker failed: {failed[0]}")
    return {
        "seconds": seconds,
        "proxy_cpu_s": own_cpu,
        "server_cpu_s": server_cpu.seconds["server"],
        "reports": reports,
    }


def collect(results: Any, workers: list[Any]) -> list[dict[str, Any]]:
    """One report per worker; a worker that died without one (killed, or it could not start)
    fails the case at once rather than after the slice timeout."""
    reports: list[dict[str, Any]] = []
    deadline = time.monotonic() + SLICE_TIMEOUT_S
    while len(reports) < len(workers):
        try:
            reports.append(results.get(timeout=1))
        except queue.Empty:
            dead = [w.exitcode for w in workers if w.exitcode not in (None, 0)]
            if dead or time.monotonic() > deadline:
                raise RuntimeError(f"a worker ended without a report (exit codes {dead})") from None
    return reports


def law(
    processes: int,
    threads: int,
    round_trip_ms: float,
    client_cpu_ms: float,
    total_cpu_ms: float,
    cores: int,
) -> dict[str, float]:
    """The scaling law's terms (completions/s) and their minimum, the prediction. CPU figures
    are per completion; ``round_trip_ms``: one completion's, the emulated latency included."""
    terms = {
        "law_latency_per_s": processes * threads * 1000 / round_trip_ms,
        "law_client_cpu_per_s": processes * 1000 / client_cpu_ms,
        "law_machine_cpu_per_s": cores * 1000 / total_cpu_ms,
    }
    return {**terms, "law_predicted_per_s": min(terms.values())}


def bound_of(terms: dict[str, float]) -> str:
    """Which term of the law is the smallest: the predicted bound."""
    named = {k: v for k, v in terms.items() if k != "law_predicted_per_s"}
    return min(named, key=named.get).removeprefix("law_").removesuffix("_per_s")


def check_committed(endpoint: Endpoint, job: JobContext, files: int) -> None:
    """Every upload completed (listed under the destination) and none left pending."""
    client = endpoint.client()
    pages = client.get_paginator("list_objects_v2").paginate(
        Bucket=BUCKET, Prefix=job.location.dir_prefix
    )
    listed = sum(len(page.get("Contents", [])) for page in pages)
    pending = endpoint.pending_uploads()
    if listed != files or pending:
        raise RuntimeError(f"{listed} of {files} files listed, {pending} uploads pending")


def store_round_trip_ms(endpoint: Endpoint) -> float:
    """One completion's round trip on the endpoint itself, one at a time (client CPU and the
    store's work): what the emulated latency adds to."""
    job = JobContext.on_s3(f"{endpoint.url}/probe", "directory", {})
    messages = prepare(endpoint, job, PROBE_FILES, FILE_BYTES)
    began = time.monotonic()
    complete_raw(endpoint, messages, 1)
    return (time.monotonic() - began) * 1000 / PROBE_FILES


def fan_out_once(
    endpoint: Endpoint, files: int, processes: int, threads: int, latency_ms: float
) -> dict[str, float]:
    """One case from an empty bucket: prepare, complete through the proxy, check, measure."""
    endpoint.reset()
    job = JobContext.on_s3(f"{endpoint.url}/fanout", "directory", {})
    messages = prepare(endpoint, job, files, FILE_BYTES)
    store_ms = store_round_trip_ms(endpoint)
    rules = [delay(latency_ms, OPERATION)] if latency_ms else []
    with proxied(endpoint, rules) as (proxy, proxy_url):
        done = fan_out(proxy_url if latency_ms else endpoint.endpoint, messages, processes, threads)
        if latency_ms and proxy.counts.get(OPERATION, 0) < files:
            raise RuntimeError(f"only {proxy.counts.get(OPERATION, 0)} completions were delayed")
    completed = sum(r["completed"] for r in done["reports"])
    if completed != files:
        raise RuntimeError(f"{completed} of {files} completions answered")
    check_committed(endpoint, job, files)
    client_cpu_s = sum(r["cpu_s"] for r in done["reports"])
    per_ms = {
        "client_cpu_ms_per_completion": client_cpu_s * 1000 / files,
        "proxy_cpu_ms_per_completion": done["proxy_cpu_s"] * 1000 / files,
        "server_cpu_ms_per_completion": done["server_cpu_s"] * 1000 / files,
    }
    return {
        "seconds": done["seconds"],
        "completions_per_s": files / done["seconds"],
        # Little's law: what one completion took, all threads busy throughout
        "completion_ms_observed": processes * threads * done["seconds"] * 1000 / files,
        # the CPU the case got: below the cores, other work on the machine took the rest
        "cores_used": sum(per_ms.values()) * files / done["seconds"] / 1000,
        "client_cpu_s_per_process": max(r["cpu_s"] for r in done["reports"]),
        "store_round_trip_ms": store_ms,
        **per_ms,
        **law(
            processes,
            threads,
            latency_ms + store_ms,
            per_ms["client_cpu_ms_per_completion"],
            sum(per_ms.values()),
            CORES,
        ),
    }


def run_fanout(
    run: Run,
    endpoint: Endpoint,
    files: int,
    cases: tuple[tuple[float, tuple[int, ...], tuple[int, ...]], ...],
) -> None:
    """``files`` completions per case; ``cases``: (latency ms, process counts, thread counts).

    Process counts must divide the tasks' count (``commit_scaling.TASKS``) for equal slices.
    """
    for latency_ms, process_counts, thread_counts in cases:
        for processes in process_counts:
            if TASKS % processes:
                raise ValueError(f"{processes} processes do not divide {TASKS} pendingsets")
            for threads in thread_counts:
                sample = fan_out_once(endpoint, files, processes, threads, latency_ms)
                terms = {k: v for k, v in sample.items() if k.startswith("law_")}
                run.add(
                    Record(
                        SCENARIO,
                        {
                            "endpoint": endpoint.kind,
                            "files": files,
                            "latency_ms": latency_ms,
                            "processes": processes,
                            "threads": threads,
                        },
                        aggregate([sample]),
                        {"bound": bound_of(terms), "cores": CORES},
                    )
                )
    endpoint.reset()


def case_name(record: Record) -> str:
    """``<processes>x<threads>, <latency> ms``: a case as the report names it."""
    labels = record.labels
    return f"{labels['processes']}x{labels['threads']}, {labels['latency_ms']:g} ms"


def summary(records: list[Record]) -> str:
    """The headline: at each latency, the most threads per process, completions/s measured and
    (in brackets) as the law predicts them."""
    most = {}
    for r in records:
        latency = r.labels["latency_ms"]
        most[latency] = max(most.get(latency, 0), r.labels["threads"])
    return ", ".join(
        f"{case_name(r)}: {r.median('completions_per_s'):.0f}/s "
        f"(law {r.median('law_predicted_per_s'):.0f}, {r.notes['bound']})"
        for r in records
        if r.labels["threads"] == most[r.labels["latency_ms"]]
    )
