"""Typed errors. Every error the SDK raises subclasses :class:`S3CommitError`.

Argument errors also subclass :class:`ValueError` and are raised before anything is uploaded.

An error raised where Spark runs our code (a task, or the data source's job setup and commit in
a Python worker) reaches the driver as text inside Spark's own exception, its type and fields
lost. So it leaves that code with one extra line in its traceback, a structured envelope::

    s3commit-error: {"type": "ConflictError", "message": "...", "destination": "s3://...",
                     "job_id": "...", "visible": "nothing", "remedy": null}

(one line, JSON), and :func:`from_spark` restores the exact class and fields from any exception
Spark raised (py4j's, PySpark's, Spark Connect's). ``write_committed`` does this itself; after
``df.write.format("s3commit").save(...)`` call it on what Spark raised::

    try:
        df.write.format("s3commit").option("committer", "partitioned").save(url)
    except Exception as exc:
        typed = from_spark(exc)
        if typed is None:
            raise
        raise typed from exc  # typed.visible, typed.remedy: what is visible, what fixes it
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import traceback
import types
from collections.abc import Iterator
from functools import partial
from typing import TypeVar


class S3CommitError(Exception):
    """Base class of every error raised by s3commit_sdk.

    ``engine_error`` is the Spark (Java / py4j) error this one sums up, when there is one: it is
    kept here instead of being chained, so a notebook shows the cause's line and the remedy
    rather than the JVM's stack traces. With the ``s3commit_sdk`` logger at DEBUG (or
    ``S3COMMIT_TRACEBACK=full``) it stays chained as well (see :func:`for_humans`).

    In IPython (notebooks, papermill) the error is shown without the SDK's own frames, its
    notes before its line (:func:`notebook_traceback`).
    """

    engine_error: BaseException | None = None

    def _render_traceback_(self) -> list[str]:  # IPython's hook for what a cell shows
        return notebook_traceback(self)

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
#: a command refused before it changed anything: the destination is as it was
UNCHANGED_VISIBLE = "unchanged"
#: each value in words
VISIBLE = {
    NOTHING_VISIBLE: "nothing",
    SOME_VISIBLE: "some of its files (the existing data is untouched)",
    ALL_VISIBLE: "all of its files",
    MIXED_VISIBLE: "its files, and maybe some of the data it was to replace",
    UNCHANGED_VISIBLE: "what was there before: nothing was changed",
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


class NoStreamError(StoreError):
    """No stream has a committed micro-batch's record under the destination."""


class ConflictError(S3CommitError):
    """The destination (or a partition of it) holds data and the conflict mode is ``fail``."""


class SchemaMismatchError(InvalidArgumentError):
    """The data does not fit the files the destination keeps beside the job's: written, they
    could not be read together. Raised before anything is uploaded.

    ``column``: the column (None: the column list as a whole); ``destination_type`` and
    ``data_type``: its type in the destination's files and in the data, as Spark names types
    (or the column lists).
    """

    def __init__(
        self,
        message: str = "",
        *,
        column: str | None = None,
        destination_type: str | None = None,
        data_type: str | None = None,
        **fields: str | None,
    ) -> None:
        super().__init__(message, **fields)
        self.column = column
        self.destination_type = destination_type
        self.data_type = data_type


class CommitError(S3CommitError):
    """Job commit failed. The message says what became visible and how to recover."""


class ConcurrentCommitError(CommitError):
    """Another job is committing into the same destination."""


class TaskFailedError(S3CommitError):
    """A task failed on every attempt; the job was aborted and nothing became visible."""


class WorkerPythonError(TaskFailedError):
    """Spark's Python workers run an interpreter that cannot import Spark or the SDK: the
    message names it and what chose it (``PYSPARK_PYTHON``, or ``python3`` from the PATH)."""


class PendingSetError(S3CommitError):
    """A pendingset or other commit metadata failed validation on load."""


class TaskCancelledError(S3CommitError):
    """A task attempt stopped between batches because its engine cancelled it (its job was
    interrupted or failed); the attempt aborted its output."""


class InvalidOptionError(InvalidArgumentError):
    """An option this write cannot take: a blank or malformed value, one the write would
    ignore, or a local directory it cannot use. ``option``: the option's name as given."""

    def __init__(self, message: str = "", *, option: str | None = None, **fields: str | None):
        super().__init__(message, **fields)
        self.option = option


