"""The classic FileOutputCommitter, algorithms 1 and 2.

"S3A Committers: Architecture and Implementation", "The FileOutputCommitter":

v1: task commit renames the attempt directory to the committed-task directory; job commit
merges every committed task directory into the destination (``mergePathsV1``). v2: task commit
merges the attempt's files straight into the destination (``mergePathsV2``), so a failed job
can leave partial output visible. On S3 each rename is a server-side copy plus a delete per
file, as in Hadoop's S3A client: it exists for ``file://`` users and as the benchmark baseline.
The job directory is ``_temporary/<job UUID>`` rather than a reused ``_temporary/0``.
"""

from __future__ import annotations

import logging
import time
import warnings
from typing import Any

from .. import layout
from ..formats import ClassicPayload, TaskFile
from ..paths import S3Location
from ..protocol import JobOutcome, TaskAttemptContext, TaskCommit, WrittenFile
from .rename_base import RenameCommitter

log = logging.getLogger(__name__)
S3_WARNING = (
    "the classic file committer on S3 renames by copying every object twice (v1) or once (v2) "
    "and deleting the source: it is neither safe nor fast there; use committer='directory', "
    "'partitioned' or 'magic'"
)


class ClassicCommitter(RenameCommitter):
    name = "file"

    def __init__(self, job) -> None:
        super().__init__(job)
        self.version = job.options.algorithm_version

    @property
    def job_dir(self) -> str:
        return layout.classic_job_dir(self.location, self.job.job_id)

    def attempt_dir(self, task: TaskAttemptContext) -> str:
        return layout.classic_attempt_dir(self.location, self.job.job_id, task.attempt_id)

    def committed_dir(self, task_id: str) -> str:
        return layout.classic_task_dir(self.location, self.job.job_id, task_id)

    def setup_job(self) -> None:
        if isinstance(self.location, S3Location):
            log.warning(S3_WARNING)
            warnings.warn(S3_WARNING, stacklevel=2)
        super().setup_job()

    def commit_task(self, task: TaskAttemptContext, files: list[WrittenFile]) -> dict[str, Any]:
        source = self.attempt_dir(task)
        if self.version == 1:  # rename the attempt directory to the committed-task directory
            target = self.committed_dir(task.task_id)
            self.store.delete(target)
            self.store.rename_dir(source, target)
        else:  # v2: merge the attempt's files into the destination now
            self._merge(source)
        written = [TaskFile(f.relpath, f.rows, f.size, f.partition) for f in files]  # no footer
        return ClassicPayload(written, self.store.counters.snapshot()).to_dict()

    def _merge(self, *sources: str) -> None:
        """mergePaths: every file under each source to the same relative path in the dest, in
        one ``move_all``, so that a failed rename undoes every rename of the merge."""
        moves = [
            (path, self.path(path[len(source) + 1 :]))
            for source in sources
            for path, _ in self.store.list_files(source)
        ]
        for directory in sorted({t.rsplit("/", 1)[0] for _, t in moves}):
            self.store.mkdirs(directory)
        self.move_all(moves)

    def commit_files(self, messages: list[TaskCommit], phases: dict[str, float]) -> JobOutcome:
        """v1 merges every committed task now; v2 tasks merged already. Replaced files go last:
        a job that fails before never loses the old data (v2 may leave new files beside it)."""
        started = time.monotonic()
        payloads = [ClassicPayload.from_dict(m.payload) for m in messages]
        replaced = self.replaced_files([f.relpath for p in payloads for f in p.files])
        with self.stage(phases, "merge"):
            if self.version == 1:
                self._merge(*(self.committed_dir(m.task_id) for m in messages))
        entries = [
            self.entry(self.path(f.relpath), f.rows, f.size, f.partition, m.task_id)
            for m, payload in zip(messages, payloads, strict=True)
            for f in payload.files
        ]
        tasks = [p.requests for p in payloads]
        durations = {m.task_id: m.summary.seconds for m in messages}
        json_success = self.job.options.success_json
        return self.finish(entries, replaced, phases, started, json_success, tasks, durations)
