"""Job-level protocol shared by every S3 committer: one completion path for all of them.

Seed 000 ("The Netflix Staging committer", "Commit logic"): job commit completes the pending
uploads of the committed task attempts in parallel, O(files / threads), and never renames.
DESIGN section 4: replace completes first and deletes last, so a failed completion rolls back
with the old data untouched; cleanup is scoped to this job's uploads.
"""

from __future__ import annotations

import json
import threading
import time
from abc import abstractmethod
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from typing import Any

from .. import layout
from ..errors import (
    ALL_VISIBLE,
    MIXED_VISIBLE,
    NOTHING_VISIBLE,
    SOME_VISIBLE,
    CommitError,
    ConcurrentCommitError,
    PendingSetError,
    S3CommitError,
    StoreError,
)
from ..formats import (
    CommitMarker,
    Journal,
    PendingSet,
    PendingUpload,
    iostatistics,
)
from ..protocol import Committer, JobContext, JobOutcome, TaskCommit
from ..store import S3Store
from ..store.s3 import RequestCounters
from .cleanup import release, remove_job_files, stop_attempts
from .conflict import DirectoryConflict, partition_of
from .exclusive import require_conditional_create
from .report import build_success
from .verify import Completed, verify

#: A completion's error codes meaning "this upload is gone": maybe our own retried completion.
_GONE_UPLOAD = {"NoSuchUpload", "NoSuchKey", "404"}