class DeltaTableError(CommitError):
    """delta-rs could not read a Delta table's log (a corrupted entry, an unreadable
    checkpoint, ...). ``entry``: the key of the log entry at fault, when it is known."""

    def __init__(self, message: str = "", *, entry: str | None = None, **fields: str | None):
        super().__init__(message, **fields)
        self.entry = entry


class JournalTrustError(CommitError):
    """``s3commit recover`` / ``abort`` refused commit metadata it cannot vouch for (a journal
    or a pendingset naming keys, uploads or ETags that are not the job's own), before any
    request changed the store. ``journal_key``: the document at fault; ``field``: the field in
    it (``commits[3].etags``); ``problem``: what was wrong with it."""

    def __init__(
        self,
        message: str = "",
        *,
        journal_key: str | None = None,
        field: str | None = None,
        problem: str | None = None,
        **fields: str | None,
    ) -> None:
        super().__init__(message, **fields)
        self.journal_key = journal_key
        self.field = field
        self.problem = problem


class CleanupIncompleteError(CommitError):
    """Cleaning up a failed job left some of its uploads pending (S3 kept refusing the aborts
    within the retry budget). ``pending_uploads``: how many; ``uploads``: their keys (checked by
    a listing); ``remedy`` removes them."""

    def __init__(
        self, message: str = "", *, uploads: tuple[str, ...] = (), **fields: str | None
    ) -> None:
        super().__init__(message, **fields)
        self.pending_uploads = len(uploads)
        self.uploads = tuple(uploads)

    def tell(self, error: BaseException) -> None:
        """Say on ``error``, the failure that made the job clean up, what is still pending: this
        message as a note, and where ``error`` is typed, the fields it lacks."""
        error.add_note(f"s3commit: {self}")
        if isinstance(error, S3CommitError):
            error.visible = error.visible or self.visible
            error.remedy = error.remedy or self.remedy


class CredentialsError(StoreError):
    """A credentials provider failed (it raised): no store could be opened with it.
    ``provider``: the provider, as ``module:function`` or as given."""

    def __init__(self, message: str = "", *, provider: str | None = None, **fields: str | None):
        super().__init__(message, code="CredentialsProviderFailed", **fields)
        self.provider = provider


class ExpiredCredentialsError(CredentialsError):
    """S3 refused the job's credentials as expired (``ExpiredToken``): fixed temporary keys
    (``access.key`` / ``secret.key`` / ``session.token``, or ``AWS_SESSION_TOKEN``) cannot be
    refreshed, unlike a credentials provider's. ``stage``: where the job was (``tasks``,
    ``job commit``); ``visible`` and ``remedy``: what is left, and the command that resolves
    it with fresh credentials (``s3commit recover`` once job commit has begun completing)."""

    def __init__(self, message: str = "", *, stage: str | None = None, **fields: str | None):
        super().__init__(message, **fields)
        self.code = "ExpiredToken"
        self.stage = stage


class AccessDeniedError(StoreError):
    """The store refused a request (``AccessDenied``, or a 403 without a reason): the
    credentials lack the IAM action that authorizes it, or a bucket policy refuses it.
    ``permission``: that action (``s3:AbortMultipartUpload``; two joined by ``and`` for a
    copy); ``bucket``; ``key``: the object the request was for, None for a bucket request.
    ``s3commit iam-policy`` prints the policy granting every action the SDK needs."""

    def __init__(
        self,
        message: str = "",
        *,
        permission: str = "",
        bucket: str | None = None,
        key: str | None = None,
        code: str | None = None,
        **fields: str | None,
    ) -> None:
        super().__init__(message, code=code, **fields)
        self.permission = permission
        self.bucket = bucket
        self.key = key


class MissingPermissionError(AccessDeniedError):
    """The credentials lack an S3 permission every job needs, found at job setup before
    anything of the job was written. ``permission``: the IAM action (``s3:DeleteObject``);
    ``key``: the object the refused request left behind (checked), None when none is."""


class VersionedBucketError(StoreError):
    """The bucket keeps object versions and its store then ignores ``If-None-Match: *``, which
    exclusive commit needs (found at job setup, before anything of the job was written).
    ``bucket``: the bucket."""

    def __init__(self, message: str = "", *, bucket: str = "", **fields: str | None) -> None:
        super().__init__(message, code="VersionedBucket", **fields)
        self.bucket = bucket


