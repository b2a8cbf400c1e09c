"""Delta Lake output: one committed job is one Delta transaction (delta-rs).

Tasks write Parquet exactly as for ``format="parquet"``; job commit completes the uploads (files
no Delta reader sees until the log names them), then writes one log entry adding every file
with its statistics. Only :mod:`.schema` and :mod:`.stats` load without the ``deltalake``
package (the ``delta`` extra); :mod:`.table` needs it.
"""

from __future__ import annotations

from typing import Any


def open_table(path: str, version: int | None = None, options: dict[str, Any] | None = None):
    """The ``deltalake.DeltaTable`` at ``path`` (an ``s3://`` URL), optionally at ``version``.

    S3 endpoint and credentials resolve as ``write_committed`` resolves them (``options``, then
    the environment), so a table written in a notebook opens there without more setup.
    """
    import deltalake

    from ..options import resolve_options
    from ..paths import parse_s3_url
    from ..store import S3Settings
    from .table import storage_options, table_uri

    settings = S3Settings.resolve(resolve_options(options))
    location = parse_s3_url(path)
    return deltalake.DeltaTable(
        table_uri(location), version=version, storage_options=storage_options(settings)
    )
