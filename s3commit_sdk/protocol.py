"""The commit protocol, independent of the engine that runs the tasks.

Seed 003 ("The commit protocols of Hadoop and Spark"): the driver sets the job up, every task
attempt writes, then commits or aborts; the driver commits the job with the commit messages of
exactly one successful attempt per task, or aborts it. Engines only supply ``run_tasks``.
"""

from __future__ import annotations

import logging
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from .errors import (
    NOTHING_VISIBLE,
    S3CommitError,
    TaskFailedError,
    first_line,
    from_task_failure,
)
from .formats import TaskSummary
from .options import CommitOptions, resolve_options
from .paths import S3Location, parse_s3_url
from .progress import ProgressTracker, job_seconds
from .redaction import redacted_logs
from .store import S3Settings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class JobContext:
    """Everything a task needs to know about its job; pickled to the executors."""

    location: S3Location
    committer: str
    conflict_mode: str
    partition_by: tuple[str, ...]
    format: str
    options: CommitOptions
    settings: S3Settings
    job_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    job_id_source: str = "generated"
    #: the table's schema for a table format (Delta's schemaString); None for plain files
    table_schema: str | None = None

    @classmethod
    def on_s3(
        cls,
        url: str,
        committer: str,
        options: dict[str, Any] | None = None,
        conflict_mode: str = "append",
        partition_by: tuple[str, ...] = (),
        **fields: Any,
    ) -> JobContext:
        """A Parquet job on ``url`` with options resolved as ``write_committed`` resolves them.

        For code that drives the protocol itself (tests, benchmarks) without a DataFrame.
        """
        resolved = resolve_options(options)
        return cls(
            location=parse_s3_url(url),
            committer=committer,
            conflict_mode=conflict_mode,
            partition_by=partition_by,
            format="parquet",
            options=resolved,
            settings=S3Settings.resolve(resolved),
            **fields,
        )


@dataclass(frozen=True)
class TaskAttemptContext:
    job: JobContext
    partition: int
    attempt: int

    @property
    def task_id(self) -> str:
        return f"task_{self.partition:05d}"

    @property
    def attempt_id(self) -> str:
        return f"{self.task_id}_{self.attempt}"


@dataclass(frozen=True)
class WrittenFile:
    """One file a task wrote: path relative to the destination, rows and partition values."""

    relpath: str
    rows: int
    size: int
    partition: dict[str, str | None]
    #: a Parquet file's footer (pyarrow FileMetaData): the statistics a table format records
    footer: Any = field(default=None, compare=False, repr=False)


@dataclass
class JobOutcome:
    """What job commit produced, for the result and the ``_SUCCESS`` report."""

    files: list[dict[str, Any]]
    success: dict[str, Any]
    phases: dict[str, float]
    requests: dict[str, int]


class Committer(ABC):
    """One committer instance per job (driver) or per task attempt (executor)."""

    name: str

    def __init__(self, job: JobContext) -> None:
        self.job = job

    @abstractmethod
    def setup_job(self) -> None: ...

    @abstractmethod
    def setup_task(self, task: TaskAttemptContext) -> OutputSink: ...

    @abstractmethod
    def commit_task(self, task: TaskAttemptContext, files: list[WrittenFile]) -> str:
        """Make the attempt's output committable; return the commit message (JSON)."""

    @abstractmethod
    def abort_task(self, task: TaskAttemptContext) -> None: ...

    @abstractmethod
    def commit_job(self, messages: list[str], phases: dict[str, float]) -> JobOutcome:
        """Commit, or on failure abort where that is safe, then raise.

        Only the committer knows: the rename committers always abort; the S3 committers abort
        until the first upload is completed, then roll back or keep their journal for
        ``s3commit recover`` / ``abort``. So the runner does not abort after this raises.
        """

    @abstractmethod
    def abort_job(self, messages: list[str]) -> None: ...

    def error_fields(self, visible: str | None = None, command: str | None = None) -> dict:
        """The fields of an error about this job: ``command`` is the ``s3commit`` subcommand
        (``recover``, ``abort``) that resolves what it left at the destination."""
        url = self.job.location.url()
        remedy = f"s3commit {command} {url}" if command else None
        return {"destination": url, "job_id": self.job.job_id, "visible": visible, "remedy": remedy}


class OutputSink(ABC):
    """Where a task's writers put file bytes: local staging files, or upload streams."""

    @abstractmethod
    def open(self, relpath: str) -> pa.NativeFile: ...

    def finish(self, written: WrittenFile) -> None:
        """Called once the file's stream is closed, with its rows and partition."""
        return None

    def abort(self, relpath: str) -> None:
        """The writer failed mid-file: whatever was written must never become visible."""
        return None


def execute_task(
    job: JobContext,
    partition: int,
    attempt: int,
    batches: Iterable[pa.RecordBatch],
    schema: pa.Schema | None = None,
) -> str:
    """One task attempt: write, then commit, or abort on any failure (and re-raise).

    Its logs are redacted too: on Spark it runs in a Python worker, not the driver's process.
    """
    with redacted_logs(job.settings.secret_key, job.settings.session_token):
        return _attempt(job, partition, attempt, batches, schema)


def _attempt(
    job: JobContext,
    partition: int,
    attempt: int,
    batches: Iterable[pa.RecordBatch],
    schema: pa.Schema | None,
) -> str:
    from .committers import make_committer
    from .writers import write_task_output

    started = time.monotonic()
    task = TaskAttemptContext(job, partition, attempt)
    committer = make_committer(job)
    sink = committer.setup_task(task)
    try:
        files = write_task_output(job, task, batches, sink, schema)
        written = time.monotonic()
        message = committer.commit_task(task, files)
        summary = TaskSummary(
            files=len(files),
            bytes=sum(f.size for f in files),
            rows=sum(f.rows for f in files),
            seconds=time.monotonic() - started,
            write_seconds=written - started,
        )
        return summary.stamp(message)
    except BaseException:
        _best_effort(committer.abort_task, task, what=f"aborting {task.attempt_id}")
        raise


RunTasks = Callable[[JobContext, ProgressTracker], list[str]]


def execute_job(
    job: JobContext, run_tasks: RunTasks, progress: ProgressTracker | None = None
) -> JobOutcome:
    """Set up, run every task through the engine, then commit, or abort and raise typed."""
    from .committers import make_committer

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
    messages: list[str] = []
    try:
        mark = time.monotonic()
        tracker.update(phase="writing")
        messages = run_tasks(job, tracker)
        phases["tasks"] = time.monotonic() - mark
        phases.update(_split_task_phase(messages, phases["tasks"]))
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


def _split_task_phase(messages: list[str], wall: float) -> dict[str, float]:
    """The tasks phase's wall time, split into writing and task commit as the tasks spent it."""
    write = commit = 0.0
    for summary in map(TaskSummary.read, messages):
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
