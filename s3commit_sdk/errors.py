"""Typed errors. Every error the SDK raises subclasses :class:`S3CommitError`.

Argument errors also subclass :class:`ValueError` and are raised before anything is uploaded.
"""

from __future__ import annotations

import re


class S3CommitError(Exception):
    """Base class of every error raised by s3commit_sdk.

    ``engine_error`` is the Spark (Java / py4j) error this one sums up, when there is one: it is
    kept here instead of being chained, so a notebook shows the cause's line and the remedy
    rather than the JVM's stack traces. With the ``s3commit_sdk`` logger at DEBUG it stays
    chained as well (see :func:`for_humans`).
    """

    engine_error: BaseException | None = None

    def __init__(
        self,
        message: str = "",
        *,
        destination: str | None = None,
        job_id: str | None = None,
        visible: str | None = None,
        remedy: str | None = None,
    ) -> None:
        super().__init__(message)
        #: the destination URL the failed job wrote to, when the error concerns one
        self.destination = destination
        #: the job's id, when a job had started
        self.job_id = job_id
        #: what of the job is visible at the destination now: a key of :data:`VISIBLE`
        self.visible = visible
        #: the command that resolves what the failure left (``s3commit recover URL``, ...)
        self.remedy = remedy


#: The values of :attr:`S3CommitError.visible`, from the facts the SDK had when it raised.
NOTHING_VISIBLE = "nothing"
#: some of the job's new files; what it was to replace is untouched
SOME_VISIBLE = "some"
ALL_VISIBLE = "all"
#: the job's new files, and maybe some of what it was to replace
MIXED_VISIBLE = "new and old"
#: each value in words
VISIBLE = {
    NOTHING_VISIBLE: "nothing",
    SOME_VISIBLE: "some of its files (the existing data is untouched)",
    ALL_VISIBLE: "all of its files",
    MIXED_VISIBLE: "its files, and maybe some of the data it was to replace",
}


class InvalidArgumentError(S3CommitError, ValueError):
    """A bad argument to ``write_committed``: nothing was written."""


class InvalidPathError(InvalidArgumentError):
    """The destination path cannot be used (no bucket, unsupported scheme, ...)."""


class UnknownOptionError(InvalidArgumentError):
    """An option name that no committer understands."""


class UnsupportedSessionError(InvalidArgumentError):
    """The DataFrame's Spark session lacks an API the SDK needs; the message names it."""


class StoreError(S3CommitError):
    """The object store refused or failed a request (missing bucket, bad credentials, ...).

    ``code`` is the store's error code (``NoSuchUpload``, ``SlowDown``, ...) when it gave one.
    """

    def __init__(self, message: str, code: str | None = None, **fields: str | None) -> None:
        super().__init__(message, **fields)
        self.code = code


class ConflictError(S3CommitError):
    """The destination (or a partition of it) holds data and the conflict mode is ``fail``."""


class CommitError(S3CommitError):
    """Job commit failed. The message says what became visible and how to recover."""


class ConcurrentCommitError(CommitError):
    """Another job is committing into the same destination."""


class TaskFailedError(S3CommitError):
    """A task failed on every attempt; the job was aborted and nothing became visible."""


class PendingSetError(S3CommitError):
    """A pendingset or other commit metadata failed validation on load."""


_REMOTE = re.compile(
    r"s3commit_sdk\.errors\.(?P<cls>\w+Error): (?P<msg>.*?)"
    r"(?:\n\s*\n|\n\tat |\n[A-Za-z_.]+Error|\Z)",
    re.S,
)


def first_line(exc: BaseException, limit: int = 500) -> str:
    """The line of an error worth showing: the first naming an error, else the first one."""
    text = str(exc).strip() or type(exc).__name__
    for line in text.splitlines():
        if "Error" in line or "Exception" in line:
            return line.strip()[:limit]
    return text.splitlines()[0][:limit]


def _is_engine_error(exc: BaseException) -> bool:
    return type(exc).__module__.split(".")[0] in ("py4j", "pyspark")


def for_humans(error: S3CommitError) -> S3CommitError:
    """``error`` with the Spark error in its chain moved to ``engine_error`` (unless DEBUG).

    Spark wraps a task's failure in Java exceptions whose text holds every stack trace; chained,
    a notebook prints all of it (a conflict once took 186 lines). Our message already carries
    the cause's line and the remedy.
    """
    import logging

    cause = error.__cause__ or error.__context__
    if cause is None or not _is_engine_error(cause):
        return error
    error.engine_error = cause
    if not logging.getLogger("s3commit_sdk").isEnabledFor(logging.DEBUG):
        error.__cause__, error.__suppress_context__ = None, True
        error.add_note(
            "s3commit: Spark's own error is in this error's .engine_error (set the "
            "s3commit_sdk logger to DEBUG to have it chained here)"
        )
    return error


def from_task_failure(exc: BaseException) -> S3CommitError | None:
    """Recover our typed error from an engine failure whose text carries it.

    Spark reports a task's Python exception as text inside a JVM exception; the type is lost.
    The traceback names the class with its module, which is what we match on.
    """
    match = _REMOTE.search(str(exc))
    if not match:
        return None
    cls = globals().get(match["cls"])
    if not (isinstance(cls, type) and issubclass(cls, S3CommitError)):
        return None
    return cls(match["msg"].strip())
