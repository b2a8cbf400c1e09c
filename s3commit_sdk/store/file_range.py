"""A byte range of a local file as an upload's request body, read in small pieces.

A staged file's part used to be read whole into memory before its upload: on 2 cores that
fresh 64 MiB buffer per part cost more in page faults and copying than the part's hashing
(``bench/peers.py`` on RGW, profiled with py-spy). botocore takes a seekable file as a body, as
s3transfer's own uploads give it: it reads the range once to sign it and once to send it,
1 MiB and 128 KiB at a time, from the page cache.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

#: what one read of :meth:`FileRange.chunks` returns at most
CHUNK = 1024 * 1024


class FileRange:
    """``length`` bytes of ``path`` from ``offset``, seen as a stream of its own: position 0 is
    ``offset``, so a retry's rewind (``seek(0)``) starts the part again."""

    def __init__(self, path: str, offset: int, length: int) -> None:
        self._fd = os.open(path, os.O_RDONLY)
        self._offset, self._length, self._position = offset, length, 0

    def __enter__(self) -> FileRange:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def __len__(self) -> int:
        return self._length

    def tell(self) -> int:
        return self._position

    def seek(self, position: int, whence: int = os.SEEK_SET) -> int:
        base = {os.SEEK_SET: 0, os.SEEK_CUR: self._position, os.SEEK_END: self._length}[whence]
        self._position = min(max(0, base + position), self._length)
        return self._position

    def read(self, size: int | None = -1) -> bytes:
        left = self._length - self._position
        size = left if size is None or size < 0 else min(size, left)
        if size <= 0:
            return b""
        data = self._pread(self._position, size)
        self._position += len(data)
        return data

    def chunks(self) -> Iterator[bytes]:
        """The whole range, from its start, :data:`CHUNK` bytes at a time; the position is
        left where it was."""
        for start in range(0, self._length, CHUNK):
            yield self._pread(start, min(CHUNK, self._length - start))

    def _pread(self, start: int, size: int) -> bytes:
        """``size`` bytes from ``start`` in the range, leaving the position alone."""
        return os.pread(self._fd, size, self._offset + start)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
