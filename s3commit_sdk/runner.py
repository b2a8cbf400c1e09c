"""Runs the commit protocol: one task attempt on an executor, one job on the driver.

Seed 003 ("The commit protocols of Hadoop and Spark"): the driver sets the job up, every task
attempt writes, then commits or aborts; the driver commits the job with the commit messages of
exactly one successful attempt per task, or aborts it. Engines only supply ``run_tasks``; the
types these steps pass around are in :mod:`.protocol`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

import pyarrow as pa

from .committers import make_committer
from .errors import (
    NOTHING_VISIBLE,
    S3CommitError,
    TaskFailedError,
    first_line,
    from_task_failure,
)
from .paths import S3Location
from .progress import ProgressTracker, job_seconds
from .protocol import JobContext, JobOutcome, TaskAttemptContext, TaskCommit, TaskSummary
from .redaction import redacted_logs
from .writers import write_task_output

log = logging.getLogger(__name__)


def execute_task(
    job: JobContext,
    partition: int,
    attempt: int,
    batches: Iterable[pa.RecordBatch],
    schema: pa.Schema | None = None,
) -> TaskCommit:
    """One task attempt: write, then commit, or abort on any failure (and re-raise).

    Engines that run it in another process send the result's :meth:`~TaskCommit.encode`. Its
    logs are redacted too: on Spark it runs in a Python worker, not the driver's process.
    """
    with redacted_logs(job.settings.secret_key, job.settings.session_token):
        return _attempt(job, partition, attempt, batches, schema)


def _attempt(
    job: JobContext,
    partition: int,
    attempt: int,
    batches: Iterable[pa.RecordBatch],
    schema: pa.Schema | None,
) -> TaskCommit:
    started = time.monotonic()
    task = TaskAttemptContext(job, partition, attempt)
    committer = make_committer(job)
    sink = committer.setup_task(task)
    try:
        files = write_task_output(job, task, batches, sink, schema)
        written = time.monotonic()
        payload = committer.commit_task(task, files)
        summary = TaskSummary(
            files=len(files),
            bytes=sum(f.size for f in files),
            rows=sum(f.rows for f in files),
            seconds=round(time.monotonic() - started, 3),
            write_seconds=round(written - started, 3),
        )
        return TaskCommit(task.task_id, task.attempt_id, summary, payload)
    except BaseException:
        _best_effort(committer.abort_task, task, what=f"aborting {task.attempt_id}")
        raise


#: an engine: runs every task and returns one decoded commit message per task
RunTasks = Callable[[JobContext, ProgressTracker], list[TaskCommit]]


def execute_job(
    job: JobContext, run_tasks: RunTasks, progress: ProgressTracker | None = None
) -> JobOutcome:
    """Set up, run every task through the engine, then commit, or abort and raise typed."""

    tracker = progress or ProgressTracker(None)
    try:
        with redacted_logs(job.settings.secret_key, job.settings.session_token):
            outcome = _execute(job, run_tasks, tracker, make_committer(job))
    except BaseException as exc:
        if isinstance(exc, S3CommitError):  # errors raised below the job know less of it
            exc.destination = exc.destination or job.location.url()
            exc.job_id = exc.job_id or job.job_id
        tracker.failed(exc, job)
        raise
    tracker.update(
        phase="done",
        message=f"{len(outcome.files)} files committed",
        elapsed_s=job_seconds(outcome.phases),
    )
    return outcome


def _execute(job: JobContext, run_tasks: RunTasks, tracker: ProgressTracker, committer):
    phases: dict[str, float] = {}
    started = time.monotonic()
    tracker.update(phase="setup")
    committer.setup_job()
    phases["job_setup"] = time.monotonic() - started
    messages: list[TaskCommit] = []
    try:
        mark = time.monotonic()
        tracker.update(phase="writing")
        messages = run_tasks(job, tracker)
        phases["tasks"] = time.monotonic() - mark
        phases.update(split_task_phase(messages, phases["tasks"]))
    except BaseException as exc:
        aborted = _best_effort(committer.abort_job, messages, what=f"aborting job {job.job_id}")
        if isinstance(exc, KeyboardInterrupt):
            exc.add_note(_interrupted_note(job, aborted))
        if isinstance(exc, S3CommitError):
            raise
        typed = from_task_failure(exc)
        if typed is not None:
            raise typed from exc
        if isinstance(exc, Exception):
            raise TaskFailedError(
                f"job {job.job_id} failed in a task and was aborted; nothing became visible "
                f"at {job.location.url()}. Cause: {first_line(exc)}. Fix the cause and run the "
                "write again.",
                **committer.error_fields(NOTHING_VISIBLE),
            ) from exc
        raise
    tracker.update(phase="job commit")
    return committer.commit_job(messages, phases)


def split_task_phase(messages: list[TaskCommit], wall: float) -> dict[str, float]:
    """The tasks phase's wall time, split into writing and task commit as the tasks spent it."""
    write = commit = 0.0
    for summary in (m.summary for m in messages):
        write += summary.write_seconds
        commit += max(summary.seconds - summary.write_seconds, 0.0)
    if write + commit <= 0:
        return {}
    return {
        "task_write": wall * write / (write + commit),
        "task_commit": wall * commit / (write + commit),
    }


def _best_effort(action: Callable[..., None], *args: Any, what: str) -> bool:
    """Run a cleanup while another error propagates: log its failure, never mask the cause."""
    try:
        action(*args)
    except Exception:
        log.exception("%s failed; pending uploads may remain (lifecycle rules clean them)", what)
        return False
    return True


def _interrupted_note(job: JobContext, aborted: bool) -> str:
    """What an interrupt before job commit did: no file was completed, so none is visible."""
    url = job.location.url()
    head = f"s3commit: job {job.job_id} was interrupted before its commit"
    if aborted:
        return f"{head} and was aborted: nothing of it is visible at {url}."
    failed = f"{head}; nothing of it is visible at {url}, but aborting it failed (logged above)"
    if not isinstance(job.location, S3Location):
        return f"{failed}."
    return f"{failed}: `s3commit uploads abort {url} --job {job.job_id}` removes its uploads."
