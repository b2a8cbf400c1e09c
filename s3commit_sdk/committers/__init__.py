"""Committers by name."""

from __future__ import annotations

from ..errors import InvalidArgumentError
from ..protocol import Committer, JobContext
from .magic import MagicCommitter
from .staging import DirectoryStagingCommitter, PartitionedStagingCommitter

COMMITTERS: dict[str, type[Committer]] = {
    "directory": DirectoryStagingCommitter,
    "partitioned": PartitionedStagingCommitter,
    "magic": MagicCommitter,
}


def make_committer(job: JobContext) -> Committer:
    try:
        cls = COMMITTERS[job.committer]
    except KeyError:
        raise InvalidArgumentError(
            f"unknown committer {job.committer!r}; available: {', '.join(COMMITTERS)}"
        ) from None
    return cls(job)
