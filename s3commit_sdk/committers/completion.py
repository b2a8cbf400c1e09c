"""Job commit's completions: from the driver's threads, or from several worker processes.

"S3A Committers: Architecture and Implementation" ("Commit logic"): job commit completes the
uploads in parallel, O(files / threads). Threads suffice while the store's answers are what
they wait on; but each completion also costs the client about 1 ms of CPU in botocore, and a
process's threads share one core (the GIL), so one process tops out near 1,000 completions/s
however many threads it runs. ``commit.processes`` > 1 hands slices of the uploads to that many
worker processes, each with its own store and ``threads`` threads (DESIGN: "Job commit at
100,000 files").

Either way, what has been *sent* is known exactly, because a completion that was sent may have
made its file visible whatever its answer said and a rollback must delete it: the threads add
each upload to ``run.sent`` before sending it; a worker process sets the upload's flag in
memory shared with the driver before sending it, so even a worker that was killed leaves the
truth behind.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import signal
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from ..errors import CommitError, StoreError
from ..formats import PendingUpload
from ..store import S3Settings, S3Store, open_store

if TYPE_CHECKING:
    from .commit_run import CommitRun

#: A completion's error codes meaning "this upload is gone": maybe our own retried completion.
_GONE_UPLOAD = {"NoSuchUpload", "NoSuchKey", "404"}
#: uploads handed to a worker process at a time: small enough to stop soon after a failure
SLICE = 250

#: (upload, what went wrong): the first failure stops every other completion; no upload when a
#: worker process died (which of its completions were sent is in its flags, not in an answer)
Failures = list[tuple[PendingUpload | None, BaseException]]


def complete_upload(store: S3Store, commit: PendingUpload) -> str | None:
    """The completion's answered ETag; None when a retry found the upload gone.

    A retried completion whose first attempt had landed is told the upload is gone:
    verification decides whether the object is ours.
    """
    try:
        return store.complete(
            commit.bucket,
            commit.destinationKey,
            commit.uploadId,
            commit.etags,
            commit.checksumAlgorithm,
            commit.checksums,
        )
    except StoreError as exc:
        if exc.code not in _GONE_UPLOAD:
            raise
        return None


# -- threads taking the next upload: the driver's, and each worker process's -----------------
def _send_each(
    store: S3Store,
    threads: int,
    uploads: Sequence[PendingUpload],
    first_index: int,
    mark_sent: Callable[[int, PendingUpload], None],
    answered: list[tuple[int, str | None]],
    failures: list[tuple[int, BaseException]],
    halted: Callable[[], bool],
) -> None:
    """``threads`` threads take the next upload until none is left, the first failure or
    ``halted()``; each is marked sent before it is sent, and known by its index (counted from
    ``first_index``). One future per thread, not per file."""
    stop = threading.Event()
    lock = threading.Lock()
    pending = enumerate(uploads, first_index)

    def worker() -> None:
        while not (stop.is_set() or halted()):
            with lock:
                item = next(pending, None)
                if item is None:
                    return
                mark_sent(*item)
            index, commit = item
            try:
                answer = complete_upload(store, commit)
                with lock:
                    answered.append((index, answer))
            except BaseException as exc:
                failures.append((index, exc))
                stop.set()

    count = min(threads, len(uploads))
    pool = ThreadPoolExecutor(max(count, 1), "s3commit-complete")
    try:
        for future in [pool.submit(worker) for _ in range(count)]:
            future.result()
    finally:  # Ctrl-C too: stop, and wait only for completions already sent
        stop.set()
        pool.shutdown(wait=True, cancel_futures=True)


def complete_in_threads(
    run: CommitRun, todo: list[PendingUpload], interrupted: Callable[[], bool]
) -> Failures:
    """The driver's ``threads`` threads complete ``todo``; a held Ctrl-C sends no more."""
    answered: list[tuple[int, str | None]] = []
    failures: list[tuple[int, BaseException]] = []
    try:
        _send_each(
            run.store,
            run.job.options.threads,
            todo,
            0,
            lambda _, commit: run.sent.append(commit),
            answered,
            failures,
            interrupted,
        )
    finally:
        run.answered += [(todo[index], answer) for index, answer in answered]
    return [(todo[index], exc) for index, exc in failures]


