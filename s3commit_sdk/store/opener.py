"""The one recipe that turns options into an S3 store: every caller opens its store here."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..options import CommitOptions, resolve_options
from .s3 import S3Settings, S3Store

#: connections beyond the caller's threads, for its own requests meanwhile (markers, HEADs)
SPARE_CONNECTIONS = 4
#: the pool of a caller that names no thread count: botocore's default size
DEFAULT_POOL = 10


def open_store(
    source: S3Settings | CommitOptions | Mapping[str, Any] | None, *, threads: int | None = None
) -> S3Store:
    """A store on the S3 that ``source`` describes.

    ``source`` is the settings captured on the driver (they carry a credentials provider),
    resolved options, or raw options (resolved and checked here; None: the environment's
    defaults). ``threads`` is how many of the caller's threads use the store at once: the
    connection pool holds as many plus spares, so no thread waits for a connection.
    """
    if isinstance(source, S3Settings):
        settings = source
    elif isinstance(source, CommitOptions):
        settings = S3Settings.resolve(source)
    else:
        settings = S3Settings.resolve(resolve_options(source))
    pool = DEFAULT_POOL if threads is None else threads + SPARE_CONNECTIONS
    return S3Store(settings, pool_size=pool)
