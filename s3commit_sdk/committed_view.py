"""What a reader of a destination sees: its data as of its last committed job, never half a job.

The S3 committers make a job visible one completed upload at a time and delete what ``replace``
supersedes after the last one (DESIGN section 4), all under the destination's commit marker
(``__s3commit/COMMIT_IN_PROGRESS``) and a journal naming every key the job completes and every
key it deletes. A plain listing taken meanwhile holds part of the job: a reader honouring
commits reads the listing as of a whole job instead.

Why "as of before it" rather than waiting: a commit may be held for a long time (throttling, a
slow store) or never end (its driver died: the marker stays until ``s3commit recover`` or
``abort``), and a reader waiting on it would stall or fail for as long; reading the state before
the commit is exact while no replaced object has been deleted, which is every moment a commit
can still be rolled back. Once its replace deletes have begun (they follow only the last
verified completion, and ``recover`` rolls such a commit forward) the state before it is gone,
and the reader reads as of after it instead: the job's files, from the journal where a listing
missed them, without the objects it replaces. So, while job ``J`` commits:

- no replaced object is missing from the listing: the listing without ``J``'s new keys;
- some are: the listing without every key ``J`` replaces, with every key ``J`` completes;
- the marker names no readable journal: the journal is not written yet (nothing completed), or
  was just released with the job's end (then ``J``'s files are listed: the listing is taken
  again).

The listing is bracketed by the marker's and ``_SUCCESS``'s ETags: if either changed while it
was taken, a commit started or ended meanwhile and the listing is taken again (a few times,
then :class:`~.errors.ConcurrentCommitError`). A job that marks no success and starts and ends
within one paged listing goes unseen: one listing request is not a snapshot on every server.
Only keys a journal may name are used from it: new keys carrying ``J``'s UUID where our file
names put it, replaced keys that are visible keys of the destination.

The rename committers (``manifest``, ``file``) take no marker: on S3 their renames are copies
and deletes, one file at a time ("S3A Committers: Architecture and Implementation", "The
FileOutputCommitter"), so a reader may see part of such a job while it commits. A Delta table is
read from its log, whose versions are whole (``scan.list_table``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from . import layout
from .errors import CommitError, ConcurrentCommitError, PendingSetError
from .formats import CommitMarker, Journal
from .paths import S3Location
from .store import ObjectInfo, S3Store
from .uploads import job_of_key

#: listings taken before a reader gives up on a destination whose commits keep changing it
LISTING_ATTEMPTS = 6
#: the pause before the second listing; it doubles for every further one
FIRST_PAUSE_S = 0.1


@dataclass(frozen=True)
class _CommitState:
    """What says a commit started or ended: the marker's and ``_SUCCESS``'s ETags."""

    marker: str | None
    success: str | None


def committed_objects(store: S3Store, location: S3Location) -> list[ObjectInfo]:
    """The visible objects under ``location`` as of its last committed job (module docstring)."""
    for attempt in range(LISTING_ATTEMPTS):
        before = _commit_state(store, location)
        listed = [
            info
            for info in store.list_objects(location.bucket, location.dir_prefix)
            if _is_data(location, info.key)
        ]
        view = listed if before.marker is None else _as_of_commit(store, location, listed)
        if view is not None and _commit_state(store, location) == before:
            return sorted(view, key=lambda info: info.key)
        if attempt + 1 < LISTING_ATTEMPTS:
            time.sleep(FIRST_PAUSE_S * 2**attempt)
    url = location.url()
    raise ConcurrentCommitError(
        f"cannot read {url} as of a committed job: jobs started or ended committing there "
        f"during each of {LISTING_ATTEMPTS} listings. Read it again.",
        destination=url,
    )


def _commit_state(store: S3Store, location: S3Location) -> _CommitState:
    marker = store.head(location.bucket, layout.marker_key(location))
    success = store.head(location.bucket, location.key(layout.SUCCESS_MARKER))
    return _CommitState(marker.etag if marker else None, success.etag if success else None)


def _as_of_commit(
    store: S3Store, location: S3Location, listed: list[ObjectInfo]
) -> list[ObjectInfo] | None:
    """``listed`` as of before (or, once its deletes began, after) the commit the marker names;
    None when that commit ended meanwhile (list again)."""
    marker = store.get_if_present(location.bucket, layout.marker_key(location))
    if marker is None:
        return None
    try:
        job_id = str(CommitMarker.from_json(marker).jobId)
    except PendingSetError:  # a marker of no job of ours: it names nothing to leave out
        return listed
    body = store.get_if_present(location.bucket, layout.journal_key(location, job_id))
    if body is None:  # not written yet (nothing completed), or released as the commit ended
        return None if any(job_of_key(info.key) == job_id.lower() for info in listed) else listed
    try:
        journal = Journal.from_json(body)
    except PendingSetError as exc:
        url = location.url()
        raise CommitError(
            f"cannot read {url} as of a committed job: job {job_id} is committing there and its "
            f"journal is unreadable ({exc}). Finish its commit with `s3commit recover {url}` or "
            f"undo it with `s3commit abort {url}`.",
            destination=url,
            job_id=job_id,
            remedy=f"s3commit recover {url}",
        ) from exc
    new = {
        c.destinationKey: c.length
        for c in journal.commits
        if job_of_key(c.destinationKey) == job_id.lower() and _is_data(location, c.destinationKey)
    }
    replaced = {k for k in journal.replaced if _is_data(location, k)} - new.keys()
    present = {info.key for info in listed}
    if replaced <= present:  # nothing deleted yet: as of before the commit
        return [info for info in listed if info.key not in new]
    # its deletes began, after every completion was verified: as of after the commit
    kept = [info for info in listed if info.key not in replaced]
    return kept + [ObjectInfo(key, size, "") for key, size in new.items() if key not in present]


def _is_data(location: S3Location, key: object) -> bool:
    """A key a reader of ``location`` would list (so one a journal may name)."""
    if not isinstance(key, str) or not key.startswith(location.dir_prefix):
        return False
    relpath = location.relative(key)
    return bool(relpath) and not relpath.endswith("/") and not layout.is_hidden(relpath)