# -- worker processes --------------------------------------------------------------------------
def complete_in_processes(
    run: CommitRun, todo: list[PendingUpload], interrupted: Callable[[], bool]
) -> Failures:
    """Slices of ``todo`` completed by ``commit.processes`` worker processes ("spawn": the
    driver may hold a JVM and threads, which a fork would copy half-alive).

    The processes are our own, not a pool's: when one dies or fails the others are told to
    stop and are waited for, so every completion they sent has landed (or failed) before the
    rollback looks; a pool would kill them with requests in flight.

    Nothing the driver waits on can be held by a worker: a worker killed while holding a
    lock (an ``Event``'s, a shared ``Queue``'s) would hang the driver, or the other workers,
    for ever. So the stop signal is a lock-free shared byte, and each worker answers on a
    pipe of its own, whose end the driver sees when the worker exits however it died.
    """
    options = run.job.options
    context = multiprocessing.get_context("spawn")
    stop = context.RawValue("b", 0)  # 1: take no more uploads
    flags = context.RawArray("b", len(todo))  # 1: sent (or about to be), by index in todo
    slices = [(start, todo[start : start + SLICE]) for start in range(0, len(todo), SLICE)]
    count = min(options.commit_processes, len(slices))
    pipes = [context.Pipe(duplex=False) for _ in range(count)]
    workers = [
        context.Process(
            target=_work,
            args=(run.job.settings, options.threads, slices[n::count], flags, stop, writer),
            name=f"s3commit-complete-{n}",
            daemon=True,
        )
        for n, (_, writer) in enumerate(pipes)
    ]
    readers = [reader for reader, _ in pipes]
    failures: Failures = []
    try:
        try:
            for worker in workers:
                worker.start()
        finally:  # the driver's copies: a reader sees its end only once every writer is closed
            for _, writer in pipes:
                writer.close()
        failures = _gather(run, todo, len(slices), workers, readers, interrupted)
    finally:  # Ctrl-C too: stop the workers, and wait for the completions they sent
        stop.value = 1
        failures += _drain(run, todo, workers, readers)
        run.sent += [commit for index, commit in enumerate(todo) if flags[index]]
    return failures


def _reports(readers: list[Any]) -> list[tuple]:
    """The reports ready within a moment; a reader whose worker has exited is closed and
    dropped from ``readers``."""
    reports = []
    for reader in multiprocessing.connection.wait(readers, timeout=0.2):
        try:
            reports.append(reader.recv())
        except EOFError:  # the worker exited (or died, maybe mid-report)
            reader.close()
            readers.remove(reader)
    return reports


def _gather(
    run: CommitRun,
    todo: list[PendingUpload],
    slices: int,
    workers: list[Any],
    readers: list[Any],
    interrupted: Callable[[], bool],
) -> Failures:
    """Every slice's answers, until the first failure, a dead worker or a held interrupt."""
    while slices:
        reports = _reports(readers)
        slices -= len(reports)
        failures = [failure for report in reports for failure in _record(run, todo, report)]
        if failures:
            return failures
        dead = [w for w in workers if w.exitcode not in (None, 0)]
        if dead:
            return [(None, _died(dead[0]))]
        if not reports and interrupted():
            return []
    return []


def _drain(
    run: CommitRun, todo: list[PendingUpload], workers: list[Any], readers: list[Any]
) -> Failures:
    """Wait for every worker to end, taking what they still report (a pipe must be read for
    its writer to go on)."""
    failures: Failures = []
    while readers:
        for report in _reports(readers):
            failures += _record(run, todo, report)
    for worker in workers:
        worker.join()
    return failures


def _record(run: CommitRun, todo: list[PendingUpload], report: tuple) -> Failures:
    """A slice's answers into ``run.answered``; its failures, as errors of the driver."""
    answered, errors = report
    run.answered += [(todo[index], answer) for index, answer in answered]
    return [(todo[index], StoreError(text)) for index, text in errors]


def _died(worker: Any) -> CommitError:
    return CommitError(f"the completion worker {worker.name} died (exit code {worker.exitcode})")


def _work(
    settings: S3Settings,
    threads: int,
    slices: list[tuple[int, list[PendingUpload]]],
    flags: Any,
    stop: Any,
    answers: Any,
) -> None:
    """A worker process: its slices, one after the other, each with ``threads`` threads; every
    upload flagged before it is sent. Ctrl-C goes to the driver, which sets ``stop``."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    store = open_store(settings, threads=threads)
    for start, commits in slices:
        if stop.value:
            return
        answered: list[tuple[int, str | None]] = []
        failures: list[tuple[int, BaseException]] = []
        _send_each(
            store,
            threads,
            commits,
            start,
            lambda index, _: flags.__setitem__(index, 1),
            answered,
            failures,
            lambda: bool(stop.value),
        )
        # errors go as text: not every error pickles
        answers.send((answered, [(index, str(exc)) for index, exc in failures]))
