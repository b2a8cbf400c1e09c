"""pyiceberg's file IO for table metadata through the SDK's own S3 store.

pyiceberg's default IO (pyarrow's S3 filesystem) uploads every metadata file as a multipart
upload whose parts are sent with chunked encoding, which Ceph RGW 16 refuses (HTTP 411,
MissingContentLength), and a failed one stays pending. Through :class:`~..store.S3Store`,
manifests, manifest lists and ``metadata.json`` files are single PUTs carrying the job's request
options (encryption, SSE-C key, storage class, ACL, requester pays), retried by the job's
policy and counted with its requests. Data files are still read by pyarrow (a scan needs a
``PyArrowFileIO``), so the class extends it and takes over metadata only.
"""

from __future__ import annotations

import io
from typing import Any

from pyiceberg.io import InputFile, InputStream, OutputFile, OutputStream
from pyiceberg.io.pyarrow import PyArrowFileIO

from ..paths import parse_s3_url
from ..store import S3Settings, S3Store, open_store

#: the catalog property naming the settings this process registered for the IO
SETTINGS_PROPERTY = "s3commit.settings"
#: the catalog property that makes pyiceberg build this IO
IO_IMPL = f"{__name__}.StoreFileIO"
_REGISTERED: dict[str, S3Settings] = {}
_STORES: dict[str, S3Store] = {}


def register(settings: S3Settings) -> dict[str, str]:
    """The catalog properties that give its tables this IO with ``settings`` (this process)."""
    token = f"{hash(settings):x}-{id(settings.credentials_provider):x}"
    _REGISTERED[token] = settings
    return {"py-io-impl": IO_IMPL, SETTINGS_PROPERTY: token}


def _store(token: str) -> S3Store:
    if token not in _STORES:
        _STORES[token] = open_store(_REGISTERED[token], threads=4)
    return _STORES[token]


class StoreFileIO(PyArrowFileIO):
    """Metadata files (``s3://`` locations) through the SDK's store; the rest as pyarrow's."""

    def __init__(self, properties: dict[str, str] | None = None) -> None:
        super().__init__(properties or {})
        self.store = _store(self.properties[SETTINGS_PROPERTY])

    def new_input(self, location: str) -> InputFile:
        if not location.startswith("s3://"):
            return super().new_input(location)
        return StoreInputFile(location, self.store)

    def new_output(self, location: str) -> OutputFile:
        if not location.startswith("s3://"):
            return super().new_output(location)
        return StoreOutputFile(location, self.store)

    def delete(self, location: str | InputFile | OutputFile) -> None:
        path = location if isinstance(location, str) else location.location
        if not path.startswith("s3://"):
            super().delete(location)
            return
        target = parse_s3_url(path)
        self.store.delete_keys(target.bucket, [target.prefix])

    def __getstate__(self) -> dict[str, Any]:
        raise TypeError("StoreFileIO lives in the process that registered its settings")


class StoreInputFile(InputFile):
    """One object, read whole when opened (metadata files are small: a manifest of 100,000
    files is about 15 MB)."""

    def __init__(self, location: str, store: S3Store) -> None:
        super().__init__(location)
        self.target, self.store = parse_s3_url(location), store

    def __len__(self) -> int:
        found = self.store.head(self.target.bucket, self.target.prefix)
        if found is None:
            raise FileNotFoundError(self.location)
        return found.size

    def exists(self) -> bool:
        return self.store.head(self.target.bucket, self.target.prefix) is not None

    def open(self, seekable: bool = True) -> InputStream:
        try:
            body = self.store.get(self.target.bucket, self.target.prefix)
        except Exception as exc:
            if getattr(exc, "code", None) in ("NoSuchKey", "404"):
                raise FileNotFoundError(self.location) from exc
            raise
        return io.BytesIO(body)


class StoreOutputFile(OutputFile):
    """One object, written by a single PUT when its stream closes."""

    def __init__(self, location: str, store: S3Store) -> None:
        super().__init__(location)
        self.target, self.store = parse_s3_url(location), store

    def __len__(self) -> int:
        return len(self.to_input_file())

    def exists(self) -> bool:
        return self.to_input_file().exists()

    def to_input_file(self) -> InputFile:
        return StoreInputFile(self.location, self.store)

    def create(self, overwrite: bool = False) -> OutputStream:
        if not overwrite and self.exists():
            raise FileExistsError(f"{self.location} already exists")
        return _PutOnClose(self.target.bucket, self.target.prefix, self.store)


class _PutOnClose(io.BytesIO):
    """Bytes written, PUT as one object on close (not on an exception inside ``with``)."""

    def __init__(self, bucket: str, key: str, store: S3Store) -> None:
        super().__init__()
        self.bucket, self.key, self.store = bucket, key, store
        self._failed = False

    def __exit__(self, kind, value, traceback) -> None:
        self._failed = kind is not None
        super().__exit__(kind, value, traceback)

    def close(self) -> None:
        if not self.closed and not self._failed:
            self.store.put(self.bucket, self.key, self.getvalue())
        super().close()
