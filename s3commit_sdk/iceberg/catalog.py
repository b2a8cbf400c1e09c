"""Which Iceberg catalog a job commits to, built from its options, and the table in it.

``iceberg.catalog.type``: ``sql`` (the default: a sqlite file beside the notebook, or any
SQLAlchemy URI such as ``postgresql+psycopg2://...``), ``rest`` or ``glue``;
``iceberg.catalog.uri``; ``iceberg.catalog.<property>`` for any other pyiceberg catalog property;
``iceberg.table`` (``namespace.name``, default ``default.<last path segment>``). The
destination path is the table's location.

The catalog's file IO reaches S3 with the job's endpoint and credentials, handed over when the
catalog is built and never stored: table properties and the catalog's rows hold none, and the
journal records the catalog URI with its password removed.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from ..credentials import fixed_keys
from ..errors import InvalidArgumentError
from ..paths import S3Location
from ..store import S3Settings
from .schema import require_pyiceberg

#: the embedded default: a sqlite file in the working directory (a notebook's own directory)
DEFAULT_CATALOG_FILE = "s3commit-iceberg.db"
#: the catalog's name (a SQL catalog keys its rows by it): pyiceberg's usual ``default``
CATALOG_NAME = "default"
_NAME_PART = re.compile(r"[^A-Za-z0-9_]")


@dataclass(frozen=True)
class CatalogConfig:
    """A job's catalog: type, URI, extra properties and the table's identifier."""

    type: str = "sql"
    uri: str | None = None
    properties: tuple[tuple[str, str], ...] = ()
    table: str | None = None

    @classmethod
    def of(cls, options: Any, location: S3Location) -> CatalogConfig:
        """From resolved options; the default sqlite URI is made absolute here, on the driver
        (Spark may commit in a process with another working directory)."""
        uri = options.iceberg_catalog_uri
        if options.iceberg_catalog_type == "sql" and uri is None:
            uri = "sqlite:///" + os.path.abspath(DEFAULT_CATALOG_FILE)
        return cls(
            type=options.iceberg_catalog_type,
            uri=uri,
            properties=tuple(options.iceberg_catalog),
            table=options.iceberg_table or default_table_name(location),
        )

    @property
    def identifier(self) -> tuple[str, str]:
        namespace, _, name = (self.table or "").rpartition(".")
        return namespace, name

    def shown(self) -> str:
        """The catalog as ``_SUCCESS`` and the journal record it: no password."""
        return f"{self.type} {redacted_uri(self.uri)}" if self.uri else self.type


def default_table_name(location: S3Location) -> str:
    """``default.<the destination's last segment>``, letters, digits and ``_`` only."""
    last = location.prefix.rstrip("/").rpartition("/")[2] or location.bucket
    return "default." + (_NAME_PART.sub("_", last) or "table")


def redacted_uri(uri: str | None) -> str | None:
    """``uri`` without the password of its user info."""
    if not uri:
        return uri
    parts = urlsplit(uri)
    if parts.password is None:
        return uri
    host = parts.hostname or ""
    netloc = f"{parts.username}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def io_properties(settings: S3Settings) -> dict[str, str]:
    """pyiceberg's file IO: metadata through the SDK's store (:mod:`.fileio`), data files read
    by pyarrow's S3 filesystem with the ``s3.*`` properties: the job's endpoint, region and
    credentials (pyarrow ignores ``AWS_ENDPOINT_URL``, so the endpoint is always passed)."""
    from .fileio import register

    props = {"s3.region": settings.region or "us-east-1", **register(settings)}
    if settings.endpoint_url:
        props["s3.endpoint"] = settings.endpoint_url
    keys = fixed_keys(settings)
    if keys:
        props["s3.access-key-id"], props["s3.secret-access-key"] = keys[0], keys[1]
        if keys[2]:
            props["s3.session-token"] = keys[2]
    return props


def load_catalog(config: CatalogConfig, settings: S3Settings):
    """The pyiceberg catalog of ``config``, its file IO reaching S3 as the job does."""
    require_pyiceberg()
    from pyiceberg.catalog import load_catalog as pyiceberg_catalog

    props: dict[str, str] = {"type": config.type, **io_properties(settings)}
    if config.uri:
        props["uri"] = config.uri
    if config.type == "glue":
        props["glue.region"] = settings.region or "us-east-1"
        keys = fixed_keys(settings)
        if keys:
            props["glue.access-key-id"], props["glue.secret-access-key"] = keys[0], keys[1]
            if keys[2]:
                props["glue.session-token"] = keys[2]
    props.update(dict(config.properties))
    try:
        return pyiceberg_catalog(CATALOG_NAME, **props)
    except (ValueError, TypeError, ImportError) as exc:
        raise InvalidArgumentError(
            f"cannot open the Iceberg {config.type} catalog {redacted_uri(config.uri)!s}: {exc}"
        ) from exc
