"""Conflict resolution of the directory and partitioned committers.

"Committing work to S3 with the S3A Committers" ("Conflict Resolution in the Staging Committers")
and Netflix's "s3committer README" ("Conflict resolution"): the directory committer resolves
conflicts for the whole destination at job setup (fail) or job commit (replace); the partitioned
committer only for the partitions that receive new data, failing the task that writes into an
existing partition. The policies work on any store through ``ListVisible``: the visible files under
a directory of the destination.
"""

from __future__ import annotations

from collections.abc import Callable

from ..errors import NOTHING_VISIBLE, ConflictError

#: relative directory ("" or "day=1/") -> keys or paths of the visible files below it
ListVisible = Callable[[str], list[str]]


def _dir(partition_path: str) -> str:
    return f"{partition_path}/" if partition_path else ""


class DirectoryConflict:
    """The whole destination is one unit of conflict."""

    def __init__(self, mode: str) -> None:
        self.mode = mode

    def check_job(self, visible: ListVisible, url: str) -> None:
        if self.mode != "fail":
            return
        existing = visible("")
        if existing:
            raise ConflictError(
                f"destination {url} already holds data (e.g. {existing[0]!r}) and "
                "conflict_mode is 'fail': use conflict_mode='append' or 'replace', or a new path",
                destination=url,
                visible=NOTHING_VISIBLE,
            )

    def check_task(self, visible: ListVisible, url: str, partitions: set[str]) -> None:
        return None

    def replaced(self, visible: ListVisible, partitions: set[str]) -> list[str]:
        return visible("") if self.mode == "replace" else []


class PartitionConflict(DirectoryConflict):
    """Each partition directory that receives data is one unit of conflict."""

    def check_job(self, visible: ListVisible, url: str) -> None:
        return None

    def check_task(self, visible: ListVisible, url: str, partitions: set[str]) -> None:
        if self.mode != "fail":
            return
        for partition in sorted(partitions):
            existing = visible(_dir(partition))
            if existing:
                where = partition or "the destination root"
                raise ConflictError(
                    f"partition {where} of {url} already holds data (e.g. {existing[0]!r}) and "
                    "conflict_mode is 'fail': use 'append' or 'replace' (which replaces only the "
                    "partitions that receive data). Nothing of this job became visible.",
                    destination=url,
                    visible=NOTHING_VISIBLE,
                )

    def replaced(self, visible: ListVisible, partitions: set[str]) -> list[str]:
        if self.mode != "replace":
            return []
        return [found for partition in sorted(partitions) for found in visible(_dir(partition))]


def partition_of(relpath: str) -> str:
    """The partition directory of a file path relative to the destination ("" at the root)."""
    return relpath.rsplit("/", 1)[0] if "/" in relpath else ""
