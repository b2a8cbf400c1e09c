"""Roll an unfinished job commit forward (``recover``) or back (``abort``) from its journal.

DESIGN section 4, "Exclusive, recoverable job commit": the commit journal lists every upload to
complete and every object ``replace`` deletes, written before any of it happens, so a commit
killed at any point can be brought, idempotently, to the state an uninterrupted commit (or no
commit at all) would have produced. Both are safe to rerun after their own crash.

A journal is used only if :mod:`.journal_trust` vouches for it (every key one of the job's own
names, its uploads, MD5 part ETags, visible data to replace, its marker held); a readable journal
it refuses is a ``JournalTrustError``, raised before anything is changed.

Without a usable journal, ``abort`` trusts nothing but names: it acts only on keys whose file
name carries the marker's job UUID where our writers put it, and deletes visible objects only
when the caller says so (``visible="delete"``), after :func:`plan_abort` listed them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from . import journal_trust, layout
from .committers import cleanup
from .committers.verify import holds_upload
from .errors import (
    ALL_VISIBLE,
    CommitError,
    InvalidArgumentError,
    JournalTrustError,
    PendingSetError,
    S3CommitError,
)
from .formats import CommitMarker, Journal, PendingUpload, SuccessDocument, parse_success
from .options import resolve_options
from .paths import S3Location, parse_s3_url
from .protocol import JobContext
from .runner import resume_commit
from .store import PendingUploadInfo, S3Store, open_store
from .streaming.batch import StreamBatch
from .uploads import JOB_UUID, job_of_key

#: What ``abort`` may do with visible objects that only their names tie to the job.
VISIBLE_CHOICES = ("delete", "keep")
#: Visible keys shown in an error message before "... and N more".
_SHOWN = 20


@dataclass
class RecoveryReport:
    """What ``recover`` or ``abort`` found and did; printed by the CLI."""

    destination: str
    job_id: str | None = None
    completed: list[str] = field(default_factory=list)
    already_visible: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
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
            *([f"kept visible objects: {len(self.kept)}"] if self.kept else []),
            f"aborted pending uploads: {self.aborted_uploads}",
            *self.notes,
        ]


class _Unfinished:
    """The marker of an unfinished commit, its journal if it can be trusted, and a store."""

    def __init__(self, path: str, options: dict[str, Any] | None) -> None:
        self.location: S3Location = parse_s3_url(path)
        self.options = resolve_options(options)
        self.store = open_store(self.options, threads=self.options.threads)
        self.marker: CommitMarker | None = None
        self.journal: Journal | None = None
        self.journal_error: str | None = None
        #: a readable journal that journal_trust refused
        self.refused: JournalTrustError | None = None
        #: the marker is on the store (a Delta job's stands for its journal: it took none)
        self.marker_stored = False
        bucket, key = self.location.bucket, layout.marker_key(self.location)
        if self.store.head(bucket, key) is None:
            self.store.check_bucket(bucket)  # a missing bucket also answers 404: name it
            found = _unfinished_table_job(self.store, self.location)
            if isinstance(found, JournalTrustError):
                self.marker = CommitMarker(found.job_id or "", found.journal_key or "")
                self.refuse(found)
            elif found is not None:
                self.marker, self.journal = found
            return
        self.marker_stored = True
        try:
            self.marker = CommitMarker.from_json(self.store.get(bucket, key))
        except PendingSetError as exc:
            self.journal_error = f"the commit marker is unreadable: {exc}"
            return
        journal_key = layout.journal_key(self.location, self.marker.jobId)
        try:
            if self.store.head(bucket, journal_key) is None:
                raise PendingSetError(f"no journal at {journal_key!r}")
            journal = Journal.from_json(self.store.get(bucket, journal_key))
            journal_trust.check_journal(journal, journal_key, self.location, self.marker.jobId)
            self.journal = journal
        except JournalTrustError as exc:
            self.refuse(exc)
        except PendingSetError as exc:
            self.journal_error = str(exc)

    def refuse(self, error: JournalTrustError) -> None:
        """The journal is not acted on: ``recover`` raises ``error``, ``abort`` acts by names
        only, and only when told what to do with visible objects."""
        error.job_id = error.job_id or (self.marker.jobId if self.marker else None)
        self.journal, self.refused, self.journal_error = None, error, str(error)

    @property
    def job_id(self) -> str | None:
        return self.marker.jobId if self.marker else None

    def job(self) -> JobContext:
        """The job the journal describes, as its commit stages need it."""
        journal = self.journal
        assert journal is not None
        return JobContext(
            location=self.location,
            committer=journal.committer,
            conflict_mode=journal.conflictMode,
            partition_by=tuple(journal.partitionBy),
            format=journal.format,
            options=self.options,
            settings=self.store.settings,
            job_id=journal.jobId,
            job_id_source="commit journal (recovered)",
            stream=StreamBatch.from_fields(journal.extraData),  # its record is written too
        )

    def is_ours(self, commit: PendingUpload) -> bool:
        """The object at the key is the one this upload produced (:func:`holds_upload`)."""
        return holds_upload(commit, self.store.head(commit.bucket, commit.destinationKey))

    def release(self) -> None:
        """Remove the journal and, last, the marker if it was on the store: a Delta job took
        none, so a marker there now belongs to another job."""
        assert self.job_id is not None
        keys = [layout.journal_key(self.location, self.job_id)]
        keys += [layout.marker_key(self.location)] if self.marker_stored else []
        cleanup.release(self.store, self.location, self.job_id, keys)


def recover(path: str, options: dict[str, Any] | None = None) -> RecoveryReport:
    """Finish the unfinished commit at ``path`` exactly as an uninterrupted one would have."""
    state = _Unfinished(path, options)
    report = RecoveryReport(state.location.url(), state.job_id)
    if state.marker is None and state.journal_error is None:
        return report
    if state.refused is not None:
        state.refused.remedy = f"s3commit abort {state.location.url()}"
        raise state.refused
    if state.journal is None:
        raise CommitError(
            f"cannot recover the commit at {state.location.url()}: {state.journal_error}. "
            f"Nothing was changed. Roll it back with `s3commit abort {state.location.url()}`.",
            destination=state.location.url(),
            remedy=f"s3commit abort {state.location.url()}",
        )
    outcome = resume_commit(state.job(), state.journal)
    report.completed = outcome.completed
    report.already_visible = outcome.already_complete
    report.deleted = outcome.deleted
    report.aborted_uploads = outcome.aborted_uploads
    if state.journal.markSuccess:
        report.notes.append("_SUCCESS written")
    return report


@dataclass
class AbortPlan:
    """What ``abort`` will do, worked out (by listing) before any of it is done.

    ``visible`` are the visible objects it deletes: with a journal, the completed uploads the
    journal lists (checked by ETag); without one, the objects whose file name carries the job
    UUID, which only the caller may allow (``needs_choice``).
    """

    state: _Unfinished
    uploads: list[PendingUploadInfo] = field(default_factory=list)
    hidden: list[str] = field(default_factory=list)
    visible: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def job_id(self) -> str | None:
        return self.state.job_id

    @property
    def needs_choice(self) -> bool:
        """No journal vouches for what abort would do: visible objects named with the job
        UUID, or a journal that was refused (it may stand for no real job at all)."""
        state = self.state
        return state.journal is None and (bool(self.visible) or state.refused is not None)

    def lines(self) -> list[str]:
        url = self.state.location.url()
        if self.job_id is None:
            return [f"no unfinished commit at {url}"]
        why = "listed in its journal" if self.state.journal else "named with its job UUID"
        return [
            f"job {self.job_id} at {url}",
            *self.notes,
            f"pending uploads to abort: {len(self.uploads)}",
            f"hidden objects to delete: {len(self.hidden)} (then the journal and the marker)",
            f"visible objects {why}: {len(self.visible)}",
            *(f"  {self.state.location.url(key)}" for key in self.visible),
        ]

    def carry_out(self, visible: str | None = None) -> RecoveryReport:
        """Abort the uploads, delete the objects, release the destination.

        ``visible`` ("delete" or "keep") decides the fate of visible objects that no journal
        vouches for; with such objects and no decision, nothing is changed.
        """
        if visible not in (None, *VISIBLE_CHOICES):
            raise InvalidArgumentError(f"visible must be one of {VISIBLE_CHOICES}, got {visible!r}")
        state = self.state
        report = RecoveryReport(state.location.url(), state.job_id, notes=list(self.notes))
        if self.job_id is None:
            return report
        doomed = self.visible
        if self.needs_choice:
            if visible is None and state.refused is not None:
                raise self._refusal()
            if visible is None:
                raise CommitError(self._choice_message())
            if visible == "keep":
                doomed, report.kept = [], list(self.visible)
        location, job_id = state.location, self.job_id
        cleanup.stop_attempts(state.store, location, job_id)
        if doomed:  # confirmed by looking: a server's "Deleted" answer is not proof
            report.deleted = state.store.delete_confirmed(location.bucket, doomed)
        report.aborted_uploads = cleanup.remove_job_files(
            state.store,
            location,
            job_id,
            uploads={u.upload_id: u.key for u in self.uploads},
            hidden=self.hidden,
            threads=state.options.threads,
        )
        state.release()
        return report

    def _refusal(self) -> JournalTrustError:
        """The refused journal's error, told what abort can still do by names."""
        refused = self.state.refused
        assert refused is not None
        return JournalTrustError(
            f"{refused} Rolled back by names only, abort would act on job {self.job_id}'s "
            f"{len(self.uploads)} pending upload(s) named with its UUID, its hidden files and "
            f"{len(self.visible)} visible object(s) named with its UUID: rerun with "
            "--delete-visible or --keep-visible (Python: abort(path, visible='delete' or "
            "'keep')) if no job of that id is running.",
            journal_key=refused.journal_key,
            field=refused.field,
            problem=refused.problem,
            destination=self.state.location.url(),
            job_id=self.job_id,
            visible=refused.visible,
        )

    def _choice_message(self) -> str:
        url = self.state.location.url()
        shown = "\n  ".join(self.state.location.url(k) for k in self.visible[:_SHOWN])
        more = len(self.visible) - _SHOWN
        return (
            f"cannot abort job {self.job_id} at {url} without its journal "
            f"({self.state.journal_error}): {len(self.visible)} visible object(s) carry the "
            f"job UUID in their names, and nothing proves this job wrote them:\n  {shown}"
            + (f"\n  ... and {more} more" if more > 0 else "")
            + "\nNothing was changed. Rerun with --delete-visible to delete them or "
            "--keep-visible to keep them (Python: abort(path, visible='delete' or 'keep')); "
            f"either way the job's {len(self.uploads)} pending upload(s) are aborted, its "
            "hidden metadata deleted and the destination released."
        )


