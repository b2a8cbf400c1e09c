"""The checksums of ``checksum.algorithm``, computed by the SDK from the bytes it sends.

S3's additional checksums ("Checking object integrity in Amazon S3"): each part of an upload
carries the checksum of its bytes (``x-amz-checksum-crc32``, ...), which the server checks
against what arrived, and the completed object's checksum is *composite*: the checksum of the
concatenated binary part checksums, written ``<base64>-<parts>``. Computing them here, not in
botocore, keeps the value the task records the one of the bytes it had, and makes CRC32C work
without the AWS CRT (botocore computes CRC32C and CRC64NVME only with ``botocore[crt]``; the
``crc32c`` package does CRC32C in hardware). CRC64NVME objects are full-object checksums that
S3 combines itself: their expected value is not computed here.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import zlib
from collections.abc import Callable, Iterable

from .errors import InvalidOptionError

#: bytes a checksum is taken of, whole or one piece of several
Chunk = bytes | bytearray | memoryview

#: bytes of each algorithm's digest
DIGEST_SIZES = {"CRC32": 4, "CRC32C": 4, "SHA256": 32, "CRC64NVME": 8}
#: algorithms whose multipart objects carry a composite checksum the SDK can compute
COMPOSITE = ("CRC32", "CRC32C", "SHA256")


def field_name(algorithm: str) -> str:
    """The request, answer and ``Parts`` field of ``algorithm``: ``ChecksumCRC32``, ..."""
    return f"Checksum{algorithm}"


def checksum(algorithm: str, data: Chunk) -> str:
    """The base64 checksum of ``data``, as S3 writes it."""
    return checksum_of(algorithm, [data])


def checksum_of(algorithm: str, chunks: Iterable[Chunk]) -> str:
    """The base64 checksum of the concatenated ``chunks``: a part read from a file piece by
    piece is never held whole to be checksummed."""
    running = _running(algorithm)
    for chunk in chunks:
        running.update(chunk)
    return base64.b64encode(running.digest()).decode()


def composite(algorithm: str, part_checksums: list[str]) -> str | None:
    """The checksum S3 gives the object completed from parts of these checksums, ``<base64>-N``;
    None where S3 combines the parts itself (CRC64NVME, full-object)."""
    if algorithm not in COMPOSITE or not part_checksums:
        return None
    joined = b"".join(base64.b64decode(c) for c in part_checksums)
    return f"{checksum(algorithm, joined)}-{len(part_checksums)}"


def matches(expected: str | None, found: str | None) -> bool:
    """A stored checksum is the expected composite one. Servers differ in the ``-N`` suffix
    (S3 writes it, moto leaves it off): the base64 value must match, and the part count where
    both give one. Nothing expected, or nothing found, proves nothing and fails nothing."""
    if not expected or not found:
        return True
    value, _, parts = expected.partition("-")
    found_value, _, found_parts = found.partition("-")
    return value == found_value and (not found_parts or found_parts == parts)


def well_formed(algorithm: str, value: object) -> bool:
    """``value`` is the base64 text of one ``algorithm`` digest."""
    if not isinstance(value, str):
        return False
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return False
    return len(raw) == DIGEST_SIZES[algorithm]


class _Crc:
    """A CRC computed piece by piece: ``step(data, previous)`` is its library's incremental
    form, and the digest is the value's big-endian bytes, as S3 encodes it."""

    def __init__(self, step: Callable[[Chunk, int], int], size: int) -> None:
        self._step, self._size, self._value = step, size, 0

    def update(self, data: Chunk) -> None:
        self._value = self._step(data, self._value)

    def digest(self) -> bytes:
        return self._value.to_bytes(self._size, "big")


def _running(algorithm: str) -> _Crc | hashlib._Hash:
    if algorithm == "CRC32":
        return _Crc(zlib.crc32, 4)
    if algorithm == "SHA256":
        return hashlib.sha256()
    if algorithm == "CRC32C":
        return _Crc(_crc32c(), 4)
    if algorithm == "CRC64NVME":
        from awscrt import checksums  # the option refuses CRC64NVME without it

        return _Crc(lambda data, previous: checksums.crc64nvme(bytes(data), previous), 8)
    raise InvalidOptionError(
        f"option 'checksum.algorithm' is {algorithm!r}, none of {', '.join(DIGEST_SIZES)}",
        option="checksum.algorithm",
    )


def _crc32c() -> Callable[[Chunk, int], int]:
    try:
        from crc32c import crc32c
    except ImportError:
        pass
    else:
        return crc32c
    try:
        from awscrt import checksums
    except ImportError:
        raise InvalidOptionError(
            "checksum.algorithm=CRC32C needs the crc32c package (pip install crc32c) or the "
            "AWS CRT (pip install 'botocore[crt]'); or choose CRC32 or SHA256",
            option="checksum.algorithm",
        ) from None
    return lambda data, previous: checksums.crc32c(bytes(data), previous)
