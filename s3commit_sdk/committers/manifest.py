"""The manifest committer ("Manifest Committer Protocol").

Tasks write under ``$dest/_temporary/manifest_$jobID/00/tasks/<attempt>/``; task commit scans
that directory into a JSON task manifest saved under a temporary name and renamed into
``manifests/``; job commit loads the manifests in parallel, creates the merged set of
directories, renames every file in parallel, optionally validates sizes, writes ``_SUCCESS``,
and deletes the task directories in parallel before the job directory.

Manifests are named by task *attempt* (``<attemptId>-manifest.json``), not by task as in the
seed, and the task result names the one to load: a losing speculative attempt can never replace
the winner's manifest.
"""

from __future__ import annotations

import time
from typing import Any

from .. import layout
from ..errors import NOTHING_VISIBLE, CommitError, PendingSetError
from ..formats import ManifestDirectory, ManifestFile, ManifestPayload, TaskManifest
from ..protocol import JobOutcome, TaskAttemptContext, TaskCommit, WrittenFile
from .conflict import PartitionConflict
from .rename_base import RenameCommitter

DIR_STATUS_DIR = 3  # the manifest's directory status "dir"


class ManifestCommitter(RenameCommitter):
    name = "manifest"
    conflict_class = PartitionConflict

    @property
    def job_dir(self) -> str:
        return layout.manifest_job_dir(self.location, self.job.job_id)

    def attempt_dir(self, task: TaskAttemptContext) -> str:
        return f"{self.job_dir}/tasks/{task.attempt_id}"

    def setup_job(self) -> None:
        super().setup_job()
        self.store.mkdirs(f"{self.job_dir}/tasks")
        self.store.mkdirs(f"{self.job_dir}/manifests")

    def commit_task(self, task: TaskAttemptContext, files: list[WrittenFile]) -> dict[str, Any]:
        root = self.attempt_dir(task)
        written = {f.relpath: f for f in files}
        entries: list[ManifestFile] = []
        directories: dict[str, ManifestDirectory] = {}
        for source, size in self.store.list_files(root):  # the task's scan, as in the protocol
            relpath = source[len(root) + 1 :]
            info = written.get(relpath)
            rows, partition = (info.rows, info.partition) if info else (0, {})
            entries.append(ManifestFile(source, self.path(relpath), size, rows, partition))
            parent = relpath.rsplit("/", 1)[0] if "/" in relpath else ""
            if parent:
                path = self.path(parent)
                directories[path] = ManifestDirectory(path, DIR_STATUS_DIR, parent.count("/") + 1)
        manifest = TaskManifest(
            self.job.job_id,
            task.task_id,
            task.attempt_id,
            root,
            entries,
            [directories[path] for path in sorted(directories)],
            self.store.counters.snapshot(),
        )
        final = f"{self.job_dir}/manifests/{task.attempt_id}-manifest.json"
        temporary = final + ".tmp"
        self.store.write_bytes(temporary, manifest.to_json().encode())
        self.store.delete(final)
        self.store.rename(temporary, final)
        return ManifestPayload(final).to_dict()

    def _load(self, message: TaskCommit) -> TaskManifest:
        manifest = ManifestPayload.from_dict(message.payload).manifest
        expected = f"{self.job_dir}/manifests/"
        if not manifest.startswith(expected):
            raise PendingSetError(f"manifest {manifest!r} is outside {expected!r}")
        doc = TaskManifest.from_json(self.store.read_bytes(manifest), self.job.job_id)
        if doc.attempt_id != message.attempt_id:
            raise PendingSetError(f"manifest of {doc.attempt_id}, not {message.attempt_id}")
        return doc

    def commit_files(self, messages: list[TaskCommit], phases: dict[str, float]) -> JobOutcome:
        started = time.monotonic()
        with self.stage(phases, "load_manifests"):
            try:
                manifests = self.parallel(self._load, messages)
            except Exception as exc:
                raise CommitError(
                    f"job {self.job.job_id}: loading the task manifests failed ({exc}); nothing "
                    f"became visible at {self.location.url()} and the job was aborted",
                    **self.error_fields(NOTHING_VISIBLE),
                ) from exc
        moves, entries, seen = [], [], set()
        for doc in manifests:
            for f in doc.files:
                target = f.destination
                self.relative(target)  # raises if a manifest points outside the destination
                if target in seen:
                    raise CommitError(f"two task manifests both write {target!r}")
                seen.add(target)
                moves.append((f.source, target))
                entries.append((target, f.rows, f.size, f.partition, doc.task_id))
        replaced = self.replaced_files([self.relative(t) for _, t in moves])
        with self.stage(phases, "create_target_dirs"):
            dirs = sorted({d.path for doc in manifests for d in doc.directories})
            self.parallel(self.store.mkdirs, dirs)
        with self.stage(phases, "rename_files"):
            self.move_all(moves)
        if self.job.options.validate_output:
            self._validate(entries)
        files = [self.entry(*e) for e in entries]
        tasks = [doc.counters for doc in manifests]
        durations = {m.task_id: m.summary.seconds for m in messages}
        return self.finish(files, replaced, phases, started, True, tasks, durations)

    def _validate(self, entries: list[tuple]) -> None:
        """job_stage_optional_validate_output: every file is there with its size."""
        sizes = dict(self.store.list_files(self.path()))
        wrong = [t for t, _rows, size, *_ in entries if sizes.get(t) != size]
        if wrong:
            raise CommitError(
                f"validation failed: {len(wrong)} files missing or resized: {wrong[:3]}"
            )

    def cleanup_job_dir(self) -> None:
        """Task directories in parallel first ("Manifest Committer Protocol", cleanup stage),
        then the job's."""
        tasks = f"{self.job_dir}/tasks"
        attempts = sorted(
            {p[len(tasks) + 1 :].split("/")[0] for p, _ in self.store.list_files(tasks)}
        )
        self.parallel(self.store.delete, [f"{tasks}/{a}" for a in attempts])
        self.store.delete(layout.manifest_job_root(self.location, self.job.job_id))
        if not self.store.list_files(self.temporary):
            self.store.delete(self.temporary)