def plan_abort(path: str, options: dict[str, Any] | None = None) -> AbortPlan:
    """List what rolling back the unfinished commit at ``path`` would do; change nothing.

    A marker whose job id is not a full UUID is refused: nothing can be chosen by it safely.
    """
    state = _Unfinished(path, options)
    plan = AbortPlan(state)
    if state.marker is None and state.journal_error is None:
        return plan
    location, bucket = state.location, state.location.bucket
    if state.refused is not None and not _is_uuid(state.job_id):
        raise state.refused  # no key can be tied to it, not even by name
    if state.marker is None or not _is_uuid(state.marker.jobId):
        named = "is unreadable" if state.marker is None else f"names job {state.marker.jobId!r}"
        raise CommitError(
            f"cannot abort the commit at {location.url()}: its commit marker {named}, not a "
            "job UUID, so no key can be tied to the job. Nothing was changed. If no job is "
            "committing there, delete the marker yourself: "
            f"{location.url(layout.marker_key(location))}"
        )
    job_id = state.marker.jobId
    uploads = state.store.list_pending(bucket, location.dir_prefix)
    journal = state.journal
    missing: list[str] = []  # what the job's replace already deleted
    if journal is not None and journal.format in journal_trust.TABLE_FORMATS:
        _refuse_abort_of_committed_table_job(state, journal)
    if journal is not None:
        journal_key = layout.journal_key(location, job_id)
        try:
            journal_trust.check_marker(state.store, location, journal, journal_key)
            journal_trust.check_uploads(journal, journal_key, location, uploads)
        except JournalTrustError as exc:
            state.refuse(exc)
            journal = None
    if journal is not None:
        pending = {u.upload_id for u in uploads}
        plan.visible = [
            c.destinationKey
            for c in journal.commits
            if c.uploadId not in pending and state.is_ours(c)
        ]
        missing = [k for k in journal.replaced if state.store.head(bucket, k) is None]
        if missing:
            plan.notes.append(
                f"{len(missing)} objects that replace mode deletes were already deleted and "
                "cannot be restored; `s3commit recover` would have kept the new data instead"
                " (the _SUCCESS naming them is removed too)"
            )
        journaled = {c.uploadId for c in journal.commits}
    else:
        plan.notes.append(
            f"journal not usable ({state.journal_error}): acting only on keys named with job "
            f"{job_id}"
        )
        plan.visible = [
            o.key
            for o in state.store.list_objects(bucket, location.dir_prefix)
            if not layout.is_hidden(location.relative(o.key))
            and job_of_key(o.key) == job_id.lower()
        ]
        journaled = set()
    success = _success(state.store, location)
    success_job = success.job_id if success is not None else None
    if success_job == job_id or (journal is not None and missing and success_job is not None):
        # this job's, or an earlier job's naming files this job's replace already deleted
        plan.visible.append(location.key(layout.SUCCESS_MARKER))
        if success is not None and success.files_manifest is not None:
            plan.visible.append(location.key(layout.SUCCESS_FILES_NAME))
    plan.uploads = [
        u for u in uploads if u.upload_id in journaled or job_of_key(u.key) == job_id.lower()
    ]
    journal_key = layout.journal_key(location, job_id)  # released with the marker, last
    plan.hidden = [
        o.key
        for prefix in layout.job_hidden_prefixes(location, job_id)
        for o in state.store.list_objects(bucket, prefix)
        if o.key != journal_key
    ]
    return plan


