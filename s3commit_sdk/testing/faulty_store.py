"""A rename store that fails or slows chosen calls, injected into the rename committers.

Not a stable API (see :mod:`s3commit_sdk.testing`). ``with faulty_rename_store(plan):`` makes
every rename store the manifest and classic committers open meanwhile a :class:`FaultyStore`
following ``plan``: production code reads no fault table, the test hands the plan in.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import BinaryIO
from unittest import mock

from ..committers import rename_base
from ..errors import StoreError
from ..store.rename import RenameStore, open_rename_store


@dataclass
class FaultPlan:
    """Which calls of a wrapped store fail or slow down (tests only)."""

    fail_rename_at: set[int] = field(default_factory=set)  # 1-based rename calls that fail
    fail_read_containing: str | None = None  # read_bytes of matching paths fails
    delay_s: float = 0.0  # added to every call
    renames: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


class FaultyStore(RenameStore):
    """Wraps a store; the plan decides which calls raise ``StoreError`` or are slowed."""

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

    def rename(self, source: str, target: str) -> None:
        self._slow()
        with self.plan.lock:
            self.plan.renames += 1
            number = self.plan.renames
        if number in self.plan.fail_rename_at:
            raise StoreError(f"injected failure of rename #{number}: {source!r} -> {target!r}")
        self.inner.rename(source, target)

    def mkdirs(self, path: str) -> None:
        self._slow()
        self.inner.mkdirs(path)

    def delete(self, path: str) -> None:
        self._slow()
        self.inner.delete(path)

    def list_files(self, path: str) -> list[tuple[str, int]]:
        self._slow()
        return self.inner.list_files(path)

    def _is_file(self, path: str) -> bool:
        return self.inner._is_file(path)

    def etag(self, path: str) -> str | None:
        return self.inner.etag(path)


@contextmanager
def faulty_rename_store(plan: FaultPlan) -> Iterator[FaultPlan]:
    """Wrap every store a rename committer opens in this block in ``FaultyStore(store, plan)``.

    The plan is shared by the driver's and the in-process tasks' stores, so rename numbers
    count across the whole job.
    """

    def opener(*args, **kwargs) -> RenameStore:
        return FaultyStore(open_rename_store(*args, **kwargs), plan)

    with mock.patch.object(rename_base, "open_rename_store", opener):
        yield plan
