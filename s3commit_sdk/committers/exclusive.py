"""Does the store honour ``If-None-Match: *`` on PutObject? Exclusive commit depends on it.

DESIGN section 4 ("Exclusive, recoverable job commit"): the per-destination commit marker is
created with a conditional PUT, so two jobs can never commit into one destination at once. A
store that ignores the condition (older S3-compatible servers, some gateways, Ceph RGW on a
bucket with versioning enabled) would let both jobs believe they hold the marker. The check runs
once per endpoint, bucket and process: it creates a probe object twice under the destination's
hidden directory (the second create must be refused with 412) and removes it with one delete.
Credentials that may not delete (no ``s3:DeleteObject``, which every job needs for its hidden
files, its marker and replace mode) are named there, before anything of a job is written.
"""

from __future__ import annotations

import threading

from ..errors import UNCHANGED_VISIBLE, MissingPermissionError, StoreError, VersionedBucketError
from ..layout import probe_key
from ..paths import S3Location
from ..store import S3Settings, S3Store, open_store

#: (endpoint, bucket) found honouring the condition in this process
_honoured: set[tuple[str | None, str]] = set()
_lock = threading.Lock()


def honours_conditional_create(settings: S3Settings, location: S3Location) -> bool:
    """Probe once per (endpoint, bucket) in this process; later calls answer from memory. A
    store found ignoring the condition is probed again next time: its bucket's configuration
    may have been fixed meanwhile (versioning suspended)."""
    cache_key = (settings.endpoint_url, location.bucket)
    with _lock:
        if cache_key not in _honoured:
            if not _probe(open_store(settings), location):
                return False
            _honoured.add(cache_key)
        return True


def _probe(store: S3Store, location: S3Location) -> bool:
    key = probe_key(location)
    created = False
    try:
        created = store.put_if_absent(location.bucket, key, b"1")
        if not created:
            return False  # a fresh key refused: the store cannot have honoured anything
        return not store.put_if_absent(location.bucket, key, b"2")
    finally:
        if created:
            _remove_probe(store, location, key)


def _remove_probe(store: S3Store, location: S3Location, key: str) -> None:
    """One delete; refused for want of ``s3:DeleteObject``, a typed error naming it and the
    probe object it leaves (checked)."""
    try:
        store.delete_keys(location.bucket, [key])
    except StoreError as exc:
        if exc.code not in ("AccessDenied", "403"):
            raise
        left = _still_there(store, location.bucket, key)
        url = location.url().rstrip("/")
        probe = f"s3://{location.bucket}/{key}"
        leaves = (
            f"the hidden probe object {probe} is left (readers skip it; delete it once the "
            "permission is granted)"
            if left
            else "nothing is left"
        )
        raise MissingPermissionError(
            f"the credentials may not delete objects in bucket {location.bucket!r}: deleting "
            f"the setup probe {probe} was refused ({exc.code}). Every job at {url} needs the "
            "permission s3:DeleteObject on the destination (for its hidden files, its commit "
            "marker and replace mode): grant it to these credentials. Nothing of the job was "
            f"written; {leaves}.",
            permission="s3:DeleteObject",
            key=key if left else None,
            code=exc.code,
            destination=location.url(),
            visible=f"{UNCHANGED_VISIBLE}, probe object left: {key}" if left else UNCHANGED_VISIBLE,
            remedy=f"aws s3 rm {probe}" if left else None,
        ) from exc


def _still_there(store: S3Store, bucket: str, key: str) -> bool:
    try:
        return store.head(bucket, key) is not None
    except StoreError:
        return True  # unchecked: say it may be left


def require_conditional_create(settings: S3Settings, location: S3Location) -> None:
    """Refuse to start a job whose exclusive commit the store cannot guarantee."""
    if not honours_conditional_create(settings, location):
        endpoint = settings.endpoint_url or "AWS S3"
        if _versioning(settings, location) == "Enabled":
            raise _versioned_bucket_error(endpoint, location)
        raise StoreError(
            f"the store at {endpoint} ignores `If-None-Match: *` on PutObject (bucket "
            f"{location.bucket!r}), so two jobs could commit into {location.url()} at once. "
            "Nothing was written. If you make sure only one job writes to a destination at a "
            "time, set the option exclusive.commit=unchecked (a weaker mode: see the docs, "
            "S3-compatible stores)."
        )


def _versioning(settings: S3Settings, location: S3Location) -> str | None:
    """The bucket's versioning status; None when it cannot be read (then nothing is said)."""
    try:
        return open_store(settings).versioning(location.bucket)
    except StoreError:
        return None


def _versioned_bucket_error(endpoint: str, location: S3Location) -> VersionedBucketError:
    """Ceph RGW answers ``If-None-Match: *`` on a versioned bucket by writing a new version."""
    bucket = location.bucket
    return VersionedBucketError(
        f"bucket {bucket!r} has versioning enabled, and on it the store at {endpoint} ignores "
        "`If-None-Match: *` on PutObject (Ceph RGW writes a new version instead of refusing), "
        f"so two jobs could commit into {location.url()} at once. Nothing was written. Suspend "
        f"versioning (`aws s3api put-bucket-versioning --bucket {bucket} "
        "--versioning-configuration Status=Suspended`: the store then honours the condition), "
        "write to a bucket without versioning, or, if you make sure only one job writes to a "
        "destination at a time, set the option exclusive.commit=unchecked.",
        bucket=bucket,
        destination=location.url(),
        visible=UNCHANGED_VISIBLE,
    )
