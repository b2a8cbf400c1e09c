"""The stages of the S3 committers' job commit, over one :class:`~.commit_run.CommitRun`.

"S3A Committers: Architecture and Implementation" ("The Netflix Staging committer", "Commit
logic"): job commit completes the pending uploads of the committed task attempts in parallel,
O(files / threads), and never renames. DESIGN section 4 adds exclusivity and recovery: the
marker is taken and the journal written before the first completion; replace completes first
and deletes last. The order, and what a failure at each point leaves:

==================  =====================  ==============================================
stage               ``_SUCCESS`` phase      a failure ...
==================  =====================  ==============================================
load_pendingsets    (job_commit)           aborts the job: nothing was completed
take_marker         (job_commit)           aborts the job
plan_replace        conflict_resolution    aborts the job
write_journal       (job_commit)           aborts the job
complete            complete_uploads       rolls back what was sent, then aborts
verify              complete_uploads       rolls back, then aborts
delete_replaced     replace_delete         leaves the journal: ``s3commit recover``
clean_up            cleanup                every file is visible: ``s3commit recover``
write_success       (job_commit)           every file is visible: ``s3commit recover``
release             (job_commit)           every file is visible: ``s3commit recover``
==================  =====================  ==============================================

``s3commit recover`` runs the same stages from ``complete`` on (:data:`RESUMED`), after loading
what the dead driver's tasks saved and listing which uploads are still pending. A table format
adds its stage (Delta: ``delta_commit`` after ``delete_replaced``).
"""

from __future__ import annotations

import time

from .. import layout
from ..errors import (
    MIXED_VISIBLE,
    CommitError,
    PendingSetError,
    S3CommitError,
)
from ..formats import (
    SUCCESS_FILES_CAP,
    CommitMarker,
    CommittedFile,
    Journal,
    PendingSet,
    PendingUpload,
)
from ..interrupts import interrupt_requested
from ..journal_trust import check_resumed
from ..protocol import JobOutcome
from ..stages import Stage, stages_from
from ..store.s3 import RequestCounters
from ..streaming.commit import write_intent
from .cleanup import release
from .commit_run import CommitRun
from .completion import SLICE, complete_in_processes, complete_in_threads
from .conflict import partition_of
from .report import build_success, success_objects
from .s3_rollback import (
    abort_before_completion,
    finishing,
    interrupted_after_completion,
    remove_leftovers,
    roll_back_completion,
)
from .verify import Completed, expected_checksum, verify


# -- before the first completion: a failure aborts the job -----------------------------------
def load_pendingsets(run: CommitRun) -> None:
    """Validate every task's pendingset; one destination key may be written by one task only."""
    job, location = run.job, run.location
    owners: dict[str, str] = {}
    for message in run.messages:
        pendingset = PendingSet.from_dict(message.payload)
        pendingset.validate(job.job_id, location.bucket, location.dir_prefix)
        if pendingset.taskAttemptId != message.attempt_id:
            raise PendingSetError(
                f"the message of {message.attempt_id} carries the pendingset of "
                f"{pendingset.taskAttemptId}"
            )
        for commit in pendingset.commits:
            other = owners.setdefault(commit.destinationKey, pendingset.taskId)
            if other != pendingset.taskId:
                raise PendingSetError(
                    f"tasks {other} and {pendingset.taskId} both wrote {commit.destinationKey!r}"
                )
        run.pendingsets.append(pendingset)
    run.commits = [c for p in run.pendingsets for c in p.commits]


def take_marker(run: CommitRun) -> None:
    """The destination's marker, created only if absent: no other job commits here meanwhile.

    Listing what replace deletes comes after it, so no other job can commit between our listing
    and our deletes (two racing replace jobs both stayed visible when the listing came first).
    """
    committer = run.committer
    if not committer.locks_destination:
        return
    marker = CommitMarker(run.job.job_id, committer.journal_key)
    created = run.store.put_if_absent(
        run.location.bucket, layout.marker_key(run.location), marker.to_json().encode()
    )
    # A retried create whose first attempt landed answers 412 on our own marker.
    if not created and committer.marker_job() != run.job.job_id:
        raise committer.concurrent_commit_error(uploads_aborted=True)
    run.marker_owned = True


def plan_replace(run: CommitRun) -> None:
    """What replace mode deletes: the visible objects of the partitions (or the destination)
    the job writes, except keys it writes itself."""
    new_keys = {c.destinationKey for c in run.commits}
    partitions = {_partition_path(run, c) for c in run.commits}
    committer = run.committer
    run.replaced = [
        key
        for key in committer.conflict.replaced(committer.visible, partitions)
        if key not in new_keys
    ]


