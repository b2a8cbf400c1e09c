"""s3commit_sdk: zero-rename committers for writing Spark and pandas data to S3."""

from .api import CommittedFile, WriteResult, read_result, write_committed
from .datasource import register
from .errors import (
    CommitError,
    ConcurrentCommitError,
    ConflictError,
    InvalidArgumentError,
    InvalidPathError,
    PendingSetError,
    S3CommitError,
    StoreError,
    TaskFailedError,
    UnknownOptionError,
    UnsupportedSessionError,
)

__all__ = [
    "CommitError",
    "CommittedFile",
    "ConcurrentCommitError",
    "ConflictError",
    "InvalidArgumentError",
    "InvalidPathError",
    "PendingSetError",
    "S3CommitError",
    "StoreError",
    "TaskFailedError",
    "UnknownOptionError",
    "UnsupportedSessionError",
    "WriteResult",
    "read_result",
    "register",
    "write_committed",
]
