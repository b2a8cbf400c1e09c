"""Runs the commit protocol: one task attempt on an executor, one job on the driver.

"A Zero-Rename Committer" ("The commit protocols of Hadoop and Spark"): the driver sets the job
up, every task attempt writes, then commits or aborts; the driver commits the job with the commit
messages of exactly one successful attempt per task, or aborts it. Engines only supply
``run_tasks``; the types these steps pass around are in :mod:`.protocol`. The driver's steps
(:func:`setup_job`, :func:`commit_job`, :func:`abort_job`, :func:`resume_commit`) are the one
driver every front end calls: ``write_committed`` (:func:`execute_job`), the data source and
``s3commit recover``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from typing import Any

import pyarrow as pa

from .aftermath import failure_of
from .attempt_handle import AttemptHandle
from .committers import make_committer
from .committers.s3_job import S3Committer
from .credentials import expired_credentials, expiry_told
from .errors import (
    NOTHING_VISIBLE,
    CleanupIncompleteError,
    InvalidArgumentError,
    S3CommitError,
    TaskFailedError,
    about_job,
    first_line,
    from_spark,
)
from .formats import Journal
from .interrupts import held_interrupts
from .paths import S3Location
from .progress import ProgressTracker, job_seconds
from .protocol import (
    Committer,
    JobContext,
    JobOutcome,
    TaskAttemptContext,
    TaskCommit,
    TaskSummary,
)
from .redaction import redacted_logs
from .streaming.commit import commit_batch, settle_earlier_attempt
from .writers import write_task_output

log = logging.getLogger(__name__)


def execute_task(
    job: JobContext,
    partition: int,
    attempt: int,
    batches: Iterable[pa.RecordBatch],
    schema: pa.Schema | None = None,
    handle: AttemptHandle | None = None,
) -> TaskCommit:
    """One task attempt: write, then commit, or abort on any failure (and re-raise).

    ``handle`` carries the attempt's progress reports to its engine and the engine's
    cancellation to the writers (none: no reports, never cancelled). Engines that run it in
    another process send the result's :meth:`~TaskCommit.encode`. Its logs are redacted and
    its typed errors told their destination and job as on the driver (:func:`driving`): on
    Spark it runs in a Python worker, and its error reaches the driver as text.
    """
    with driving(job):
        return _attempt(job, partition, attempt, batches, schema, handle)


def _attempt(
    job: JobContext,
    partition: int,
    attempt: int,
    batches: Iterable[pa.RecordBatch],
    schema: pa.Schema | None,
    handle: AttemptHandle | None,
) -> TaskCommit:
    started = time.monotonic()
    task = TaskAttemptContext(job, partition, attempt)
    committer = make_committer(job)
    sink = committer.setup_task(task)
    try:
        files = write_task_output(job, task, batches, sink, schema, handle)
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


# -- the driver: every front end (write_committed, the data source, s3commit recover) ---------
@contextmanager
def driving(job: JobContext) -> Iterator[None]:
    """A driver step of ``job``: credentials kept out of its logs, and its typed errors told
    the destination and job they are about (errors raised below the job know less of it)."""
    with (
        about_job(job.location.url(), job.job_id),
        redacted_logs(job.settings.secret_key, job.settings.session_token),
    ):
        yield


def setup_job(job: JobContext) -> Committer:
    """Job setup on the driver; returns the committer that commits or aborts the job."""
    committer = make_committer(job)
    with driving(job):
        _set_up(committer)
    return committer


def _set_up(committer: Committer) -> None:
    """The committer's job setup: nothing of the job is uploaded before it ends, so whatever
    fails in it left nothing visible."""
    job = committer.job
    with about_job(job.location.url(), job.job_id, NOTHING_VISIBLE):
        committer.setup_job()


def commit_job(
    job: JobContext,
    messages: list[TaskCommit],
    phases: dict[str, float],
    committer: Committer | None = None,
) -> JobOutcome:
    """Job commit with the winning attempts' messages; on failure the committer has aborted,
    rolled back or kept its journal, as its stages say, and the error is typed."""
    committer = committer or make_committer(job)
    with driving(job), expiry_told(job, "job commit"):
        return _commit(committer, messages, phases)


def _commit(committer: Committer, messages: list[TaskCommit], phases: dict[str, float]):
    """Job commit; a micro-batch's is idempotent per batch (:mod:`.streaming.commit`)."""
    if committer.job.stream is None:
        return committer.commit_job(messages, phases)
    return commit_batch(committer, messages, phases)