_REMOTE = re.compile(
    r"s3commit_sdk\.errors\.(?P<cls>\w+Error): (?P<msg>.*?)"
    r"(?:\n\s*\n|\n\tat |\n[A-Za-z_.]+Error|\Z)",
    re.S,
)


#: The head of a Python traceback, also inside the text of the Java errors Spark raises for a
#: failed Python worker.
TRACEBACK_HEAD = "Traceback (most recent call last):"


@contextlib.contextmanager
def about_job(destination: str, job_id: str, visible: str | None = None) -> Iterator[None]:
    """Typed errors raised inside are told the job they are about, and ``visible`` where the
    caller knows it (errors raised below the job know less of it)."""
    try:
        yield
    except S3CommitError as exc:
        exc.destination = exc.destination or destination
        exc.job_id = exc.job_id or job_id
        exc.visible = exc.visible or visible
        raise


def first_line(exc: BaseException, limit: int = 500) -> str:
    """The line of an error worth showing: the exception line of the last Python traceback
    in it (a Spark task's failure holds its worker's traceback, whose source lines name errors
    too: ``raise ValueError(...)`` is not the cause), else the first line naming an error,
    else the first one."""
    text = str(exc).strip() or type(exc).__name__
    raised = raised_line(text)
    if raised is not None:
        return raised[:limit]
    for line in text.splitlines():
        if "Error" in line or "Exception" in line:
            return line.strip()[:limit]
    return text.splitlines()[0][:limit]


def raised_line(text: str) -> str | None:
    """The exception line (``SomeError: message``) of the last Python traceback in ``text``:
    the first line after its head that is not indented (frames and source lines are)."""
    head = text.rfind(TRACEBACK_HEAD)
    if head < 0:
        return None
    for line in text[head + len(TRACEBACK_HEAD) :].splitlines()[1:]:
        if line.strip() and not line[:1].isspace():
            return line.strip()
    return None


def _is_engine_error(exc: BaseException) -> bool:
    return type(exc).__module__.split(".")[0] in ("py4j", "pyspark")


_Raised = TypeVar("_Raised", bound=BaseException)

#: ``full``: IPython shows the SDK's own frames and its errors' causes (as it does with the
#: ``s3commit_sdk`` logger at DEBUG); unset or anything else: they are left out.
TRACEBACK_ENV = "S3COMMIT_TRACEBACK"
_SDK_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def full_tracebacks() -> bool:
    """Whether the SDK's frames and its errors' causes are asked for: ``S3COMMIT_TRACEBACK=full``
    or the ``s3commit_sdk`` logger at DEBUG."""
    if os.environ.get(TRACEBACK_ENV, "").strip().lower() == "full":
        return True
    return logging.getLogger("s3commit_sdk").isEnabledFor(logging.DEBUG)


def for_humans(error: _Raised) -> _Raised:
    """``error`` as a write raises it to its caller.

    Spark wraps a task's failure in Java exceptions whose text holds every stack trace; chained,
    a notebook prints all of it (a conflict once took 186 lines). Our message already carries
    the cause's line and the remedy, so the Spark error in the chain moves to ``engine_error``
    (unless :func:`full_tracebacks`). An interrupt is shown as our errors are
    (:func:`notebook_traceback`).
    """
    if not isinstance(error, S3CommitError):
        error._render_traceback_ = partial(notebook_traceback, error)  # type: ignore[attr-defined]
        return error
    cause = error.__cause__ or error.__context__
    if cause is None or not _is_engine_error(cause):
        return error
    error.engine_error = cause
    if not full_tracebacks():
        error.__cause__, error.__suppress_context__ = None, True
        error.add_note(
            "s3commit: Spark's own error is in this error's .engine_error "
            f"({TRACEBACK_ENV}=full, or the s3commit_sdk logger at DEBUG, chains it here)"
        )
    return error


