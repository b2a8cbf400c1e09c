"""Conflict resolution of the directory and partitioned committers.

"Committing work to S3 with the S3A Committers" ("Conflict Resolution in the Staging Committers")
and Netflix's "s3committer README" ("Conflict resolution"): the directory committer resolves
conflicts for the whole destination at job setup (fail) or job commit (replace); the partitioned
committer only for the partitions that receive new data, failing the task that writes into an
existing partition. The policies work on any store through ``ListVisible``: the visible files under
a directory of the destination.

``fail`` per partition is judged when a task attempt opens its first file in a partition
(:meth:`DirectoryConflict.guard` wraps the attempt's sink), so a conflict stops the task before
it writes, uploads or initiates an upload for that partition, and the job before its other
tasks finish; Hadoop's partitioned committer checks only at task commit, after the data was
computed.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import pyarrow as pa

from ..errors import NOTHING_VISIBLE, ConflictError
from ..protocol import OutputSink, WrittenFile

#: relative directory ("" or "day=1/") -> keys or paths of the visible files below it
ListVisible = Callable[[str], list[str]]


def _dir(partition_path: str) -> str:
    return f"{partition_path}/" if partition_path else ""


def partition_conflict(url: str, partition: str, example: str | None = None) -> ConflictError:
    """The error of a task that found data in a partition it was about to write, in ``fail``.

    Raised before the task wrote anything into that partition: the job is aborted and nothing
    of it is visible, the destination is as it was.
    """
    where = partition or "the destination root"
    holds = f"already holds data (e.g. {example!r})" if example else "already holds data"
    return ConflictError(
        f"partition {where} of {url} {holds} and conflict_mode is 'fail': the task stopped "
        "before writing into it and the job was aborted. Nothing changed at the destination "
        "(nothing of this job is visible). Use 'append' or 'replace' (which replaces only the "
        "partitions that receive data), or write elsewhere.",
        destination=url,
        visible=NOTHING_VISIBLE,
    )


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
                "conflict_mode is 'fail': use conflict_mode='append' or 'replace', or a new "
                "path. Nothing changed at the destination.",
                destination=url,
                visible=NOTHING_VISIBLE,
            )

    @property
    def checks_partitions(self) -> bool:
        """Whether each partition a task writes into is checked (``fail`` per partition)."""
        return False

    def check_partition(self, visible: ListVisible, url: str, partition: str) -> None:
        """Refuse ``partition`` ("" for the root) if it holds data; policies per partition only."""
        return None

    def guard(self, sink: OutputSink, visible: ListVisible, url: str) -> OutputSink:
        """``sink``, or, when partitions are checked, ``sink`` checking each partition before
        the attempt opens its first file there (see :class:`PartitionCheckedSink`)."""
        if not self.checks_partitions:
            return sink
        return PartitionCheckedSink(sink, partial(self.check_partition, visible, url))

    def replaced(self, visible: ListVisible, partitions: set[str]) -> list[str]:
        return visible("") if self.mode == "replace" else []


class PartitionConflict(DirectoryConflict):
    """Each partition directory that receives data is one unit of conflict.

    What ``fail`` promises: no task adds a file to a partition that held visible data when the
    task opened its first file there. This job's own files never count (none is visible before
    job commit), so data found there is another job's or a user's. Data another job makes
    visible in the partition *after* that moment is not looked for: a second look at task
    commit would not close the window either (job commit comes later still), so there is none.
    """

    def check_job(self, visible: ListVisible, url: str) -> None:
        return None

    @property
    def checks_partitions(self) -> bool:
        return self.mode == "fail"

    def check_partition(self, visible: ListVisible, url: str, partition: str) -> None:
        if self.mode != "fail":
            return
        existing = visible(_dir(partition))
        if existing:
            raise partition_conflict(url, partition, existing[0])

    def replaced(self, visible: ListVisible, partitions: set[str]) -> list[str]:
        if self.mode != "replace":
            return []
        return [found for partition in sorted(partitions) for found in visible(_dir(partition))]


class PartitionCheckedSink(OutputSink):
    """A task attempt's sink that checks a partition once, before its first file there is
    opened: a conflict is raised before anything of that partition is written or uploaded."""

    def __init__(self, sink: OutputSink, check: Callable[[str], None]) -> None:
        self.sink, self.check = sink, check
        self.checked: set[str] = set()

    def open(self, relpath: str) -> pa.NativeFile:
        partition = partition_of(relpath)
        if partition not in self.checked:
            self.check(partition)
            self.checked.add(partition)
        return self.sink.open(relpath)

    def finish(self, written: WrittenFile) -> None:
        self.sink.finish(written)

    def abort(self, relpath: str) -> None:
        self.sink.abort(relpath)


def partition_of(relpath: str) -> str:
    """The partition directory of a file path relative to the destination ("" at the root)."""
    return relpath.rsplit("/", 1)[0] if "/" in relpath else ""
