"""Removing what one job left under an S3 destination: the one path of job end, job abort and
``s3commit recover`` / ``abort`` (recovery.py).

The order is the protocol's (DESIGN section 4). The job's alive marker goes first
(:func:`stop_attempts`), before the caller lists what to remove, so no attempt adds an upload or
a metadata file after that listing (continuity, ``S3Committer.ensure_job_alive``). Then the
uploads are aborted and the hidden files deleted (:func:`remove_job_files`), and last
(:func:`release`) the journal before the marker: a marker never outlives what the tools act on.
Only this job's names are accepted (:func:`_check_owned`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

from ..layout import alive_key, job_hidden_prefixes, journal_key, marker_key
from ..paths import S3Location
from ..store import S3Store


def stop_attempts(store: S3Store, location: S3Location, job_id: str) -> None:
    """Delete the job's alive marker: from now on every attempt of the job discards its output."""
    store.delete_keys(location.bucket, [alive_key(location, job_id)])


def remove_job_files(
    store: S3Store,
    location: S3Location,
    job_id: str,
    *,
    uploads: Mapping[str, str],
    hidden: Sequence[str],
    threads: int,
) -> int:
    """Abort ``uploads`` (upload id -> key) in parallel, then delete ``hidden``.

    Returns how many uploads were still pending (the others were completed or aborted already).
    """
    _check_owned(location, job_id, uploads.values(), hidden, ())
    bucket, aborted = location.bucket, 0
    if uploads:
        with ThreadPoolExecutor(threads, "s3commit-abort") as pool:
            aborted = sum(
                pool.map(lambda item: store.abort(bucket, item[1], item[0]), uploads.items())
            )
    store.delete_keys(bucket, list(hidden))
    return aborted


def release(store: S3Store, location: S3Location, job_id: str, keys: Sequence[str]) -> None:
    """Delete the job's journal and the destination's marker (``keys``, journal first; either
    may be left out): the last step of every job end, abort and recovery."""
    _check_owned(location, job_id, (), (), keys)
    store.delete_keys(location.bucket, list(keys))


def _check_owned(
    location: S3Location,
    job_id: str,
    upload_keys: Iterable[str],
    hidden: Sequence[str],
    release: Sequence[str],
) -> None:
    """Never another job's data: uploads under the destination, hidden files under this job's
    own hidden directories, and of the keys released only its journal and the marker."""
    own = job_hidden_prefixes(location, job_id)
    strays = [k for k in upload_keys if not k.startswith(location.dir_prefix)]
    strays += [k for k in hidden if not k.startswith(own)]
    strays += [k for k in release if k not in (journal_key(location, job_id), marker_key(location))]
    if strays:
        raise ValueError(
            f"refusing to remove {strays[0]!r}: not a file of job {job_id} at {location.url()}"
        )