def notebook_traceback(error: BaseException) -> list[str]:
    """What IPython shows for ``error`` (its ``_render_traceback_``).

    The caller's frames down to its call into the SDK, then the error's notes (what the SDK
    did, what is left), then the error's own line, last: the line a papermill run or a
    scheduler's log ends with. The SDK's frames, the libraries' frames below them and the
    error's causes are left out, unless :func:`full_tracebacks`.
    """
    shell = _ipython()
    if full_tracebacks():
        if shell is None:
            return traceback.format_exception(error)
        return shell.InteractiveTB.structured_traceback(type(error), error, error.__traceback__)
    bare = BaseException.__new__(type(error))  # the class and message: no chain, no notes
    bare.args = error.args
    callers, hidden = _callers_frames(error.__traceback__)
    if shell is None:
        lines = traceback.format_exception(type(error), bare, callers)
    else:
        lines = shell.InteractiveTB.structured_traceback(type(error), bare, callers)
    notes = [str(note) for note in getattr(error, "__notes__", ())]
    if hidden and not any(TRACEBACK_ENV in note for note in notes):
        notes.append(
            f"s3commit: the SDK's own frames are not shown ({TRACEBACK_ENV}=full, or the "
            "s3commit_sdk logger at DEBUG, shows them)"
        )
    return [*lines[:-1], *notes, lines[-1]]


def _ipython():
    """The running IPython shell, or None."""
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    return get_ipython()


def _callers_frames(tb: types.TracebackType | None) -> tuple[types.TracebackType | None, int]:
    """The traceback's frames before the first one inside the SDK; how many are left out."""
    kept: list[types.TracebackType] = []
    while tb is not None and not tb.tb_frame.f_code.co_filename.startswith(_SDK_DIR):
        kept.append(tb)
        tb = tb.tb_next
    hidden = 0
    while tb is not None:
        hidden, tb = hidden + 1, tb.tb_next
    head = None
    for entry in reversed(kept):
        head = types.TracebackType(head, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return head, hidden


#: The envelope's line in a traceback: the prefix, then one JSON object.
ENVELOPE_PREFIX = "s3commit-error: "
_ENVELOPE = re.compile(re.escape(ENVELOPE_PREFIX) + r"(\{.*\})")


def envelope(error: S3CommitError) -> str:
    """``error`` as one line of text: its class, message and every plain field."""
    fields = {
        name: value
        for name, value in vars(error).items()
        if not name.startswith("_") and (value is None or isinstance(value, (str, int, float)))
    }
    body = {"type": type(error).__name__, "message": str(error), **fields}
    return ENVELOPE_PREFIX + json.dumps(body, ensure_ascii=True)


@contextlib.contextmanager
def crossing_spark() -> Iterator[None]:
    """Around code Spark runs for us: an :class:`S3CommitError` leaving it carries its envelope
    as a note (the traceback Spark sends to the driver prints notes; ``str(error)`` is not
    changed). Not for code on the user's side: the note would show in their traceback."""
    try:
        yield
    except S3CommitError as error:
        error.__notes__ = [  # one envelope, with the fields as they are now
            note
            for note in getattr(error, "__notes__", [])
            if not str(note).startswith(ENVELOPE_PREFIX)
        ]
        error.add_note(envelope(error))
        raise


def from_spark(exc: BaseException) -> S3CommitError | None:
    """The SDK's typed error inside an exception Spark raised, or None if it holds none.

    Reads the envelope (class, message, ``destination``, ``job_id``, ``visible``, ``remedy``)
    from the text of ``exc`` and its causes; an error raised without one (by an older version)
    is matched by the class name in its traceback, message only. ``exc`` itself when it is
    already typed; None for an interrupt (``KeyboardInterrupt`` stays what it is).
    """
    if isinstance(exc, S3CommitError):
        return exc
    if not isinstance(exc, Exception):
        return None
    texts = [str(e) for e in _chain(exc)]
    for text in texts:
        for match in _ENVELOPE.finditer(text):
            restored = _restored(match[1])
            if restored is not None:
                return restored
    for text in texts:
        match = _REMOTE.search(text)
        if match:
            cls = _error_class(match["cls"])
            if cls is not None:
                return cls(match["msg"].strip())
    return None


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _error_class(name: str) -> type[S3CommitError] | None:
    cls = globals().get(name)
    return cls if isinstance(cls, type) and issubclass(cls, S3CommitError) else None


def _restored(text: str) -> S3CommitError | None:
    try:
        body = json.loads(text)
    except ValueError:
        return None
    cls = _error_class(str(body.pop("type", "")))
    if cls is None:
        return None
    error = cls(str(body.pop("message", "")))
    for name, value in body.items():
        if name in vars(error):  # only the fields this class has
            setattr(error, name, value)
    return error
