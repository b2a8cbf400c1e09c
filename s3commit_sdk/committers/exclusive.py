"""Does the store honour ``If-None-Match: *`` on PutObject? Exclusive commit depends on it.

DESIGN section 4 ("Exclusive, recoverable job commit"): the per-destination commit marker is
created with a conditional PUT, so two jobs can never commit into one destination at once. A
store that ignores the condition (older S3-compatible servers, some gateways) would let both
jobs believe they hold the marker. The check runs once per endpoint, bucket and process: it
creates a probe object twice under the destination's hidden directory; the second create must
be refused with 412.
"""

from __future__ import annotations

import threading

from ..errors import StoreError
from ..layout import probe_key
from ..paths import S3Location
from ..store import S3Settings, S3Store, open_store

_checked: dict[tuple[str | None, str], bool] = {}
_lock = threading.Lock()


def honours_conditional_create(settings: S3Settings, location: S3Location) -> bool:
    """Probe once per (endpoint, bucket) in this process; later calls answer from memory."""
    cache_key = (settings.endpoint_url, location.bucket)
    with _lock:
        if cache_key not in _checked:
            _checked[cache_key] = _probe(open_store(settings), location)
        return _checked[cache_key]


def _probe(store: S3Store, location: S3Location) -> bool:
    key = probe_key(location)
    try:
        if not store.put_if_absent(location.bucket, key, b"1"):
            return False  # a fresh key refused: the store cannot have honoured anything
        return not store.put_if_absent(location.bucket, key, b"2")
    finally:
        store.delete_keys(location.bucket, [key])


def require_conditional_create(settings: S3Settings, location: S3Location) -> None:
    """Refuse to start a job whose exclusive commit the store cannot guarantee."""
    if not honours_conditional_create(settings, location):
        endpoint = settings.endpoint_url or "AWS S3"
        raise StoreError(
            f"the store at {endpoint} ignores `If-None-Match: *` on PutObject (bucket "
            f"{location.bucket!r}), so two jobs could commit into {location.url()} at once. "
            "Nothing was written. If you make sure only one job writes to a destination at a "
            "time, set the option exclusive.commit=unchecked (a weaker mode, see README)."
        )
