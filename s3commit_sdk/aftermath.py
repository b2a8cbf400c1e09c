"""What a failed or interrupted write left behind, stated from facts for the progress views.

The error's text and the notes the SDK added while it propagated say what the SDK did (aborted,
rolled back, left the destination locked); one listing after the failure says what is left:
this job's pending uploads and hidden metadata under the destination, and whether the
destination's commit marker still names this job. Nothing here is inferred from the phase.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from .errors import S3CommitError, first_line
from .formats import CommitMarker
from .paths import S3Location
from .progress import Failure

NOTE_PREFIX = "s3commit: "


def failure_of(exc: BaseException, job: Any = None) -> Failure:
    """The facts of ``exc`` for ``job`` (a ``JobContext``, or None when there was none yet)."""
    interrupted = isinstance(exc, KeyboardInterrupt)
    notes = tuple(
        note.removeprefix(NOTE_PREFIX)
        for note in getattr(exc, "__notes__", ())
        if isinstance(note, str) and note.startswith(NOTE_PREFIX)
    )
    if interrupted:
        reason = "interrupted (Ctrl-C, or Kernel > Interrupt in a notebook)"
    elif isinstance(exc, S3CommitError):
        reason = str(exc)  # our messages are written for people, remedy included
    else:
        reason = first_line(exc)
    location = getattr(job, "location", None)
    failure = Failure(
        interrupted=interrupted,
        error=type(exc).__name__,
        reason=reason,
        destination=location.url() if location is not None else "",
        job_id=getattr(job, "job_id", ""),
        notes=notes,
    )
    if not isinstance(location, S3Location):
        return failure
    if not job.options.unique_filenames:
        return replace(
            failure,
            unchecked="file names carry no job id with staging.unique-filenames=false",
        )
    try:
        return replace(failure, **_left_by(job))
    except Exception as error:  # the listing is a courtesy: never hide the job's own error
        return replace(failure, unchecked=first_line(error, 200))


def _left_by(job: Any) -> dict[str, Any]:
    from .committers.magic import MAGIC_DIR
    from .store import S3Store

    location, job_id = job.location, job.job_id
    store = S3Store(job.settings, pool_size=2)
    pending = store.list_pending(location.bucket, location.dir_prefix)
    hidden = [location.job_prefix(job_id), location.key(f"{MAGIC_DIR}/job-{job_id}/")]
    locked = False
    if store.head(location.bucket, location.marker_key) is not None:
        try:
            marker = CommitMarker.from_json(store.get(location.bucket, location.marker_key))
            locked = marker.jobId == job_id
        except S3CommitError:  # released between the HEAD and the GET, or unreadable
            locked = False
    return {
        "pending_uploads": sum(1 for u in pending if job_id in u.key),
        "hidden_files": sum(1 for p in hidden for _ in store.list_objects(location.bucket, p)),
        "locked": locked,
    }
