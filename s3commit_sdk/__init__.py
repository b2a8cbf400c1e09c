"""s3commit_sdk: zero-rename committers for writing Spark and pandas data to S3."""

from typing import Any

from .api import CommittedFile, WriteResult, read_result, write_committed
from .errors import (
    AccessDeniedError,
    CleanupIncompleteError,
    CommitError,
    ConcurrentCommitError,
    ConflictError,
    CredentialsError,
    DeltaTableError,
    ExpiredCredentialsError,
    InvalidArgumentError,
    InvalidOptionError,
    InvalidPathError,
    JournalTrustError,
    MissingPermissionError,
    NoStreamError,
    PendingSetError,
    S3CommitError,
    SchemaMismatchError,
    StoreError,
    TaskFailedError,
    UnknownOptionError,
    UnsupportedSessionError,
    VersionedBucketError,
    WorkerPythonError,
)
from .formats import SuccessDocument
from .options import CommitterName, ConflictMode, OutputFormat
from .reading import read_table
from .streaming.batch import StreamBatch

__all__ = [
    "AccessDeniedError",
    "CleanupIncompleteError",
    "CommitError",
    "CommittedFile",
    "CommitterName",
    "ConcurrentCommitError",
    "ConflictError",
    "ConflictMode",
    "CredentialsError",
    "DeltaTableError",
    "ExpiredCredentialsError",
    "InvalidArgumentError",
    "InvalidOptionError",
    "InvalidPathError",
    "JournalTrustError",
    "MissingPermissionError",
    "NoStreamError",
    "OutputFormat",
    "PendingSetError",
    "S3CommitError",
    "SchemaMismatchError",
    "StoreError",
    "StreamBatch",
    "SuccessDocument",
    "TaskFailedError",
    "UnknownOptionError",
    "UnsupportedSessionError",
    "VersionedBucketError",
    "WorkerPythonError",
    "WriteResult",
    "read_result",
    "read_table",
    "register",
    "write_committed",
]


def __getattr__(name: str) -> Any:
    """``register`` needs pyspark (the ``spark`` extra): imported on first use, not here."""
    if name == "register":
        from .datasource import register

        return register
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