def write_journal(run: CommitRun) -> None:
    """Every upload to complete and every object to delete, before any of it is done."""
    job, location = run.job, run.location
    run.journal = Journal(
        jobId=job.job_id,
        destination=location.url(),
        bucket=location.bucket,
        committer=run.committer.name,
        conflictMode=job.conflict_mode,
        format=job.format,
        partitionBy=list(job.partition_by),
        markSuccess=job.options.mark_successful_jobs,
        commits=run.commits,
        replaced=run.replaced,
        options=job.options.public(),
        extraData={**run.journal_extra, **(job.stream.fields() if job.stream else {})},
    )
    run.journal_written = True  # from the first attempt on it may exist: abort deletes it
    body = run.journal.encoded()
    if job.stream is not None:  # a micro-batch's intent: one attempt of the batch commits
        write_intent(run, body)
    else:
        run.store.put(location.bucket, run.committer.journal_key, body)


# -- resuming a commit whose driver died (``s3commit recover``) ------------------------------
def load_saved_pendingsets(run: CommitRun) -> None:
    """The journal names the uploads; the pendingsets the committed attempts saved stand in for
    their lost messages, so cleanup knows the committed attempts and ``_SUCCESS`` carries
    their requests and retries (those whose every upload the journal lists)."""
    journal = run.resumed_from
    assert journal is not None
    run.journal, run.commits = journal, journal.commits
    new_keys = {c.destinationKey for c in journal.commits}
    run.replaced = [key for key in journal.replaced if key not in new_keys]  # never new data
    run.journal_written = run.marker_owned = True
    journaled = {c.uploadId for c in journal.commits}
    run.pendingsets = [
        p
        for p in run.require_checked().saved_pendingsets.values()
        if p.commits and {c.uploadId for c in p.commits} <= journaled
    ]


def find_completed(run: CommitRun) -> None:
    """Uploads of the journal that are no longer pending were completed before the driver died:
    they are not completed again, only verified."""
    pending = {u.upload_id for u in run.require_checked().listed_pending}
    run.found_complete = {c.uploadId for c in run.commits if c.uploadId not in pending}


# -- completion: verified, and rolled back truthfully ----------------------------------------
def complete(run: CommitRun) -> None:
    """Complete every upload in parallel (:mod:`.completion`); the first failure stops the
    rest and is raised.

    Every upload sent is remembered in ``run.sent``: a completion that was sent may have made
    its file visible whatever the answer said.
    """
    todo = [c for c in run.commits if c.uploadId not in run.found_complete]
    run.answered += [(c, None) for c in run.commits if c.uploadId in run.found_complete]
    interrupted = interrupt_requested()  # a held Ctrl-C: no more completions are sent
    in_processes = run.job.options.commit_processes > 1 and len(todo) > SLICE
    completing = complete_in_processes if in_processes else complete_in_threads
    failures = completing(run, todo, interrupted)
    if failures:
        commit, cause = failures[0]
        if commit is None:  # a worker process died
            raise CommitError(f"{cause} while completing {len(todo)} uploads") from cause
        raise CommitError(
            f"completing {commit.destinationKey!r} failed ({cause}); {len(failures)} of "
            f"{len(todo)} uploads failed"
        ) from cause


def verify_completed(run: CommitRun) -> None:
    """An answer that matches the expected multipart ETag is trusted (unless
    ``validate.output``); every other file is checked by size and ETag (:mod:`.verify`)."""
    completed = [Completed(commit, answer) for commit, answer in run.answered]
    trust = not run.job.options.validate_output
    trusted = [c for c in completed if c.trusted and trust]
    run.etags = {c.commit.uploadId: c.answer for c in trusted}
    if trusted:
        run.completion_checks.merge({"answered": len(trusted)})
    unchecked = [c for c in completed if c.commit.uploadId not in run.etags]
    run.etags.update(verify(run.store, unchecked, run.job.options.threads, run.completion_checks))


# -- after completion: nothing is rolled back any more ----------------------------------------
def delete_replaced(run: CommitRun) -> None:
    """The objects the new files supersede. A resumed commit confirms each deletion by
    looking (a server's "Deleted" answer is not proof) and reports only what it removed."""
    replaced = run.replaced
    if not replaced:
        return
    try:
        if run.resumed:
            run.deleted = run.store.delete_confirmed(run.location.bucket, replaced)
        else:
            run.store.delete_keys(run.location.bucket, replaced)
            run.deleted = list(replaced)
    except S3CommitError as exc:
        url = run.location.url()
        raise CommitError(
            f"job {run.job.job_id}: the new files are visible at {url} but deleting the "
            f"{len(replaced)} replaced objects failed ({exc}); old and new data may both be "
            "visible and the destination stays locked. Finish the commit with "
            f"`s3commit recover {url}` (or undo it with `s3commit abort {url}`).",
            **run.committer.error_fields(MIXED_VISIBLE, "recover"),
        ) from exc


def clean_up(run: CommitRun) -> None:
    run.aborted_uploads = remove_leftovers(
        run.committer, run.pendingsets, {c.uploadId for c in run.commits}
    )