class S3Committer(Committer):
    """Driver side of the S3 committers; subclasses decide how tasks produce uploads."""

    conflict_class: type[DirectoryConflict] = DirectoryConflict
    #: Take the per-destination commit marker. A table format whose log serialises commits
    #: (Delta) does not: its journal alone records an unfinished job (see committers/delta.py).
    locks_destination = True

    def __init__(self, job: JobContext) -> None:
        super().__init__(job)
        self.location = job.location
        self.conflict = self.make_conflict_policy()
        self._journal_written = False
        self._marker_owned = False
        self.aborted_uploads = 0  # by the last cleanup
        self.completion_checks = RequestCounters()  # how each completion was verified
        threads = max(job.options.threads, job.options.upload_threads)
        self.store = S3Store(job.settings, pool_size=threads + 4)

    def visible(self, relprefix: str) -> list[str]:
        """Keys a reader would see under a directory of the destination."""
        listed = self.store.list_objects(self.location.bucket, self.location.key(relprefix))
        return [o.key for o in listed if not layout.is_hidden(self.location.relative(o.key))]

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
        pendingset.retries = self.store.counters.retries()
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
        if self.job.options.exclusive_commit == "required":
            require_conditional_create(self.job.settings, self.location)
        marker = layout.marker_key(self.location)
        if self.locks_destination and self.store.head(self.location.bucket, marker) is not None:
            raise self._concurrent_commit_error(uploads_aborted=False)
        self.conflict.check_job(self.visible, self.location.url())
        self.store.put(self.location.bucket, self.alive_key, self.job.job_id.encode())

    # -- continuity: no attempt can add output after the job ended ----------------------------
    @property
    def alive_key(self) -> str:
        """Exists from job setup until job end; its deletion precedes the final upload listing."""
        return layout.alive_key(self.location, self.job.job_id)

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
                "attempt (a late retry or a losing speculative copy) discards its output",
                **self.error_fields(),
            )

    # -- job commit ---------------------------------------------------------------------------
    def load_messages(self, messages: list[TaskCommit]) -> list[PendingSet]:
        """Validate every pendingset; one destination key may be written by one task only."""
        loaded, owners = [], {}
        for message in messages:
            pendingset = PendingSet.from_dict(message.payload)
            pendingset.validate(self.job.job_id, self.location.bucket, self.location.dir_prefix)
            if pendingset.taskAttemptId != message.attempt_id:
                raise PendingSetError(
                    f"the message of {message.attempt_id} carries the pendingset of "
                    f"{pendingset.taskAttemptId}"
                )
            for commit in pendingset.commits:
                other = owners.setdefault(commit.destinationKey, pendingset.taskId)
                if other != pendingset.taskId:
                    raise PendingSetError(
                        f"tasks {other} and {pendingset.taskId} both wrote "
                        f"{commit.destinationKey!r}"
                    )
            loaded.append(pendingset)
        return loaded

    def commit_job(self, messages: list[TaskCommit], phases: dict[str, float]) -> JobOutcome:
        """Named steps: begin (marker, listing, journal), complete, delete replaced, finish.

        One guarded unit: anything raised before the first completion, KeyboardInterrupt
        included, aborts the job; from the first completion on, the journal names every
        upload, so a failure rolls back truthfully (``_complete_all``) and a crash is resolved
        by ``s3commit recover`` / ``abort``.
        """
        started = time.monotonic()
        try:
            pendingsets = self.load_messages(messages)
            commits = [c for p in pendingsets for c in p.commits]
            journal = self._begin_commit(commits, phases)
        except BaseException as exc:
            self._abort_noting(messages, exc)
            raise
        with self.stage(phases, "complete_uploads"):
            etags = self._complete_all(journal.commits, pendingsets)
        durations = {m.task_id: m.summary.seconds for m in messages}
        try:
            return self._after_completion(journal, etags, pendingsets, durations, phases, started)
        except KeyboardInterrupt as interrupt:
            url = self.location.url()
            interrupt.add_note(
                f"s3commit: job {self.job.job_id} was interrupted after every file was completed "
                f"at {url}{self._locked_note}. `s3commit recover {url}` finishes the job, "
                f"`s3commit abort {url}` rolls it back."
            )
            raise

    def _after_completion(
        self,
        journal: Journal,
        etags: dict[str, str],
        pendingsets: list[PendingSet],
        durations: dict[str, float],
        phases: dict[str, float],
        started: float,
    ) -> JobOutcome:
        with self.stage(phases, "replace_delete"):
            self._delete_replaced(journal.replaced)
        return self.finish_commit(journal, etags, pendingsets, durations, phases, started)

    def _delete_replaced(self, replaced: list[str]) -> None:
        if not replaced:
            return
        try:
            self.store.delete_keys(self.location.bucket, replaced)
        except S3CommitError as exc:
            url = self.location.url()
            raise CommitError(
                f"job {self.job.job_id}: the new files are visible at {url} but deleting the "
                f"{len(replaced)} replaced objects failed ({exc}); old and new data may both be "
                "visible and the destination stays locked. Finish the commit with "
                f"`s3commit recover {url}` (or undo it with `s3commit abort {url}`).",
                **self.error_fields(MIXED_VISIBLE, "recover"),
            ) from exc

    def _abort_noting(self, messages: list[TaskCommit], cause: BaseException) -> None:
        """Abort while ``cause`` propagates; what happened goes into its notes, never raised."""
        url = self.location.url()
        try:
            self.abort_job(messages)
        except Exception as exc:
            cause.add_note(
                f"s3commit: aborting job {self.job.job_id} failed too ({exc}): its pending "
                f"uploads and hidden files may remain; run `s3commit abort {url}`."
            )
            return
        if isinstance(cause, KeyboardInterrupt):
            cause.add_note(
                f"s3commit: job {self.job.job_id} was interrupted before any file was completed "
                f"and was aborted: nothing of it is visible at {url}."
            )

    def finish_commit(
        self,
        journal: Journal,
        etags: dict[str, str],
        pendingsets: list[PendingSet],
        durations: dict[str, float],
        phases: dict[str, float],
        started: float,
    ) -> JobOutcome:
        """Every upload is complete and replaced data deleted: clean up, mark, release.

        Nothing here can make data visible or invisible any more; a failure says so and names
        the command that finishes the job and releases the destination.
        """
        commits = journal.commits
        files = [self._file_entry(c, etags[c.uploadId]) for c in commits]
        with self.stage(phases, "cleanup"):
            self._finishing(
                "cleaning up its pending uploads and hidden files",
                self.cleanup,
                pendingsets,
                {c.uploadId for c in commits},
            )
        phases["job_commit"] = time.monotonic() - started
        requests = self._request_counts(pendingsets)
        if journal.markSuccess:
            requests["PutObject"] = requests.get("PutObject", 0) + 1  # the _SUCCESS below
        requests["DeleteObjects"] = requests.get("DeleteObjects", 0) + 1  # journal + marker
        partitions = sorted({self._partition_path(c) for c in commits})
        success = build_success(
            self.job,
            self.name,
            files,
            partitions,
            len(journal.replaced),
            phases,
            requests,
            task_durations=durations,
            retries=self._retry_counts(pendingsets),
            completion_checks=self.completion_checks.snapshot(),
        )
        success.update(self.success_fields())
        if journal.markSuccess:
            self._finishing("writing _SUCCESS", self._write_success, success)
        self._finishing("releasing the destination", self._end_commit)
        return JobOutcome(files, success, phases, requests)

    @property
    def _locked_note(self) -> str:
        return "; the destination stays locked for other jobs" if self.locks_destination else ""

    def _finishing(self, step: str, action, *args: Any) -> None:
        try:
            action(*args)
        except S3CommitError as exc:
            url = self.location.url()
            raise CommitError(
                f"job {self.job.job_id} committed: every file is complete and visible at {url}, "
                f"but {step} failed ({exc}){self._locked_note}. `s3commit recover {url}` "
                "finishes this job.",
                **self.error_fields(ALL_VISIBLE, "recover"),
            ) from exc

    # -- the journal and the per-destination commit marker ------------------------------------
    @property
    def journal_key(self) -> str:
        return layout.journal_key(self.location, self.job.job_id)

    def _begin_commit(self, commits: list[PendingUpload], phases: dict[str, float]) -> Journal:
        """Marker first, then list what replace deletes, then the journal.

        Listing under the marker means no other job can commit between our listing and our
        deletes (issue: two racing replace jobs both stayed visible when the listing came
        first). A crash between marker and journal leaves nothing visible: `s3commit abort`
        cleans by job UUID.
        """
        bucket = self.location.bucket
        if self.locks_destination:
            marker = CommitMarker(self.job.job_id, self.journal_key)
            created = self.store.put_if_absent(
                bucket, layout.marker_key(self.location), marker.to_json().encode()
            )
            # A retried create whose first attempt landed answers 412 on our own marker.
            if not created and self._marker_job() != self.job.job_id:
                raise self._concurrent_commit_error(uploads_aborted=True)
            self._marker_owned = True

        with self.stage(phases, "conflict_resolution"):
            new_keys = {c.destinationKey for c in commits}
            partitions = {self._partition_path(c) for c in commits}
            replaced = [
                o for o in self.conflict.replaced(self.visible, partitions) if o not in new_keys
            ]
        journal = Journal(
            jobId=self.job.job_id,
            destination=self.location.url(),
            bucket=bucket,
            committer=self.name,
            conflictMode=self.job.conflict_mode,
            format=self.job.format,
            partitionBy=list(self.job.partition_by),
            markSuccess=self.job.options.mark_successful_jobs,
            commits=commits,
            replaced=replaced,
            options=self.job.options.public(),
            extraData=self.journal_extra(),
        )
        self._journal_written = True  # from the first attempt on it may exist: abort deletes it
        self.store.put(bucket, self.journal_key, journal.to_json().encode())
        return journal

    def journal_extra(self) -> dict[str, Any]:
        """What a table format needs in the journal to finish the job (``Journal.extraData``)."""
        return {}

    def success_fields(self) -> dict[str, Any]:
        """Fields a table format adds to ``_SUCCESS`` (Delta: the version the job produced)."""
        return {}

    def _commit_keys(self) -> list[str]:
        """The journal, and the marker if this job takes one: released together, marker last."""
        marker = [layout.marker_key(self.location)] if self.locks_destination else []
        return [self.journal_key, *marker]

    def _marker_job(self) -> str | None:
        try:
            body = self.store.get(self.location.bucket, layout.marker_key(self.location))
            return CommitMarker.from_json(body).jobId
        except S3CommitError:
            return None

    def _end_commit(self) -> None:
        release(self.store, self.location, self.job.job_id, self._commit_keys())

    def _concurrent_commit_error(self, uploads_aborted: bool) -> ConcurrentCommitError:
        url = self.location.url()
        try:
            marker = CommitMarker.from_json(
                self.store.get(self.location.bucket, layout.marker_key(self.location))
            )
            other = f"job {marker.jobId} (started {_ms_date(marker.started)} on {marker.hostname})"
        except S3CommitError:
            other = "another job"
        done = "its uploads were aborted; " if uploads_aborted else ""
        return ConcurrentCommitError(
            f"{other} is committing into {url}, or its commit crashed unfinished. Wait for it, "
            f"or resolve it with `s3commit recover {url}` (finish it) or `s3commit abort {url}` "
            f"(roll it back). This job ({self.job.job_id}) did not commit: {done}nothing of it "
            "is visible.",
            **self.error_fields(NOTHING_VISIBLE, "recover"),
        )

    def _write_success(self, success: dict[str, Any]) -> None:
        body = json.dumps(success, indent=2, ensure_ascii=False).encode()
        self.store.put(
            self.location.bucket,
            self.location.key(layout.SUCCESS_MARKER),
            body,
            "application/json",
        )

    def _partition_path(self, commit: PendingUpload) -> str:
        return partition_of(self.location.relative(commit.destinationKey))

    # -- completion: verified, and rolled back truthfully --------------------------------------
    def _complete_all(
        self, commits: list[PendingUpload], pendingsets: list[PendingSet]
    ) -> dict[str, str]:
        """Complete every upload in parallel, verify, and return the ETags by upload id.

        A completion that was sent may have made its file visible whatever the answer said, so
        every key sent is remembered; after the first failure no new completion starts, and a
        failure (or Ctrl-C) rolls the job back before anything is reported.
        """
        sent: list[PendingUpload] = []
        try:
            completed = self._send_completions(commits, sent)
            trusted = [c for c in completed if c.trusted and not self.job.options.validate_output]
            etags = {c.commit.uploadId: c.answer for c in trusted}
            self.completion_checks.merge({"answered": len(trusted)} if trusted else {})
            unchecked = [c for c in completed if c.commit.uploadId not in etags]
            etags.update(
                verify(self.store, unchecked, self.job.options.threads, self.completion_checks)
            )
            return etags
        except KeyboardInterrupt as interrupt:
            state = self._roll_back(sent, pendingsets)[1]
            interrupt.add_note(
                f"s3commit: job {self.job.job_id} was interrupted and rolled back. {state}"
            )
            raise
        except Exception as exc:
            visible, state = self._roll_back(sent, pendingsets)
            raise CommitError(
                f"job {self.job.job_id}: {exc}; the job was rolled back. {state}",
                **self.rolled_back_fields(visible),
            ) from exc

    def _send_completions(
        self, commits: list[PendingUpload], sent: list[PendingUpload]
    ) -> list[Completed]:
        """Completions in parallel; the first failure stops the rest and is raised."""
        completed: list[Completed] = []
        failures: list[tuple[PendingUpload, BaseException]] = []
        stop = threading.Event()

        def complete(commit: PendingUpload) -> None:
            if stop.is_set():
                return
            sent.append(commit)
            try:
                completed.append(Completed(commit, self._complete_one(commit)))
            except BaseException as exc:
                failures.append((commit, exc))
                stop.set()

        pool = ThreadPoolExecutor(self.job.options.threads, "s3commit-complete")
        try:
            for future in [pool.submit(complete, c) for c in commits]:
                future.result()
        finally:  # Ctrl-C too: stop, and wait only for completions already sent
            stop.set()
            pool.shutdown(wait=True, cancel_futures=True)
        if failures:
            commit, cause = failures[0]
            raise CommitError(
                f"completing {commit.destinationKey!r} failed ({cause}); {len(failures)} of "
                f"{len(commits)} uploads failed"
            ) from cause
        return completed

    def _complete_one(self, commit: PendingUpload) -> str | None:
        """The completion's answered ETag; None when a retry found the upload gone.

        A retried completion whose first attempt had landed is told the upload is gone:
        verification decides whether the object is ours.
        """
        try:
            return self.store.complete(
                commit.bucket, commit.destinationKey, commit.uploadId, commit.etags
            )
        except StoreError as exc:
            if exc.code not in _GONE_UPLOAD:
                raise
            return None

    def rolled_back_fields(self, visible: str | None) -> dict:
        """Error fields after :meth:`_roll_back`: ``s3commit abort`` unless nothing is left."""
        return self.error_fields(visible, None if visible == NOTHING_VISIBLE else "abort")

    def _roll_back(
        self, sent: list[PendingUpload], pendingsets: list[PendingSet]
    ) -> tuple[str | None, str]:
        """Undo a job commit that failed before its replace deletes; say what is visible
        (a key of ``errors.VISIBLE``, None when unchecked) and in words.

        Every key a completion was sent for is deleted (they carry this job's UUID: no other
        job's data), every other upload aborted; then a listing of those keys decides the
        text. The journal and marker are released only when nothing of the job is left.
        """
        bucket, url = self.location.bucket, self.location.url()
        keys = sorted({c.destinationKey for c in sent})
        problems = []
        try:
            if keys:
                self.store.delete_keys(bucket, keys)
        except S3CommitError as exc:
            problems.append(f"deleting completed files failed: {exc}")
        try:
            self.cleanup(pendingsets, committed=set())
        except S3CommitError as exc:
            problems.append(f"aborting uploads failed: {exc}")
        try:
            listed = {o.key for o in self.store.list_objects(bucket, self.location.dir_prefix)}
            visible = [k for k in keys if k in listed]
        except S3CommitError as exc:
            return None, (
                f"Rolling back could not be checked ({exc}); files of job {self.job.job_id} may "
                f"be visible. Run `s3commit abort {url}`."
            )
        if visible or problems:
            shown = ", ".join(repr(k) for k in visible[:20])
            more = f" and {len(visible) - 20} more" if len(visible) > 20 else ""
            return SOME_VISIBLE if visible else NOTHING_VISIBLE, (
                f"Rolling back was incomplete ({'; '.join(problems) or 'files remain'}): "
                f"{len(visible)} files of this job are visible{': ' + shown if visible else ''}"
                f"{more}. The existing data is untouched; the destination stays locked until "
                f"`s3commit abort {url}` removes them."
            )
        release(self.store, self.location, self.job.job_id, self._commit_keys())
        self._journal_written = self._marker_owned = False
        checked = f" (checked: none of the {len(keys)} completed keys is listed)" if keys else ""
        return NOTHING_VISIBLE, (
            f"Nothing of this job is visible{checked}; the existing data is untouched."
        )

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

    def _retry_counts(self, pendingsets: list[PendingSet]) -> dict[str, int]:
        """Retries by reason, of the driver and every committed task attempt."""
        totals = RequestCounters()
        totals.merge(self.store.counters.retries())
        for pendingset in pendingsets:
            totals.merge(pendingset.retries)
        return totals.snapshot()

    def _request_counts(self, pendingsets: list[PendingSet]) -> dict[str, int]:
        """Driver requests plus the requests of every committed task attempt."""
        totals = dict(self.store.counters.snapshot())
        for pendingset in pendingsets:
            for op, n in pendingset.iostatistics.get("counters", {}).items():
                totals[op] = totals.get(op, 0) + n
        return dict(sorted(totals.items()))

    # -- abort and cleanup --------------------------------------------------------------------
    def cleanup(self, received: list[PendingSet], committed: set[str]) -> None:
        """Abort this job's uploads that were not committed, then drop its hidden metadata.

        Uploads are found three ways: the pendingsets the tasks' messages carried
        (``received``), the metadata persisted by attempts whose messages never arrived (failed
        or speculative losers), and a listing of pending uploads whose keys carry the job UUID
        (or all of them, if asked). How many were still pending is kept
        in ``aborted_uploads`` (``s3commit recover`` reports it).
        """
        bucket = self.location.bucket
        stop_attempts(self.store, self.location, self.job.job_id)  # first: see ensure_job_alive
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
                commits += _load_commits_quietly(self.store.get(bucket, key))
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
        self.aborted_uploads = remove_job_files(
            self.store,
            self.location,
            self.job.job_id,
            uploads=targets,
            hidden=hidden if self.delete_metadata else [],
            threads=self.job.options.threads,
        )

    @property
    def delete_metadata(self) -> bool:
        return True

    def abort_job(self, messages: list[TaskCommit]) -> None:
        self.cleanup(_parse_quietly(messages), committed=set())
        owned = [self.journal_key] if self._journal_written else []
        owned += [layout.marker_key(self.location)] if self._marker_owned else []
        release(self.store, self.location, self.job.job_id, owned)


def _ms_date(epoch_ms: int) -> str:
    return datetime.fromtimestamp(epoch_ms / 1000, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _load_commits_quietly(body: bytes) -> list[PendingUpload]:
    """Uploads named by a saved ``.pendingset``; none if unreadable.

    Unreadable metadata is skipped: its uploads are still found by the listing in cleanup.
    """
    try:
        return PendingSet.from_json(body).commits
    except (PendingSetError, ValueError, TypeError):
        return []


def _parse_quietly(messages: list[TaskCommit]) -> list[PendingSet]:
    found = []
    for message in messages:
        try:
            found.append(PendingSet.from_dict(message.payload))
        except PendingSetError:
            continue
    return found
