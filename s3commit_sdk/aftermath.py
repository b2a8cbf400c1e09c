"""What a failed or interrupted write left behind, stated from facts for the progress views.

The runner calls :func:`failure_of` once a job failed and hands the :class:`Failure` to the
progress tracker; progress itself never lists S3 (it imports nothing above it).

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
from .layout import job_hidden_prefixes, marker_key
from .paths import S3Location
from .progress import Failure
from .store import open_store
from .uploads import job_of_key

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
    # an interrupt held through a failing commit is raised from the typed error (.interrupts)
    facts = exc.__cause__ if interrupted and isinstance(exc.__cause__, S3CommitError) else exc
    location = getattr(job, "location", None)
    destination = location.url() if location is not None else getattr(exc, "destination", None)
    failure = Failure(
        interrupted=interrupted,
        error=type(exc).__name__,
        reason=reason,
        destination=destination or "",
        job_id=getattr(job, "job_id", "") or getattr(exc, "job_id", None) or "",
        notes=notes,
        visible=getattr(facts, "visible", None),
        remedy=getattr(facts, "remedy", None),
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
    location, job_id = job.location, job.job_id
    store = open_store(job.settings, threads=1)
    pending = store.list_pending(location.bucket, location.dir_prefix)
    hidden = job_hidden_prefixes(location, job_id)
    locked = False
    if store.head(location.bucket, marker_key(location)) is not None:
        try:
            marker = CommitMarker.from_json(store.get(location.bucket, marker_key(location)))
            locked = marker.jobId == job_id
        except S3CommitError:  # released between the HEAD and the GET, or unreadable
            locked = False
    return {
        "pending_uploads": sum(1 for u in pending if job_of_key(u.key) == job_id.lower()),
        "hidden_files": sum(1 for p in hidden for _ in store.list_objects(location.bucket, p)),
        "locked": locked,
    }
