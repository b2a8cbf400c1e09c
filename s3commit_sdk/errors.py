"""Typed errors. Every error the SDK raises subclasses :class:`S3CommitError`.

Argument errors also subclass :class:`ValueError` and are raised before anything is uploaded.
"""

from __future__ import annotations

import re


class S3CommitError(Exception):
    """Base class of every error raised by s3commit_sdk."""


class InvalidArgumentError(S3CommitError, ValueError):
    """A bad argument to ``write_committed``: nothing was written."""


class InvalidPathError(InvalidArgumentError):
    """The destination path cannot be used (no bucket, unsupported scheme, ...)."""


class UnknownOptionError(InvalidArgumentError):
    """An option name that no committer understands."""


class StoreError(S3CommitError):
    """The object store refused or failed a request (missing bucket, bad credentials, ...)."""


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
