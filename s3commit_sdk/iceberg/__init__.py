"""Apache Iceberg output: one committed job is one Iceberg snapshot (pyiceberg).

Tasks write Parquet carrying the table's field ids and partition columns, and record each
file's statistics from its footer; job commit completes the uploads (files no Iceberg reader
sees until a snapshot names them), then commits one snapshot through the catalog. Only
:mod:`.schema` loads without ``pyiceberg`` (the ``iceberg`` extra).
"""

from __future__ import annotations

from typing import Any


def open_table(path: str, options: dict[str, Any] | None = None):
    """The ``pyiceberg`` table a write to ``path`` with ``options`` commits to.

    The catalog and table come from the same options as ``write_committed``'s
    (``iceberg.catalog.type``, ``iceberg.catalog.uri``, ``iceberg.table``, ...; the default
    sqlite catalog beside the notebook), S3 endpoint and credentials as the write resolves
    them, so a table written in a notebook opens there without more setup.
    """
    from ..errors import InvalidPathError
    from ..options import resolve_options
    from ..paths import parse_s3_url
    from ..store import S3Settings
    from .catalog import CatalogConfig
    from .table import IcebergLog

    resolved = resolve_options(options)
    location = parse_s3_url(path)
    log = IcebergLog(location, S3Settings.resolve(resolved), CatalogConfig.of(resolved, location))
    table = log.open()
    if table is None:
        raise InvalidPathError(f"no Iceberg table {log.name} in the {log.config.shown()} catalog")
    return table
