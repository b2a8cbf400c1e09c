"""Committers by name: the names are :data:`~s3commit_sdk.options.CommitterName`'s."""

from __future__ import annotations

from ..options import COMMITTER_NAMES, CommitterName, check_choice
from ..protocol import Committer, JobContext
from .classic import ClassicCommitter
from .magic import MagicCommitter
from .manifest import ManifestCommitter
from .staging import DirectoryStagingCommitter, PartitionedStagingCommitter

COMMITTERS: dict[CommitterName, type[Committer]] = {
    "directory": DirectoryStagingCommitter,
    "partitioned": PartitionedStagingCommitter,
    "magic": MagicCommitter,
    "manifest": ManifestCommitter,
    "file": ClassicCommitter,
}


def check_committer(name: object) -> CommitterName:
    """``name`` if it names a committer; anything else is refused naming the nearest."""
    return check_choice("committer", name, COMMITTER_NAMES)


def make_committer(job: JobContext) -> Committer:
    cls = COMMITTERS[check_committer(job.committer)]
    if job.format == "delta":  # imported here: deltalake is an optional dependency
        from .delta import DELTA_COMMITTERS

        cls = DELTA_COMMITTERS[job.committer]
    elif job.format == "iceberg":  # pyiceberg too
        from .iceberg import ICEBERG_COMMITTERS

        cls = ICEBERG_COMMITTERS[job.committer]
    return cls(job)
