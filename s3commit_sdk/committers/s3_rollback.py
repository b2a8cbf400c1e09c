"""What a failure during an S3 job commit leaves, and the job abort it may end in.

Each stage of :mod:`.s3_stages` names one of these policies (``Stage.on_failure``): before the
first completion the job is aborted; a failed completion or check is rolled back truthfully
(every upload aborted, then every key a completion was sent for deleted, then a listing decides
what the error says); after the last completion nothing is undone, and the error names the
command that finishes the job. "A Zero-Rename Committer" ("Correctness": abortable, no
leaks): job abort removes every upload and hidden file of this job, and only of this job. That
clean-up is retried as a whole while S3 throttles it (:func:`remove_leftovers`); what it still
could not abort is listed and named on the error with the command that removes it
(:func:`left_pending`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from .. import layout
from ..errors import (
    ALL_VISIBLE,
    NOTHING_VISIBLE,
    SOME_VISIBLE,
    CleanupIncompleteError,
    CommitError,
    PendingSetError,
    S3CommitError,
    StoreError,
)
from ..formats import PendingSet, PendingUpload, read_pendingset
from ..journal_trust import commit_is_the_jobs
from ..store.s3 import THROTTLING, _retry_kind
from .cleanup import release, remove_job_files, stop_attempts
from .commit_run import CommitRun

if TYPE_CHECKING:  # the committer imports this module
    from ..protocol import TaskCommit
    from .s3_job import S3Committer


def abort_before_completion(run: CommitRun, cause: BaseException) -> None:
    """Nothing was completed: abort the job while ``cause`` propagates; what happened goes into
    its notes, never raised."""
    url, job_id = run.location.url(), run.job.job_id
    if isinstance(cause, S3CommitError):  # no completion was sent: nothing of it is visible
        cause.visible = cause.visible or NOTHING_VISIBLE
    try:
        abort(run)
    except CleanupIncompleteError as left:
        left.tell(cause)
        return None
    except Exception as exc:
        cause.add_note(
            f"s3commit: aborting job {job_id} failed too ({exc}): its pending uploads and "
            f"hidden files may remain; run `s3commit abort {url}`."
        )
        if isinstance(cause, S3CommitError):
            cause.remedy = cause.remedy or f"s3commit abort {url}"
        return None
    if isinstance(cause, KeyboardInterrupt):
        cause.add_note(
            f"s3commit: job {job_id} was interrupted before any file was completed and was "
            f"aborted: nothing of it is visible at {url}."
        )
    return None


def roll_back_completion(run: CommitRun, cause: BaseException) -> BaseException | None:
    """A completion or its check failed: roll the job back and say what is visible.

    A resumed commit is not rolled back: the operator chose to finish it; it says what to do.
    """
    url, job_id = run.location.url(), run.job.job_id
    if run.resumed:
        if not isinstance(cause, Exception):
            return None
        return CommitError(
            f"cannot recover job {job_id}: {cause}. The uploads it could complete are visible; "
            f"roll back with `s3commit abort {url}`.",
            **run.committer.error_fields(SOME_VISIBLE, "abort"),
        )
    visible, state = roll_back(run, run.sent)
    if isinstance(cause, KeyboardInterrupt):
        cause.add_note(f"s3commit: job {job_id} was interrupted and rolled back. {state}")
        return None
    if not isinstance(cause, Exception):
        return None
    return CommitError(
        f"job {job_id}: {cause}; the job was rolled back. {state}",
        **rolled_back_fields(run, visible),
    )


def roll_back(run: CommitRun, sent: list[PendingUpload]) -> tuple[str | None, str]:
    """Undo a job commit that failed before its replace deletes; say what is visible
    (a key of ``errors.VISIBLE``, None when unchecked) and in words.

    Every upload is aborted first, then every key a completion was ``sent`` for is deleted
    (they carry this job's UUID: no other job's data). In that order a completion still on
    its way (sent by a worker process that was killed) cannot land after the delete: once
    its upload is aborted it fails; if it landed first, the delete removes it. Then a listing
    of those keys decides the text. The journal and marker are released only when nothing
    of the job is left.
    """
    store, bucket, url = run.store, run.location.bucket, run.location.url()
    keys = sorted({c.destinationKey for c in sent})
    problems = []
    try:
        run.aborted_uploads = cleaned_or_listed(run, committed=set())
    except CleanupIncompleteError as left:
        problems.append(str(left))
    except S3CommitError as exc:
        problems.append(f"aborting uploads failed: {exc}")
    try:
        if keys:
            store.delete_keys(bucket, keys)
    except S3CommitError as exc:
        problems.append(f"deleting completed files failed: {exc}")
    try:
        listed = {o.key for o in store.list_objects(bucket, run.location.dir_prefix)}
        visible = [k for k in keys if k in listed]
    except S3CommitError as exc:
        return None, (
            f"Rolling back could not be checked ({exc}); files of job {run.job.job_id} may "
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
    release(store, run.location, run.job.job_id, run.committer.commit_keys())
    run.journal_written = run.marker_owned = False
    checked = f" (checked: none of the {len(keys)} completed keys is listed)" if keys else ""
    return (
        NOTHING_VISIBLE,
        f"Nothing of this job is visible{checked}; the existing data is untouched.",
    )


def rolled_back_fields(run: CommitRun, visible: str | None) -> dict:
    """Error fields after :func:`roll_back`: ``s3commit abort`` unless nothing is left (no
    file visible, and the journal released: nothing pending either)."""
    left = visible != NOTHING_VISIBLE or run.journal_written or run.marker_owned
    return run.committer.error_fields(visible, "abort" if left else None)


def interrupted_after_completion(run: CommitRun, cause: BaseException) -> None:
    """Every file was completed: an interrupt leaves the journal for recover or abort."""
    if isinstance(cause, KeyboardInterrupt):
        url = run.location.url()
        cause.add_note(
            f"s3commit: job {run.job.job_id} was interrupted after every file was completed "
            f"at {url}{run.committer.locked_note}. `s3commit recover {url}` finishes the job, "
            f"`s3commit abort {url}` rolls it back."
        )
    return None


def finishing(step: str) -> Callable[[CommitRun, BaseException], BaseException | None]:
    """The failure policy of a stage after every file is visible: it says so and names the
    command that finishes the job and releases the destination."""

    def failed(run: CommitRun, cause: BaseException) -> BaseException | None:
        interrupted_after_completion(run, cause)
        if not isinstance(cause, S3CommitError):
            return None
        url = run.location.url()
        left = left_pending(run, cause, f"s3commit recover {url}")
        still = f" {left}" if left.pending_uploads else ""
        return CommitError(
            f"job {run.job.job_id} committed: every file is complete and visible at {url}, "
            f"but {step} failed ({cause}){run.committer.locked_note}. `s3commit recover {url}` "
            f"finishes this job.{still}",
            **run.committer.error_fields(ALL_VISIBLE, "recover"),
        )

    return failed


# -- abort and cleanup: the job's own uploads and hidden files --------------------------------
def remove_leftovers(
    committer: S3Committer, received: list[PendingSet], committed: set[str]
) -> int:
    """:func:`_remove_leftovers_once`, retried as a whole while S3 throttles it.

    Each request has its retry budget (``retry.throttle.limit``); under a storm an abort can
    exhaust it. The clean-up is idempotent, so it runs again, with the budget of the failure
    that stopped it (``retry.throttle.limit`` for throttling and broken connections,
    ``retry.max-attempts`` for other transient errors), the same backoff and within
    ``retry.throttle.max-duration``; then the last failure is raised.
    """
    policy = committer.store.settings.retry
    started = time.monotonic()
    attempt = 0
    while True:
        attempt += 1
        try:
            return _remove_leftovers_once(committer, received, committed)
        except StoreError as exc:
            kind = _retry_kind(exc.__cause__)
            budget = policy.throttle_limit if kind in THROTTLING else policy.max_attempts
            pause = policy.backoff(attempt - 1, policy.throttle_interval_s)
            spent = time.monotonic() - started + pause
            if kind is None or attempt >= budget or spent > policy.max_duration_s:
                raise
            time.sleep(pause)


def _remove_leftovers_once(
    committer: S3Committer, received: list[PendingSet], committed: set[str]
) -> int:
    """Abort this job's uploads that were not committed, then drop its hidden metadata;
    returns how many uploads were still pending.

    Uploads are found three ways: the pendingsets the tasks' messages carried
    (``received``), the metadata persisted by attempts whose messages never arrived (failed
    or speculative losers), and a listing of pending uploads whose keys carry the job UUID
    (or all of them, if asked).
    """
    store, location, job = committer.store, committer.location, committer.job
    bucket = location.bucket
    try:
        stop_attempts(store, location, job.job_id)  # first: see S3Committer.ensure_job_alive
        known_attempts = {p.taskAttemptId for p in received}
        hidden = [
            o.key
            for o in store.list_objects(bucket, committer.metadata_prefix)
            if o.key != committer.journal_key  # removed with the marker, last
        ]
        commits = [c for p in received for c in p.commits]
        for key in hidden:
            attempt = committer.attempt_of(key)
            if attempt is not None and attempt not in known_attempts:
                saved = read_pendingset(store.get(bucket, key))
                commits += [c for c in saved.commits if _own(committer, c)] if saved else []
        targets: dict[str, str] = {}
        for commit in commits:
            if (
                commit.uploadId not in committed
                and commit.bucket == bucket
                and commit.destinationKey.startswith(location.dir_prefix)
            ):
                targets[commit.uploadId] = commit.destinationKey
        scope_all = job.options.abort_pending_uploads == "all"
        for upload in store.list_pending(bucket, location.dir_prefix):
            if upload.upload_id in committed:
                continue
            if scope_all or job.job_id in upload.key:
                targets[upload.upload_id] = upload.key
        return remove_job_files(
            store,
            location,
            job.job_id,
            uploads=targets,
            hidden=hidden if committer.delete_metadata else [],
            threads=job.options.threads,
        )
    finally:
        committer.drop_local_buffers()


def cleaned_or_listed(run: CommitRun, committed: set[str]) -> int:
    """:func:`remove_leftovers` for a failed job; if S3 refused it beyond its retries, one
    listing says which of the job's uploads are left: a :class:`CleanupIncompleteError`
    naming them and the command that removes them."""
    received = run.pendingsets or _parse_quietly(run.messages)
    try:
        return remove_leftovers(run.committer, received, committed)
    except StoreError as failure:
        url, job_id = run.location.url(), run.job.job_id
        locked = run.marker_owned or run.journal_written
        command = f"abort {url}" if locked else f"uploads abort {url} --job {job_id}"
        raise left_pending(run, failure, f"s3commit {command}") from failure


def left_pending(run: CommitRun, failure: S3CommitError, remedy: str) -> CleanupIncompleteError:
    """The job's uploads still pending after ``failure``, by one listing, in an error whose
    ``remedy`` removes them."""
    job_id, location = run.job.job_id, run.location
    fields = run.committer.error_fields(NOTHING_VISIBLE) | {"remedy": remedy}
    try:
        pending = run.store.list_pending(location.bucket, location.dir_prefix)
    except S3CommitError as exc:
        return CleanupIncompleteError(
            f"cleaning up job {job_id} failed ({failure}) and what it left could not be listed "
            f"({exc}): its uploads may still be pending (billed until aborted); `{remedy}` "
            "removes them.",
            **fields,
        )
    received = run.pendingsets or _parse_quietly(run.messages)
    known = {c.uploadId for c in run.commits} | {c.uploadId for p in received for c in p.commits}
    left = sorted(u.key for u in pending if u.upload_id in known or job_id in u.key)
    if not left:
        return CleanupIncompleteError(
            f"cleaning up job {job_id} failed ({failure}); no upload of the job is pending "
            f"(checked by a listing), but its hidden files may remain: `{remedy}` removes them.",
            **fields,
        )
    shown = ", ".join(repr(k) for k in left[:_SHOWN_UPLOADS])
    more = f" and {len(left) - _SHOWN_UPLOADS} more" if len(left) > _SHOWN_UPLOADS else ""
    return CleanupIncompleteError(
        f"cleaning up job {job_id} failed ({failure}): {len(left)} upload(s) of the job are "
        f"still pending (none visible; billed until aborted): {shown}{more}. "
        f"`{remedy}` removes them.",
        uploads=tuple(left),
        **fields,
    )


#: pending uploads named in an error before "and N more"
_SHOWN_UPLOADS = 5


def abort(run: CommitRun) -> None:
    """Job abort: the job's uploads and hidden files (retried within the throttle budget; a
    :class:`CleanupIncompleteError` names what is left), then what this run created of the
    journal and the marker."""
    committer = run.committer
    run.aborted_uploads = cleaned_or_listed(run, committed=set())
    owned = [committer.journal_key] if run.journal_written else []
    owned += [layout.marker_key(run.location)] if run.marker_owned else []
    release(run.store, run.location, run.job.job_id, owned)


def _own(committer: S3Committer, commit: PendingUpload) -> bool:
    """An upload a saved pendingset names is aborted only if it is one of the job's own
    (``journal_trust``: its key named with the job UUID, unless the job's names carry none)."""
    job = committer.job
    if not job.options.unique_filenames:
        return commit.jobId == job.job_id
    return commit_is_the_jobs(commit, committer.location, job.job_id)


def _parse_quietly(messages: list[TaskCommit]) -> list[PendingSet]:
    found = []
    for message in messages:
        try:
            found.append(PendingSet.from_dict(message.payload))
        except PendingSetError:
            continue
    return found
