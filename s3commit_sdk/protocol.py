"""The commit protocol's types: a job, a task attempt, a written file, a committer.

"A Zero-Rename Committer" ("The commit protocols of Hadoop and Spark"): a committer sets a job
up, makes each task attempt's output committable or aborts it, then commits or aborts the job.
Nothing here runs the protocol (:mod:`.runner` does) or knows a committer (:mod:`.committers`
does).
"""

from __future__ import annotations

import json
import uuid
from abc import ABC, abstractmethod
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass, field
from typing import Any

import pyarrow as pa

from .errors import PendingSetError
from .formats import CommittedFile, SuccessDocument, TaskFile
from .options import CommitOptions, resolve_options
from .paths import FsLocation, S3Location, parse_s3_url
from .stages import timed_stage
from .store import S3Settings
from .streaming.batch import StreamBatch


@dataclass(frozen=True)
class JobContext:
    """Everything a task needs to know about its job; pickled to the executors."""

    location: S3Location | FsLocation
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
    #: the data columns (partition columns excluded) as the job's files hold them: the input's
    #: types, widened to the destination's where its schema check widened them
    #: (:mod:`.schema_check`); recorded in ``_SUCCESS``. None: unknown (a job rebuilt from its
    #: journal), the input's types are written
    data_schema: pa.Schema | None = None
    #: requests (by operation) and their retries (by reason) the driver made for this job
    #: before job setup (the schema check reading the destination): counted with the job's
    setup_requests: dict[str, int] = field(default_factory=dict, compare=False)
    setup_retries: dict[str, int] = field(default_factory=dict, compare=False)
    #: the micro-batch this job is (its ``job_id`` is the batch's); None for a batch job
    stream: StreamBatch | None = None

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
class WrittenFile(TaskFile):
    """One file a task wrote, as a task commit payload names it, with what only the writing
    process has."""

    #: a Parquet file's footer (pyarrow FileMetaData): the statistics a table format records
    footer: Any = field(default=None, compare=False, repr=False)
    #: the partition values as the data holds them (not as text): what Iceberg records
    values: tuple[Any, ...] = field(default=(), compare=False, repr=False)


@dataclass(frozen=True)
class TaskSummary:
    """What every task attempt reports, whatever its committer: progress and the job's phase
    split read it, never a committer's own payload."""

    files: int = 0
    bytes: int = 0
    rows: int = 0
    seconds: float = 0.0
    write_seconds: float = 0.0  # the part of ``seconds`` spent writing, before task commit


@dataclass(frozen=True)
class TaskCommit:
    """One task attempt's commit message: its summary and its committer's own payload.

    "A Zero-Rename Committer": the message a committed task attempt sends the driver. It travels
    as one JSON string (:meth:`encode` on the executor, inside Spark's task results) and is
    decoded once, by the engine on the driver, into this type; committers read only
    ``payload``.
    """

    task_id: str
    attempt_id: str
    summary: TaskSummary
    payload: dict[str, Any]

    def encode(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def decode(cls, text: str | bytes) -> TaskCommit:
        """Any structural fault is a typed error: the message decides what job commit makes
        visible."""
        try:
            raw = json.loads(text)
            if not isinstance(raw, dict) or not isinstance(raw.get("payload"), dict):
                raise ValueError("not a task commit message object with a payload object")
            return cls(
                task_id=str(raw["task_id"]),
                attempt_id=str(raw["attempt_id"]),
                summary=TaskSummary(**raw["summary"]),
                payload=raw["payload"],
            )
        except (ValueError, TypeError, KeyError) as exc:
            raise PendingSetError(f"malformed task commit message: {exc}") from exc


@dataclass
class JobOutcome:
    """What job commit produced, for the result and the ``_SUCCESS`` report."""

    files: list[CommittedFile]
    success: SuccessDocument
    phases: dict[str, float]
    requests: dict[str, int]
    #: keys whose upload this commit completed (``s3commit recover``: the rest were already)
    completed: list[str] = field(default_factory=list)
    #: keys a resumed commit found completed before it
    already_complete: list[str] = field(default_factory=list)
    #: visible objects replace mode deleted
    deleted: list[str] = field(default_factory=list)
    #: uploads of the job still pending at job end, aborted by its cleanup
    aborted_uploads: int = 0
    #: a micro-batch an earlier attempt committed (or began to: then rolled forward here)
    replayed: bool = False


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
    def commit_task(self, task: TaskAttemptContext, files: list[WrittenFile]) -> dict[str, Any]:
        """Make the attempt's output committable; return its payload (a JSON object) for the
        task's :class:`TaskCommit`."""

    @abstractmethod
    def abort_task(self, task: TaskAttemptContext) -> None: ...

    @abstractmethod
    def commit_job(self, messages: list[TaskCommit], phases: dict[str, float]) -> JobOutcome:
        """Commit, or on failure abort where that is safe, then raise.

        Only the committer knows: the rename committers always abort; the S3 committers abort
        until the first upload is completed, then roll back or keep their journal for
        ``s3commit recover`` / ``abort``. So the runner does not abort after this raises.
        """

    @abstractmethod
    def abort_job(self, messages: list[TaskCommit]) -> None: ...

    def stage(self, phases: dict[str, float], name: str) -> AbstractContextManager[None]:
        """A named step of this job's commit, timed into ``phases`` (see :mod:`.stages`)."""
        return timed_stage(phases, name, self.job.job_id)

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


def decode_messages(messages: list[Any], strict: bool = True) -> list[TaskCommit]:
    """The encoded :class:`TaskCommit` of each Spark writer message (its ``message``; None for
    a task that sent none); an abort skips one it cannot read (its uploads are found by the
    job's UUID)."""
    decoded = []
    for message in filter(None, messages):
        try:
            decoded.append(TaskCommit.decode(message.message))
        except PendingSetError:
            if strict:
                raise
    return decoded
