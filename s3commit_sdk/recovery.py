"""Roll an unfinished job commit forward (``recover``) or back (``abort``) from its journal.

DESIGN section 4, "Exclusive, recoverable job commit": the commit journal lists every upload to
complete and every object ``replace`` deletes, written before any of it happens, so a commit
killed at any point can be brought, idempotently, to the state an uninterrupted commit (or no
commit at all) would have produced. Both are safe to rerun after their own crash.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from .committers import make_committer
from .committers.magic import MAGIC_DIR
from .errors import CommitError, PendingSetError, S3CommitError
from .formats import CommitMarker, Journal, PendingUpload, parse_success
from .options import resolve_options
from .paths import SUCCESS_MARKER, S3Location, is_hidden, parse_s3_url
from .protocol import JobContext
from .store import S3Settings, S3Store
from .store.s3 import multipart_etag


@dataclass
class RecoveryReport:
    """What ``recover`` or ``abort`` found and did; printed by the CLI."""

    destination: str
    job_id: str | None = None
    completed: list[str] = field(default_factory=list)
    already_visible: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    aborted_uploads: int = 0
    notes: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        if self.job_id is None:
            return [f"no unfinished commit at {self.destination}", *self.notes]
        return [
            f"job {self.job_id} at {self.destination}",
            f"completed uploads: {len(self.completed)}",
            f"already visible: {len(self.already_visible)}",
            f"deleted objects: {len(self.deleted)}",
            f"aborted pending uploads: {self.aborted_uploads}",
            *self.notes,
        ]


class _Unfinished:
    """The marker of an unfinished commit, its journal if it can be trusted, and a store."""

    def __init__(self, path: str, options: dict[str, Any] | None) -> None:
        self.location: S3Location = parse_s3_url(path)
        self.options = resolve_options(options)
        self.store = S3Store(S3Settings.resolve(self.options), pool_size=self.options.threads + 4)
        self.marker: CommitMarker | None = None
        self.journal: Journal | None = None
        self.journal_error: str | None = None
        bucket, key = self.location.bucket, self.location.marker_key
        if self.store.head(bucket, key) is None:
            return
        try:
            self.marker = CommitMarker.from_json(self.store.get(bucket, key))
        except PendingSetError as exc:
            self.journal_error = f"the commit marker is unreadable: {exc}"
            return
        journal_key = self.location.journal_key(self.marker.jobId)
        try:
            if self.store.head(bucket, journal_key) is None:
                raise PendingSetError(f"no journal at {journal_key!r}")
            journal = Journal.from_json(self.store.get(bucket, journal_key))
            journal.validate(self.marker.jobId, bucket, self.location.dir_prefix)
            self.journal = journal
        except PendingSetError as exc:
            self.journal_error = str(exc)

    @property
    def job_id(self) -> str | None:
        return self.marker.jobId if self.marker else None

    def committer(self):
        journal = self.journal
        assert journal is not None
        job = JobContext(
            location=self.location,
            committer=journal.committer,
            conflict_mode=journal.conflictMode,
            partition_by=tuple(journal.partitionBy),
            format=journal.format,
            options=self.options,
            settings=self.store.settings,
            job_id=journal.jobId,
            job_id_source="commit journal (recovered)",
        )
        return make_committer(job)

    def pending_ids(self) -> set[str]:
        uploads = self.store.list_pending(self.location.bucket, self.location.dir_prefix)
        return {u.upload_id for u in uploads}

    def is_ours(self, commit: PendingUpload) -> bool:
        """The object at the key is the one this upload produced (ETag, else size)."""
        info = self.store.head(commit.bucket, commit.destinationKey)
        if info is None:
            return False
        expected = multipart_etag(commit.etags)
        return info.etag == expected if expected else info.size == commit.length

    def release(self) -> None:
        """Remove the journal and, last, the marker."""
        keys = [self.location.marker_key]
        if self.job_id:
            keys.insert(0, self.location.journal_key(self.job_id))
        self.store.delete_keys(self.location.bucket, keys)


def recover(path: str, options: dict[str, Any] | None = None) -> RecoveryReport:
    """Finish the unfinished commit at ``path`` exactly as an uninterrupted one would have."""
    state = _Unfinished(path, options)
    report = RecoveryReport(state.location.url(), state.job_id)
    if state.marker is None and state.journal_error is None:
        return report
    if state.journal is None:
        raise CommitError(
            f"cannot recover the commit at {state.location.url()}: {state.journal_error}. "
            f"Nothing was changed. Roll it back with `s3commit abort {state.location.url()}`."
        )
    journal, bucket = state.journal, state.location.bucket
    pending = state.pending_ids()
    etags: dict[str, str] = {}
    for commit in journal.commits:
        if commit.uploadId in pending:
            etags[commit.uploadId] = state.store.complete(
                bucket, commit.destinationKey, commit.uploadId, commit.etags
            )
            report.completed.append(commit.destinationKey)
        elif state.is_ours(commit):
            etags[commit.uploadId] = state.store.head(bucket, commit.destinationKey).etag
            report.already_visible.append(commit.destinationKey)
        else:
            raise CommitError(
                f"cannot recover job {journal.jobId}: the upload of {commit.destinationKey!r} "
                "is neither pending nor complete (aborted by someone else?). Roll back with "
                f"`s3commit abort {state.location.url()}`."
            )
    new_keys = {c.destinationKey for c in journal.commits}
    replaced = [k for k in journal.replaced if k not in new_keys]
    if replaced:
        state.store.delete_keys(bucket, replaced)
        report.deleted = replaced
    committer = state.committer()
    committer.finish_commit(journal, etags, [], [], {}, time.monotonic())
    report.aborted_uploads = committer.store.counters.snapshot().get("AbortMultipartUpload", 0)
    if journal.markSuccess:
        report.notes.append("_SUCCESS written")
    return report


def abort(path: str, options: dict[str, Any] | None = None) -> RecoveryReport:
    """Roll the unfinished commit at ``path`` back: the destination as it was before the job.

    Works without a readable journal too: every key of ours carries the job UUID.
    """
    state = _Unfinished(path, options)
    report = RecoveryReport(state.location.url(), state.job_id)
    if state.marker is None and state.journal_error is None:
        return report
    bucket, location = state.location.bucket, state.location
    job_id = state.job_id
    pending = state.pending_ids()
    to_delete: list[str] = []
    if state.journal is not None:
        for commit in state.journal.commits:
            if commit.uploadId not in pending and state.is_ours(commit):
                to_delete.append(commit.destinationKey)
        missing = [k for k in state.journal.replaced if state.store.head(bucket, k) is None]
        if missing:
            report.notes.append(
                f"{len(missing)} objects that replace mode deletes were already deleted and "
                "cannot be restored; `s3commit recover` would have kept the new data instead"
            )
    else:
        report.notes.append(f"journal not usable ({state.journal_error}): cleaning by job UUID")
    if job_id:
        to_delete += [
            o.key
            for o in state.store.list_objects(bucket, location.dir_prefix)
            if job_id in o.key
            and o.key not in to_delete
            and not is_hidden(location.relative(o.key))
        ]
        success = state.store.head(bucket, location.key(SUCCESS_MARKER))
        if success is not None and _success_job(state.store, location) == job_id:
            to_delete.append(location.key(SUCCESS_MARKER))
    if to_delete:
        state.store.delete_keys(bucket, to_delete)
        report.deleted = to_delete
    for upload in state.store.list_pending(bucket, location.dir_prefix):
        ours = upload.upload_id in {
            c.uploadId for c in (state.journal.commits if state.journal else [])
        }
        if ours or (job_id and job_id in upload.key):
            state.store.abort(bucket, upload.key, upload.upload_id)
            report.aborted_uploads += 1
    if job_id:
        metadata = [
            o.key
            for prefix in (location.job_prefix(job_id), location.key(f"{MAGIC_DIR}/job-{job_id}/"))
            for o in state.store.list_objects(bucket, prefix)
        ]
        state.store.delete_keys(bucket, metadata)
    state.release()
    return report


def _success_job(store: S3Store, location: S3Location) -> str | None:
    try:
        doc = parse_success(store.get(location.bucket, location.key(SUCCESS_MARKER)))
    except (S3CommitError, ValueError):
        return None
    return doc.get("jobId") if doc else None