def abort(
    path: str, options: dict[str, Any] | None = None, *, visible: str | None = None
) -> RecoveryReport:
    """Roll the unfinished commit at ``path`` back: the destination as it was before the job.

    Without a usable journal, visible objects named with the job UUID are deleted only with
    ``visible="delete"`` (or kept with ``"keep"``); see :meth:`AbortPlan.carry_out`.
    """
    return plan_abort(path, options).carry_out(visible)


def _unfinished_table_job(
    store: S3Store, location: S3Location
) -> tuple[CommitMarker, Journal] | JournalTrustError | None:
    """A Delta job takes no marker (committers/delta.py): its journal alone says it is
    unfinished. The oldest such journal under the destination, and the marker it stands for;
    or the refusal of the first one that claims to be a Delta job's and is not trusted."""
    journals = []
    for info in store.list_objects(location.bucket, layout.hidden_prefix(location)):
        job_id = layout.job_of_journal(location, info.key)
        if job_id is None:
            continue
        try:
            journal = Journal.from_json(store.get(location.bucket, info.key))
        except PendingSetError:
            continue  # unreadable: its uploads are left to `s3commit uploads abort`
        if journal.format not in journal_trust.TABLE_FORMATS:
            continue  # a marker stands for every other job's journal
        try:
            journal_trust.check_journal(journal, info.key, location, job_id)
        except JournalTrustError as refused:
            refused.job_id = job_id
            return refused
        journals.append(journal)
    if not journals:
        return None
    first = min(journals, key=lambda journal: journal.created)
    marker = CommitMarker(
        first.jobId, layout.journal_key(location, first.jobId), started=first.created
    )
    return marker, first


def _refuse_abort_of_committed_table_job(state: _Unfinished, journal: Journal) -> None:
    """A table job whose commit landed is committed: deleting its files would break the
    table. Rolling it back is the table format's business (time travel, RESTORE, rollback to
    a snapshot), not ours."""
    done = journal_trust.table_commit_of(state.store, state.location, journal, state.options)
    if done is not None:
        url = state.location.url()
        raise CommitError(
            f"job {journal.jobId} is already committed as {done}: there is nothing to roll "
            f"back, and deleting its files would break the table. Nothing was changed. "
            f"`s3commit recover {url}` finishes its clean-up; the table format's time travel "
            "(Delta's RESTORE, Iceberg's rollback to a snapshot) undoes it.",
            destination=url,
            job_id=journal.jobId,
            visible=ALL_VISIBLE,
            remedy=f"s3commit recover {url}",
        )


def _is_uuid(text: object) -> bool:
    return isinstance(text, str) and JOB_UUID.fullmatch(text) is not None


def _success(store: S3Store, location: S3Location) -> SuccessDocument | None:
    try:
        return parse_success(store.get(location.bucket, location.key(layout.SUCCESS_MARKER)))
    except (S3CommitError, ValueError):
        return None
