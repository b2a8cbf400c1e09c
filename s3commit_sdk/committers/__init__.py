"""Committers by name."""

from __future__ import annotations

from ..errors import InvalidArgumentError
from ..protocol import Committer, JobContext
from .classic import ClassicCommitter
from .magic import MagicCommitter
from .manifest import ManifestCommitter
from .staging import DirectoryStagingCommitter, PartitionedStagingCommitter

COMMITTERS: dict[str, type[Committer]] = {
    "directory": DirectoryStagingCommitter,
    "partitioned": PartitionedStagingCommitter,
    "magic": MagicCommitter,
    "manifest": ManifestCommitter,
    "file": ClassicCommitter,
}
#: committers that need an s3:// destination; the others rename files on any store
S3_ONLY = ("directory", "partitioned", "magic")


def make_committer(job: JobContext) -> Committer:
    try:
        cls = COMMITTERS[job.committer]
    except KeyError:
        raise InvalidArgumentError(
            f"unknown committer {job.committer!r}; available: {', '.join(COMMITTERS)}"
        ) from None
    if job.format == "delta":  # imported here: deltalake is an optional dependency
        from .delta import DELTA_COMMITTERS

        cls = DELTA_COMMITTERS[job.committer]
    return cls(job)
