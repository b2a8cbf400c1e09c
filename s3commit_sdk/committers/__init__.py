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


def check_committer(name: object) -> str:
    """``name`` if it names a committer; anything else is refused listing the committers."""
    if not isinstance(name, str) or name not in COMMITTERS:
        raise InvalidArgumentError(
            f"unknown committer {name!r}; available: {', '.join(COMMITTERS)}"
        )
    return name


def make_committer(job: JobContext) -> Committer:
    cls = COMMITTERS[check_committer(job.committer)]
    if job.format == "delta":  # imported here: deltalake is an optional dependency
        from .delta import DELTA_COMMITTERS

        cls = DELTA_COMMITTERS[job.committer]
    return cls(job)
