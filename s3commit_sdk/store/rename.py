"""Stores with file rename, for the manifest and classic committers.

One narrow interface (the "Manifest Committer Protocol" keeps its store operations this
small): the local filesystem, any fsspec filesystem that renames (``memory://`` in tests;
gcsfs or adlfs for users who install them), and S3, where "rename" is a server-side copy plus
a delete as in Hadoop's S3A client. ``testing.faulty_store.FaultyStore`` wraps any of them to
fail or slow chosen calls in tests.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from abc import ABC, abstractmethod
from typing import BinaryIO

from .opener import open_store
from .s3 import RequestCounters, S3Settings, S3Store


class RenameStore(ABC):
    """Paths are the store's own: absolute OS paths, fsspec paths, or S3 keys."""

    counters: RequestCounters

    @abstractmethod
    def open_write(self, path: str) -> BinaryIO: ...

    @abstractmethod
    def read_bytes(self, path: str) -> bytes: ...

    @abstractmethod
    def write_bytes(self, path: str, data: bytes | bytearray) -> None: ...

    @abstractmethod
    def rename(self, source: str, target: str) -> None:
        """Move one file; the target's parent exists; an existing target is replaced."""

    def rename_dir(self, source: str, target: str) -> None:
        """Move a directory tree; file by file unless the store can do better."""
        for path, _ in self.list_files(source):
            destination = target + path[len(source) :]
            self.mkdirs(destination.rsplit("/", 1)[0])
            self.rename(path, destination)

    @abstractmethod
    def mkdirs(self, path: str) -> None: ...

    @abstractmethod
    def delete(self, path: str) -> None:
        """A file, or a directory and everything below it; missing is fine."""

    @abstractmethod
    def list_files(self, path: str) -> list[tuple[str, int]]:
        """Every file below a directory, with its size; empty if it does not exist."""

    def exists(self, path: str) -> bool:
        return bool(self.list_files(path)) or self._is_file(path)

    @abstractmethod
    def _is_file(self, path: str) -> bool: ...

    def etag(self, path: str) -> str | None:
        return None

    def count(self, operation: str) -> None:
        self.counters.add(operation)


class LocalStore(RenameStore):
    """The local filesystem: ``os.replace`` is an atomic rename."""

    def __init__(self) -> None:
        self.counters = RequestCounters()

    def open_write(self, path: str) -> BinaryIO:
        self.count("create")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        return open(path, "wb")

    def read_bytes(self, path: str) -> bytes:
        self.count("open")
        with open(path, "rb") as handle:
            return handle.read()

    def write_bytes(self, path: str, data: bytes | bytearray) -> None:
        with self.open_write(path) as handle:
            handle.write(data)

    def rename(self, source: str, target: str) -> None:
        self.count("rename")
        os.replace(source, target)

    def rename_dir(self, source: str, target: str) -> None:
        self.count("rename")
        os.makedirs(os.path.dirname(target), exist_ok=True)
        os.replace(source, target)

    def mkdirs(self, path: str) -> None:
        self.count("mkdirs")
        os.makedirs(path, exist_ok=True)

    def delete(self, path: str) -> None:
        self.count("delete")
        if os.path.isdir(path):
            shutil.rmtree(path, ignore_errors=True)
        elif os.path.lexists(path):
            os.remove(path)

    def list_files(self, path: str) -> list[tuple[str, int]]:
        self.count("list")
        found = []
        for root, _, files in os.walk(path):
            for name in files:
                file = os.path.join(root, name)
                try:
                    found.append((file, os.path.getsize(file)))
                except FileNotFoundError:  # renamed or removed since the walk read its directory
                    continue
        return sorted(found)

    def _is_file(self, path: str) -> bool:
        return os.path.isfile(path)


