"""Conflict resolution of the directory and partitioned committers.

Seed 001 ("Conflict Resolution in the Staging Committers") and seed 002 ("Conflict
resolution"): the directory committer resolves conflicts for the whole destination at job
setup (fail) or job commit (replace); the partitioned committer only for the partitions that
receive new data, failing the task that writes into an existing partition.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..errors import ConflictError
from ..paths import S3Location, is_hidden
from ..store import ObjectInfo, S3Store


def visible_objects(
    store: S3Store, location: S3Location, relprefix: str = ""
) -> Iterable[ObjectInfo]:
    """Objects a reader would see under a directory: hidden names are skipped."""
    for info in store.list_objects(location.bucket, location.key(relprefix)):
        if not is_hidden(location.relative(info.key)):
            yield info


def _dir(partition_path: str) -> str:
    return f"{partition_path}/" if partition_path else ""


class DirectoryConflict:
    """The whole destination is one unit of conflict."""

    def __init__(self, mode: str) -> None:
        self.mode = mode

    def check_job(self, store: S3Store, location: S3Location) -> None:
        if self.mode != "fail":
            return
        existing = next(iter(visible_objects(store, location)), None)
        if existing is not None:
            raise ConflictError(
                f"destination {location.url()} already holds data (e.g. {existing.key!r}) and "
                "conflict_mode is 'fail': use conflict_mode='append' or 'replace', or a new path"
            )

    def check_task(self, store: S3Store, location: S3Location, partitions: set[str]) -> None:
        return None

    def replaced_objects(
        self, store: S3Store, location: S3Location, partitions: set[str]
    ) -> list[ObjectInfo]:
        return list(visible_objects(store, location)) if self.mode == "replace" else []


class PartitionConflict(DirectoryConflict):
    """Each partition directory that receives data is one unit of conflict."""

    def check_job(self, store: S3Store, location: S3Location) -> None:
        return None

    def check_task(self, store: S3Store, location: S3Location, partitions: set[str]) -> None:
        if self.mode != "fail":
            return
        for partition in sorted(partitions):
            existing = next(iter(visible_objects(store, location, _dir(partition))), None)
            if existing is not None:
                where = partition or "the destination root"
                raise ConflictError(
                    f"partition {where} of {location.url()} already holds data "
                    f"(e.g. {existing.key!r}) and conflict_mode is 'fail': use 'append' or "
                    "'replace' (which replaces only the partitions that receive data)"
                )

    def replaced_objects(
        self, store: S3Store, location: S3Location, partitions: set[str]
    ) -> list[ObjectInfo]:
        if self.mode != "replace":
            return []
        found: list[ObjectInfo] = []
        for partition in sorted(partitions):
            found.extend(visible_objects(store, location, _dir(partition)))
        return found
