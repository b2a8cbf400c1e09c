"""Job-level protocol shared by every S3 committer: one completion path for all of them.

Seed 000 ("The Netflix Staging committer", "Commit logic"): job commit completes the pending
uploads of the committed task attempts in parallel, O(files / threads), and never renames.
DESIGN section 4: replace completes first and deletes last, so a failed completion rolls back
with the old data untouched; cleanup is scoped to this job's uploads.
"""

from __future__ import annotations

import json
import time
from abc import abstractmethod
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from typing import Any

from ..errors import CommitError, ConcurrentCommitError, PendingSetError, S3CommitError
from ..formats import (
    CommitMarker,
    Journal,
    PendingSet,
    PendingUpload,
    iostatistics,
)
from ..paths import SUCCESS_MARKER, is_hidden
from ..protocol import Committer, JobContext, JobOutcome
from ..store import S3Store
from ..store.s3 import multipart_etag
from .conflict import DirectoryConflict, partition_of
from .report import build_success


class S3Committer(Committer):
    """Driver side of the S3 committers; subclasses decide how tasks produce uploads."""

    conflict_class: type[DirectoryConflict] = DirectoryConflict

    def __init__(self, job: JobContext) -> None:
        super().__init__(job)
        self.location = job.location
        self.conflict = self.make_conflict_policy()
        self._journal_written = False
        self._marker_owned = False
        threads = max(job.options.threads, job.options.upload_threads)
        self.store = S3Store(job.settings, pool_size=threads + 4)

    def visible(self, relprefix: str) -> list[str]:
        """Keys a reader would see under a directory of the destination."""
        listed = self.store.list_objects(self.location.bucket, self.location.key(relprefix))
        return [o.key for o in listed if not is_hidden(self.location.relative(o.key))]

    def make_conflict_policy(self) -> DirectoryConflict:
        return self.conflict_class(self.job.conflict_mode)

    # -- this job's hidden metadata: subclasses say where --------------------------------------
    @property
    @abstractmethod
    def metadata_prefix(self) -> str:
        """Hidden directory of this job's pendingsets; deleted at job end."""

    @abstractmethod
    def pendingset_key(self, pendingset: PendingSet) -> str: ...

    @abstractmethod
    def attempt_of(self, key: str) -> str | None:
        """The task attempt that saved the metadata file ``key``; None to never read it."""

    def save_pendingset(self, pendingset: PendingSet) -> None:
        """Persisted as well as returned, so an abort after a driver crash can find uploads."""
        # The statistics include the two requests they cannot observe: the PUT that saves them
        # and the job-alive check after it.
        counters = self.store.counters.snapshot()
        for op in ("PutObject", "HeadObject"):
            counters[op] = counters.get(op, 0) + 1
        pendingset.iostatistics = iostatistics(counters)
        body = pendingset.to_json().encode()
        key = self.pendingset_key(pendingset)
        self.store.put(self.location.bucket, key, body)
        try:
            self.ensure_job_alive()
        except CommitError:
            self.store.delete_keys(self.location.bucket, [key])
            raise

    # -- job setup ----------------------------------------------------------------------------
    def setup_job(self) -> None:
        self.store.check_bucket(self.location.bucket)
        if self.store.head(self.location.bucket, self.location.marker_key) is not None:
            raise self._concurrent_commit_error(uploads_aborted=False)
        self.conflict.check_job(self.visible, self.location.url())
        self.store.put(self.location.bucket, self.alive_key, self.job.job_id.encode())

    # -- continuity: no attempt can add output after the job ended ----------------------------
    @property
    def alive_key(self) -> str:
        """Exists from job setup until job end; its deletion precedes the final upload listing."""
        return self.location.job_prefix(self.job.job_id) + "alive"

    def ensure_job_alive(self) -> None:
        """Called by an attempt after it started uploads and saved the metadata naming them.

        Seed 003 ("Correctness", continuity): a straggler must never make output visible
        or leave it pending after the job ended. Job end deletes the alive marker *before* it
        lists this job's pending uploads and metadata, so an upload or metadata file created
        before a successful check here is found by that listing, and one created before a
        failed check is removed by the attempt itself (its task abort).
        """
        if self.store.head(self.location.bucket, self.alive_key) is None:
            raise CommitError(
                f"job {self.job.job_id} has already ended at {self.location.url()}: this "
                "attempt (a late retry or a losing speculative copy) discards its output"
            )

    # -- job commit ---------------------------------------------------------------------------
    def load_messages(self, messages: list[str]) -> list[PendingSet]:
        """Validate every pendingset; one destination key may be written by one task only."""
        loaded, owners = [], {}
        for message in messages:
            pendingset = PendingSet.from_json(message)
            pendingset.validate(self.job.job_id, self.location.bucket, self.location.dir_prefix)
            for commit in pendingset.commits:
                other = owners.setdefault(commit.destinationKey, pendingset.taskId)
                if other != pendingset.taskId:
                    raise PendingSetError(
                        f"tasks {other} and {pendingset.taskId} both wrote "
                        f"{commit.destinationKey!r}"
                    )
            loaded.append(pendingset)
        return loaded

    def commit_job(self, messages: list[str], phases: dict[str, float]) -> JobOutcome:
        started = time.monotonic()
        try:
            pendingsets = self.load_messages(messages)
        except PendingSetError:
            self.abort_job(messages)
            raise
        commits = [c for p in pendingsets for c in p.commits]
        partitions = {self._partition_path(c) for c in commits}
        new_keys = {c.destinationKey for c in commits}

        mark = time.monotonic()
        try:
            replaced = [
                o for o in self.conflict.replaced(self.visible, partitions) if o not in new_keys
            ]
        except S3CommitError:
            self.abort_job(messages)
            raise
        phases["conflict_resolution"] = time.monotonic() - mark

        journal = Journal(
            jobId=self.job.job_id,
            destination=self.location.url(),
            bucket=self.location.bucket,
            committer=self.name,
            conflictMode=self.job.conflict_mode,
            format=self.job.format,
            partitionBy=list(self.job.partition_by),
            markSuccess=self.job.options.mark_successful_jobs,
            commits=commits,
            replaced=replaced,
            options=self.job.options.public(),
        )
        self._begin_commit(journal, messages)

        mark = time.monotonic()
        etags = self._complete_all(commits, messages)
        phases["complete_uploads"] = time.monotonic() - mark

        mark = time.monotonic()
        if replaced:
            try:
                self.store.delete_keys(self.location.bucket, replaced)
            except S3CommitError as exc:
                raise CommitError(
                    f"job {self.job.job_id}: the new files are visible at {self.location.url()} "
                    f"but deleting the {len(replaced)} replaced objects failed ({exc}); old and "
                    f"new data are both visible. Finish the commit with `s3commit recover "
                    f"{self.location.url()}` (or undo it with `s3commit abort ...`)."
                ) from exc
        phases["replace_delete"] = time.monotonic() - mark
        return self.finish_commit(journal, etags, messages, pendingsets, phases, started)

    def finish_commit(
        self,
        journal: Journal,
        etags: dict[str, str],
        messages: list[str],
        pendingsets: list[PendingSet],
        phases: dict[str, float],
        started: float,
    ) -> JobOutcome:
        """Every upload is complete and replaced data deleted: clean up, mark, release."""
        commits = journal.commits
        files = [self._file_entry(c, etags[c.uploadId]) for c in commits]
        mark = time.monotonic()
        self.cleanup(messages, committed={c.uploadId for c in commits})
        phases["cleanup"] = time.monotonic() - mark
        phases["job_commit"] = time.monotonic() - started
        requests = self._request_counts(pendingsets)
        if journal.markSuccess:
            requests["PutObject"] = requests.get("PutObject", 0) + 1  # the _SUCCESS below
        requests["DeleteObjects"] = requests.get("DeleteObjects", 0) + 1  # journal + marker
        partitions = sorted({self._partition_path(c) for c in commits})
        durations = {p.taskId: p.taskDurationSeconds for p in pendingsets}
        success = build_success(
            self.job,
            self.name,
            files,
            partitions,
            len(journal.replaced),
            phases,
            requests,
            task_durations=durations,
        )
        if journal.markSuccess:
            self._write_success(success)
        self._end_commit()
        return JobOutcome(files, success, phases, requests)

    # -- the journal and the per-destination commit marker ------------------------------------
    @property
    def journal_key(self) -> str:
        return self.location.journal_key(self.job.job_id)

    def _begin_commit(self, journal: Journal, messages: list[str]) -> None:
        """Journal first, then the marker; a marker that exists means another commit."""
        bucket = self.location.bucket
        self.store.put(bucket, self.journal_key, journal.to_json().encode())
        self._journal_written = True
        marker = CommitMarker(self.job.job_id, self.journal_key)
        body = marker.to_json().encode()
        created = self.store.put_if_absent(bucket, self.location.marker_key, body)
        # A retried create whose first attempt landed answers 412 on our own marker.
        if not created and self._marker_job() != self.job.job_id:
            error = self._concurrent_commit_error(uploads_aborted=True)
            self.abort_job(messages)
            raise error
        self._marker_owned = True

    def _marker_job(self) -> str | None:
        try:
            body = self.store.get(self.location.bucket, self.location.marker_key)
            return CommitMarker.from_json(body).jobId
        except S3CommitError:
            return None

    def _end_commit(self) -> None:
        self.store.delete_keys(self.location.bucket, [self.journal_key, self.location.marker_key])

    def _concurrent_commit_error(self, uploads_aborted: bool) -> ConcurrentCommitError:
        url = self.location.url()
        try:
            marker = CommitMarker.from_json(
                self.store.get(self.location.bucket, self.location.marker_key)
            )
            other = f"job {marker.jobId} (started {_ms_date(marker.started)} on {marker.hostname})"
        except S3CommitError:
            other = "another job"
        done = "its uploads were aborted; " if uploads_aborted else ""
        return ConcurrentCommitError(
            f"{other} is committing into {url}, or its commit crashed unfinished. Wait for it, "
            f"or resolve it with `s3commit recover {url}` (finish it) or `s3commit abort {url}` "
            f"(roll it back). This job ({self.job.job_id}) did not commit: {done}nothing of it "
            "is visible."
        )

    def _write_success(self, success: dict[str, Any]) -> None:
        body = json.dumps(success, indent=2, ensure_ascii=False).encode()
        try:
            self.store.put(
                self.location.bucket, self.location.key(SUCCESS_MARKER), body, "application/json"
            )
        except S3CommitError as exc:
            raise CommitError(
                f"job {self.job.job_id} committed every file at {self.location.url()}, but "
                f"writing _SUCCESS failed ({exc}): the data is complete, the marker is missing"
            ) from exc

    def _partition_path(self, commit: PendingUpload) -> str:
        return partition_of(self.location.relative(commit.destinationKey))

    def _complete_all(self, commits: list[PendingUpload], messages: list[str]) -> dict[str, str]:
        """Complete every upload in parallel; on any failure roll back and raise."""
        results: dict[str, str] = {}
        failures: list[tuple[PendingUpload, BaseException]] = []

        def complete(commit: PendingUpload) -> None:
            try:
                etag = self.store.complete(
                    commit.bucket, commit.destinationKey, commit.uploadId, commit.etags
                )
                expected = multipart_etag(commit.etags)
                if expected is not None and etag != expected:
                    raise CommitError(
                        f"{commit.destinationKey!r} completed with ETag {etag}, expected {expected}"
                    )
                if self.job.options.validate_output:
                    info = self.store.head(commit.bucket, commit.destinationKey)
                    if info is None or info.size != commit.length:
                        raise CommitError(
                            f"{commit.destinationKey!r} has size "
                            f"{info.size if info else 'missing'}, the task wrote {commit.length}"
                        )
                results[commit.uploadId] = etag
            except BaseException as exc:  # collected, then rolled back below
                failures.append((commit, exc))

        with ThreadPoolExecutor(self.job.options.threads, "s3commit-complete") as pool:
            list(pool.map(complete, commits))
        if not failures:
            return results
        completed = [c.destinationKey for c in commits if c.uploadId in results]
        rollback_error = None
        try:
            if completed:
                self.store.delete_keys(self.location.bucket, completed)
            self.abort_job(messages)
        except S3CommitError as exc:
            rollback_error = exc
        commit, cause = failures[0]
        state = (
            "Nothing became visible and the existing data is untouched."
            if rollback_error is None
            else f"Rolling back failed too ({rollback_error}): files of job {self.job.job_id} "
            f"may be visible; run `s3commit abort {self.location.url()}`."
        )
        raise CommitError(
            f"job {self.job.job_id}: completing {commit.destinationKey!r} failed ({cause}); "
            f"{len(failures)} of {len(commits)} uploads failed and the job was rolled back. "
            f"{state}"
        ) from cause

    def _file_entry(self, commit: PendingUpload, etag: str) -> dict[str, Any]:
        return {
            "path": self.location.url(commit.destinationKey),
            "key": commit.destinationKey,
            "size": commit.length,
            "rows": commit.rows,
            "partition": commit.partition,
            "etag": etag,
            "task": commit.taskId,
        }

    def _request_counts(self, pendingsets: list[PendingSet]) -> dict[str, int]:
        """Driver requests plus the requests of every committed task attempt."""
        totals = dict(self.store.counters.snapshot())
        for pendingset in pendingsets:
            for op, n in pendingset.iostatistics.get("counters", {}).items():
                totals[op] = totals.get(op, 0) + n
        return dict(sorted(totals.items()))

    # -- abort and cleanup --------------------------------------------------------------------
    def cleanup(self, messages: list[str], committed: set[str]) -> None:
        """Abort this job's uploads that were not committed, then drop its hidden metadata.

        Uploads are found three ways: the commit messages, the metadata persisted by attempts
        whose messages never arrived (failed or speculative losers), and a listing of pending
        uploads whose keys carry the job UUID (or all of them, if asked).
        """
        bucket = self.location.bucket
        self.store.delete_keys(bucket, [self.alive_key])  # first: see ensure_job_alive
        received = _parse_quietly(messages)
        known_attempts = {p.taskAttemptId for p in received}
        hidden = [
            o.key
            for o in self.store.list_objects(bucket, self.metadata_prefix)
            if o.key != self.journal_key  # removed with the marker, last
        ]
        commits = [c for p in received for c in p.commits]
        for key in hidden:
            attempt = self.attempt_of(key)
            if attempt is not None and attempt not in known_attempts:
                commits += load_commits_quietly(self.store.get(bucket, key))
        targets: dict[str, str] = {}
        for commit in commits:
            if (
                commit.uploadId not in committed
                and commit.bucket == bucket
                and commit.destinationKey.startswith(self.location.dir_prefix)
            ):
                targets[commit.uploadId] = commit.destinationKey
        scope_all = self.job.options.abort_pending_uploads == "all"
        for upload in self.store.list_pending(bucket, self.location.dir_prefix):
            if upload.upload_id in committed:
                continue
            if scope_all or self.job.job_id in upload.key:
                targets[upload.upload_id] = upload.key
        if targets:
            with ThreadPoolExecutor(self.job.options.threads, "s3commit-abort") as pool:
                list(
                    pool.map(
                        lambda item: self.store.abort(bucket, item[1], item[0]), targets.items()
                    )
                )
        if hidden and self.delete_metadata:
            self.store.delete_keys(bucket, hidden)

    @property
    def delete_metadata(self) -> bool:
        return True

    def abort_job(self, messages: list[str]) -> None:
        self.cleanup(messages, committed=set())
        if self._journal_written:
            owned = [self.location.marker_key] if self._marker_owned else []
            self.store.delete_keys(self.location.bucket, [self.journal_key, *owned])


def _ms_date(epoch_ms: int) -> str:
    return datetime.fromtimestamp(epoch_ms / 1000, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def load_commits_quietly(body: bytes) -> list[PendingUpload]:
    """Uploads named by a ``.pendingset`` or a single ``.pending``; none if unreadable.

    Unreadable metadata is skipped: its uploads are still found by the listing in cleanup.
    """
    try:
        raw = json.loads(body)
        if isinstance(raw, dict) and "commits" in raw:
            return PendingSet.from_json(body).commits
        return [PendingUpload(**raw)]
    except (PendingSetError, ValueError, TypeError):
        return []


def _parse_quietly(messages: list[str | bytes]) -> list[PendingSet]:
    found = []
    for message in messages:
        try:
            found.append(PendingSet.from_json(message))
        except PendingSetError:
            continue
    return found