def abort_job(
    job: JobContext, messages: list[TaskCommit], committer: Committer | None = None
) -> None:
    """Job abort: this job's uploads (found by its UUID too) and hidden files removed."""
    committer = committer or make_committer(job)
    with driving(job):
        committer.abort_job(messages)


def resume_commit(job: JobContext, journal: Journal) -> JobOutcome:
    """Finish the commit a dead driver's journal describes, with the same stages from
    completion on: parallel, verified, with the same ``_SUCCESS`` (``s3commit recover``)."""
    committer = make_committer(job)
    if not isinstance(committer, S3Committer):
        raise InvalidArgumentError(f"committer {job.committer!r} keeps no commit journal")
    with driving(job):
        return committer.commit_job([], {}, resume=journal)


def execute_job(
    job: JobContext,
    run_tasks: RunTasks,
    progress: ProgressTracker | None = None,
    before: Mapping[str, float] | None = None,
) -> JobOutcome:
    """Set up, run every task through the engine, then commit, or abort and raise typed.

    ``before``: phases the write spent before job setup (``prepare_input``: pandas to Arrow),
    timed into ``_SUCCESS`` with the job's own."""

    tracker = progress or ProgressTracker(None)
    try:
        with driving(job):
            outcome = _execute(job, run_tasks, tracker, make_committer(job), dict(before or {}))
    except BaseException as exc:
        if tracker.active:  # one listing of what the job left, for those who watch
            tracker.failed(failure_of(exc, job))
        raise
    tracker.update(
        phase="done",
        message=f"{len(outcome.files)} files committed",
        elapsed_s=job_seconds(outcome.phases),
    )
    return outcome


def _execute(
    job: JobContext,
    run_tasks: RunTasks,
    tracker: ProgressTracker,
    committer,
    phases: dict[str, float],
):
    if job.stream is not None:  # a replayed micro-batch: no task runs again
        settled = settle_earlier_attempt(committer)
        if settled is not None:
            return settled
    started = time.monotonic()
    tracker.update(phase="setup")
    _set_up(committer)
    phases["job_setup"] = time.monotonic() - started
    messages: list[TaskCommit] = []
    holding = ExitStack()  # from the tasks' end to the commit's: see .interrupts
    try:
        mark = time.monotonic()
        tracker.update(phase="writing")
        messages = run_tasks(job, tracker)
        phases["tasks"] = time.monotonic() - mark
        phases.update(split_task_phase(messages, phases["tasks"]))
        holding.enter_context(held_interrupts(_committed_note(job)))  # last: nothing raises after
    except BaseException as exc:
        left: CleanupIncompleteError | None = None
        aborted = False
        try:
            committer.abort_job(messages)
            aborted = True
        except CleanupIncompleteError as error:  # out of retries: it names what is left
            left = error
        except Exception:
            log.exception("aborting job %s failed; pending uploads may remain", job.job_id)
        if isinstance(exc, KeyboardInterrupt):
            exc.add_note(_interrupted_note(job, aborted))
        typed = exc if isinstance(exc, S3CommitError) else from_spark(exc)
        if typed is None and isinstance(exc, Exception):
            typed = TaskFailedError(
                f"job {job.job_id} failed in a task and was aborted; nothing became visible "
                f"at {job.location.url()}. Cause: {first_line(exc)}. Fix the cause and run the "
                "write again.",
                **committer.error_fields(NOTHING_VISIBLE),
            )
        if typed is not None:  # a task failed: no upload of the job was completed
            typed.visible = typed.visible or NOTHING_VISIBLE
        if left is not None:
            left.tell(typed if typed is not None else exc)
        expired = None if typed is None else expired_credentials(typed, job, "tasks")
        if expired is not None:
            raise expired from typed
        if typed is None or typed is exc:
            raise
        raise typed from exc
    # a Ctrl-C held now is raised by the commit's first stage: it aborts the job
    with holding, expiry_told(job, "job commit"):
        tracker.update(phase="job commit")  # a micro-batch settled its earlier attempt above
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


def _committed_note(job: JobContext) -> str:
    """What an interrupt held until the end of job commit leaves: the committed job."""
    return (
        f"s3commit: job {job.job_id} was interrupted as its commit ended and committed all "
        f"the same: its files are visible at {job.location.url()}."
    )


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
