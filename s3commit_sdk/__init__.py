"""s3commit_sdk: zero-rename committers for writing Spark and pandas data to S3."""

from .api import CommittedFile, WriteResult, write_committed
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
    "WriteResult",
    "write_committed",
]
