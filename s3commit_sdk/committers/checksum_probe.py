"""Does the store keep the checksums of ``checksum.algorithm``? End-to-end integrity needs it.

A store can accept S3's additional checksums and drop them: Ceph RGW 16 answers 200 to an
upload carrying ``x-amz-checksum-crc32`` and keeps no checksum, so no part would be checked and
no object checksum could be compared. Never inferring support from a 200, job setup checks once
per endpoint, bucket, algorithm and process, as the conditional-create check does
(:mod:`.exclusive`): a one-part multipart upload of a probe object under the destination's
hidden directory, carrying the part's checksum and completed with it, then a HEAD with
``ChecksumMode=ENABLED`` that must show the object's composite checksum, then one delete. A
store that keeps none, or refuses the algorithm outright (400), fails the job there, before
anything of it is uploaded, with an :class:`~..errors.InvalidOptionError` naming the option.
"""

from __future__ import annotations

import threading
import uuid

from .. import checksums
from ..errors import UNCHANGED_VISIBLE, InvalidOptionError, StoreError
from ..layout import hidden_prefix
from ..paths import S3Location
from ..store import S3Settings, S3Store, open_store
from .exclusive import _remove_probe

OPTION = "checksum.algorithm"
_BODY = b"s3commit checksum probe"
#: (endpoint, bucket, algorithm) found keeping checksums in this process
_kept: set[tuple[str | None, str, str]] = set()
_lock = threading.Lock()


def require_kept_checksums(settings: S3Settings, location: S3Location) -> None:
    """Refuse a job whose ``checksum.algorithm`` the store would not keep (or refuses)."""
    algorithm = settings.requests.checksum_algorithm
    if not algorithm:
        return
    cache_key = (settings.endpoint_url, location.bucket, algorithm)
    with _lock:
        if cache_key in _kept:
            return
        problem = _probe(open_store(settings), location, algorithm)
        if problem is None:
            _kept.add(cache_key)
            return
    endpoint = settings.endpoint_url or "AWS S3"
    raise InvalidOptionError(
        f"the store at {endpoint} does not keep {algorithm} checksums (bucket "
        f"{location.bucket!r}): {problem}, so it would check no part and no file could be "
        f"verified end to end. Nothing was written. Leave out the option {OPTION} "
        "(fs.s3a.create.checksum.algorithm) for this store, or choose an algorithm it keeps.",
        option=OPTION,
        destination=location.url(),
        visible=UNCHANGED_VISIBLE,
    )


def _probe(store: S3Store, location: S3Location, algorithm: str) -> str | None:
    """What is wrong with the store's checksums (None: nothing)."""
    bucket = location.bucket
    key = f"{hidden_prefix(location)}checksum-probe-{uuid.uuid4()}"
    upload_id = None
    completed = False
    try:
        upload_id = store.initiate(bucket, key)
        part = store.upload_part(bucket, key, upload_id, 1, _BODY)
        store.complete(bucket, key, upload_id, [part.etag], algorithm, [part.checksum])
        completed = True
        stored = store.head(bucket, key)
    except StoreError as exc:
        if exc.code in ("400", "InvalidRequest", "InvalidArgument", "NotImplemented"):
            return f"it refused an upload carrying one ({exc.code})"
        raise
    finally:
        if completed:
            _remove_probe(store, location, key)
        elif upload_id is not None:
            store.abort(bucket, key, upload_id)
    expected = checksums.composite(algorithm, [part.checksum])
    found = stored.checksum if stored is not None else None
    if not found:
        return "it accepted an upload carrying one, and a HEAD with ChecksumMode=ENABLED shows none"
    if not checksums.matches(expected, found):
        return f"a HEAD of an upload carrying one shows {found}, where {expected} was expected"
    return None