class FsspecStore(RenameStore):
    """Any fsspec filesystem whose ``mv`` of one file is a rename."""

    def __init__(self, protocol: str) -> None:
        import fsspec

        self.fs = fsspec.filesystem(protocol)
        self.counters = RequestCounters()

    def open_write(self, path: str) -> BinaryIO:
        self.count("create")
        self.fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
        return self.fs.open(path, "wb")

    def read_bytes(self, path: str) -> bytes:
        self.count("open")
        return self.fs.cat_file(path)

    def write_bytes(self, path: str, data: bytes | bytearray) -> None:
        with self.open_write(path) as handle:
            handle.write(data)

    def rename(self, source: str, target: str) -> None:
        self.count("rename")
        self.fs.mv(source, target)

    def mkdirs(self, path: str) -> None:
        self.count("mkdirs")
        self.fs.makedirs(path, exist_ok=True)

    def delete(self, path: str) -> None:
        self.count("delete")
        if self.fs.exists(path):
            self.fs.rm(path, recursive=True)

    def list_files(self, path: str) -> list[tuple[str, int]]:
        self.count("list")
        if not self.fs.isdir(path):
            return []
        found = self.fs.find(path, detail=True)
        return sorted((self._norm(p), info["size"]) for p, info in found.items())

    def _norm(self, path: str) -> str:
        return path if path.startswith("/") or ":" in path else "/" + path

    def _is_file(self, path: str) -> bool:
        return self.fs.isfile(path)


class _UploadOnClose:
    """A local spool file that becomes one PUT when closed (the classic committer on S3)."""

    def __init__(self, store: S3Store, bucket: str, key: str) -> None:
        self._spool = tempfile.TemporaryFile()  # noqa: SIM115 - closed by close()
        self._store, self._bucket, self._key = store, bucket, key
        self.closed = False

    def write(self, data) -> int:
        return self._spool.write(data)

    def tell(self) -> int:
        return self._spool.tell()

    def flush(self) -> None:
        self._spool.flush()

    def writable(self) -> bool:
        return True

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self._spool.seek(0)
        try:
            self._store.put(self._bucket, self._key, self._spool.read())
        finally:
            self._spool.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class S3RenameStore(RenameStore):
    """S3 seen as a filesystem, as Hadoop's S3A presents it: rename = COPY + DELETE per file."""

    def __init__(self, s3: S3Store, bucket: str) -> None:
        self.s3 = s3
        self.bucket = bucket
        self.counters = self.s3.counters

    def count(self, operation: str) -> None:
        return None  # botocore's own events count every request

    def open_write(self, path: str) -> BinaryIO:
        return _UploadOnClose(self.s3, self.bucket, path)  # type: ignore[return-value]

    def read_bytes(self, path: str) -> bytes:
        return self.s3.get(self.bucket, path)

    def write_bytes(self, path: str, data: bytes | bytearray) -> None:
        self.s3.put(self.bucket, path, data)

    def rename(self, source: str, target: str) -> None:
        self.s3.copy(self.bucket, source, target)
        self.s3.delete_keys(self.bucket, [source])

    def mkdirs(self, path: str) -> None:
        return None  # S3 has no directories

    def delete(self, path: str) -> None:
        keys = [k for k, _ in self.list_files(path)] or [path]
        self.s3.delete_keys(self.bucket, keys)

    def list_files(self, path: str) -> list[tuple[str, int]]:
        return [(o.key, o.size) for o in self.s3.list_objects(self.bucket, path.rstrip("/") + "/")]

    def _is_file(self, path: str) -> bool:
        return self.s3.head(self.bucket, path) is not None

    def etag(self, path: str) -> str | None:
        info = self.s3.head(self.bucket, path)
        return info.etag if info else None


def open_rename_store(location, settings: S3Settings, *, threads: int | None = None) -> RenameStore:
    """The store for a destination, used by ``threads`` threads at once (sizes an S3 pool);
    the rename committers open theirs through this (``RenameCommitter.store_factory``)."""
    from ..paths import FsLocation

    if isinstance(location, FsLocation):
        return LocalStore() if location.scheme == "file" else FsspecStore(location.scheme)
    return S3RenameStore(open_store(settings, threads=threads), location.bucket)