def write_success(run: CommitRun) -> None:
    """The job's outcome, and its ``_SUCCESS`` document if the job marks success."""
    run.phases["job_commit"] = time.monotonic() - run.started
    journal, requests = run.require_journal(), _request_counts(run)
    files = [_committed_file(run, c) for c in run.commits]
    if journal.markSuccess:  # the _SUCCESS below, and its file list past the cap
        puts = 1 + (len(files) > SUCCESS_FILES_CAP)
        requests["PutObject"] = requests.get("PutObject", 0) + puts
    requests["DeleteObjects"] = requests.get("DeleteObjects", 0) + 1  # journal + marker
    success = build_success(
        run.job,
        run.committer.name,
        files,
        sorted({_partition_path(run, c) for c in run.commits}),
        len(run.replaced),
        run.phases,
        requests,
        task_durations=_task_durations(run),
        retries=_retry_counts(run),
        completion_checks=run.completion_checks.snapshot(),
        table_fields=run.table_fields,
    )
    if journal.markSuccess:
        for name, body, content_type in success_objects(success, files):
            run.store.put(run.location.bucket, run.location.key(name), body, content_type)
    run.outcome = JobOutcome(
        files,
        success,
        run.phases,
        requests,
        completed=run.completed_now(),
        already_complete=run.already_complete(),
        deleted=run.deleted,
        aborted_uploads=run.aborted_uploads,
    )


def release_destination(run: CommitRun) -> None:
    release(run.store, run.location, run.job.job_id, run.committer.commit_keys())


# -- the outcome -------------------------------------------------------------------------------
def _committed_file(run: CommitRun, commit: PendingUpload) -> CommittedFile:
    return CommittedFile(
        path=run.location.url(commit.destinationKey),
        key=commit.destinationKey,
        size=commit.length,
        rows=commit.rows,
        partition=commit.partition,
        etag=run.etags[commit.uploadId],
        task=commit.taskId,
        checksum_algorithm=commit.checksumAlgorithm,
        checksum=expected_checksum(commit),
    )


def _partition_path(run: CommitRun, commit: PendingUpload) -> str:
    return partition_of(run.location.relative(commit.destinationKey))


def _task_durations(run: CommitRun) -> dict[str, float]:
    """From the tasks' messages; a resumed commit has none (they died with the driver)."""
    if run.resumed:
        return {p.taskId: 0.0 for p in run.pendingsets}
    return {m.task_id: m.summary.seconds for m in run.messages}


def _retry_counts(run: CommitRun) -> dict[str, int]:
    """Retries by reason, of the driver and every committed task attempt."""
    totals = RequestCounters()
    totals.merge(run.store.counters.retries())
    totals.merge(run.job.setup_retries)
    for pendingset in run.pendingsets:
        totals.merge(pendingset.retries)
    return totals.snapshot()


def _request_counts(run: CommitRun) -> dict[str, int]:
    """Driver requests plus the requests of every committed task attempt."""
    totals = dict(run.store.counters.snapshot())
    for op, n in run.job.setup_requests.items():
        totals[op] = totals.get(op, 0) + n
    for pendingset in run.pendingsets:
        for op, n in pendingset.iostatistics.get("counters", {}).items():
            totals[op] = totals.get(op, 0) + n
    return dict(sorted(totals.items()))


# -- the sequences -----------------------------------------------------------------------------
_after = interrupted_after_completion

#: the S3 committers' job commit
S3_STAGES: tuple[Stage[CommitRun], ...] = (
    Stage("load_pendingsets", load_pendingsets, None, abort_before_completion),
    Stage("take_marker", take_marker, None, abort_before_completion),
    Stage("plan_replace", plan_replace, "conflict_resolution", abort_before_completion),
    Stage("write_journal", write_journal, None, abort_before_completion),
    Stage("complete", complete, "complete_uploads", roll_back_completion),
    Stage("verify", verify_completed, "complete_uploads", roll_back_completion),
    Stage("delete_replaced", delete_replaced, "replace_delete", _after),
    Stage(
        "clean_up",
        clean_up,
        "cleanup",
        finishing("cleaning up its pending uploads and hidden files"),
    ),
    Stage("write_success", write_success, None, finishing("writing _SUCCESS")),
    Stage("release", release_destination, None, finishing("releasing the destination")),
)

#: what ``s3commit recover`` runs before the stages from ``complete`` on
RESUME_STAGES: tuple[Stage[CommitRun], ...] = (
    Stage("load_saved_pendingsets", load_saved_pendingsets),
    Stage("find_completed", find_completed, "complete_uploads"),
)


def resumed(stages: tuple[Stage[CommitRun], ...]) -> tuple[Stage[CommitRun], ...]:
    """A committer's stages as ``s3commit recover`` runs them, from the journal; first of all
    the journal, its marker and the job's saved pendingsets are checked (``journal_trust``),
    before any request changes the store."""
    return (Stage("check_journal", check_resumed), *RESUME_STAGES, *stages_from(stages, "complete"))
