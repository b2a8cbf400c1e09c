"""A rename store that fails or slows chosen calls, injected into the rename committers.

Not a stable API (see :mod:`s3commit_sdk.testing`). ``with faulty_rename_store(plan):`` makes
every rename store the manifest and classic committers open meanwhile a :class:`FaultyStore`
following ``plan``, through their ``store_factory``: production code reads no fault table, the
test hands the plan in.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import BinaryIO

from ..committers.rename_base import RenameCommitter
from ..errors import StoreError
from ..store.rename import RenameStore


@dataclass
class FaultPlan:
    """Which calls of a wrapped store fail or slow down (tests only)."""

    #: 1-based rename calls that fail (``rename`` and ``rename_dir`` count alike)
    fail_rename_at: set[int] = field(default_factory=set)
    fail_read_containing: str | None = None  # read_bytes of matching paths fails
    delay_s: float = 0.0  # added to every call
    renames: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


class FaultyStore(RenameStore):
    """Wraps a store; the plan decides which calls raise ``StoreError`` or are slowed.

    Every operation of :class:`RenameStore` is forwarded to the wrapped store's own (none falls
    back to the interface's default, which would bypass what the wrapped store does better).
    """

    def __init__(self, inner: RenameStore, plan: FaultPlan) -> None:
        self.inner, self.plan = inner, plan
        self.counters = inner.counters

    def _slow(self) -> None:
        if self.plan.delay_s:
            time.sleep(self.plan.delay_s)

    def open_write(self, path: str) -> BinaryIO:
        self._slow()
        return self.inner.open_write(path)

    def read_bytes(self, path: str) -> bytes:
        self._slow()
        marker = self.plan.fail_read_containing
        if marker and marker in path:
            raise StoreError(f"injected failure reading {path!r}")
        return self.inner.read_bytes(path)

    def write_bytes(self, path: str, data: bytes) -> None:
        self._slow()
        self.inner.write_bytes(path, data)

    def _count_rename(self, source: str, target: str) -> None:
        self._slow()
        with self.plan.lock:
            self.plan.renames += 1
            number = self.plan.renames
        if number in self.plan.fail_rename_at:
            raise StoreError(f"injected failure of rename #{number}: {source!r} -> {target!r}")

    def rename(self, source: str, target: str) -> None:
        self._count_rename(source, target)
        self.inner.rename(source, target)

    def rename_dir(self, source: str, target: str) -> None:
        self._count_rename(source, target)
        self.inner.rename_dir(source, target)

    def mkdirs(self, path: str) -> None:
        self._slow()
        self.inner.mkdirs(path)

    def delete(self, path: str) -> None:
        self._slow()
        self.inner.delete(path)

    def list_files(self, path: str) -> list[tuple[str, int]]:
        self._slow()
        return self.inner.list_files(path)

    def exists(self, path: str) -> bool:
        self._slow()
        return self.inner.exists(path)

    def _is_file(self, path: str) -> bool:
        return self.inner._is_file(path)

    def etag(self, path: str) -> str | None:
        return self.inner.etag(path)

    def count(self, operation: str) -> None:
        self.inner.count(operation)


@contextmanager
def faulty_rename_store(plan: FaultPlan) -> Iterator[FaultPlan]:
    """Wrap every store a rename committer opens in this block in ``FaultyStore(store, plan)``.

    The plan is shared by the driver's and the in-process tasks' stores, so rename numbers
    count across the whole job.
    """
    real = RenameCommitter.store_factory

    def opener(*args, **kwargs) -> RenameStore:
        return FaultyStore(real(*args, **kwargs), plan)

    RenameCommitter.store_factory = staticmethod(opener)
    try:
        yield plan
    finally:
        RenameCommitter.store_factory = staticmethod(real)
