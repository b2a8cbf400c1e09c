"""What every request of a job carries besides its own arguments: server-side encryption, the
storage class, a canned ACL, requester pays and integrity checksums.

They are the job's, not one call's: :class:`RequestOptions` travels inside the store's settings
to every executor and :meth:`S3Store._call <s3commit_sdk.store.s3.S3Store._call>` adds them to
each request by its operation, so no object the SDK creates (data, pendingsets, journal, markers,
``_SUCCESS``) and no request that must repeat an SSE-C key can be left without them. Option
names and values follow Hadoop S3A's (``fs.s3a.encryption.algorithm``, ``fs.s3a.encryption.key``,
``fs.s3a.create.storage.class``, ``fs.s3a.acl.default``, ``fs.s3a.requester.pays.enabled``,
``fs.s3a.create.checksum.algorithm``), in S3's spelling or in S3A's.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import importlib.util
import re
from dataclasses import dataclass, field
from typing import Any

from .errors import InvalidOptionError

#: S3A's names of the algorithms (``fs.s3a.encryption.algorithm``), as S3 spells them
ENCRYPTION_ALGORITHMS = {
    "AES256": "AES256",
    "SSE-S3": "AES256",
    "aws:kms": "aws:kms",
    "SSE-KMS": "aws:kms",
    "aws:kms:dsse": "aws:kms:dsse",
    "DSSE-KMS": "aws:kms:dsse",
    "SSE-C": "SSE-C",
}
SSE_C = "SSE-C"
KMS_ALGORITHMS = ("aws:kms", "aws:kms:dsse")
#: storage classes whose objects cannot be read back at once: the SDK reads its own pendingsets,
#: journal and ``_SUCCESS``, and readers read the data
ARCHIVE_CLASSES = ("GLACIER", "DEEP_ARCHIVE")
STORAGE_CLASSES = (
    "STANDARD",
    "REDUCED_REDUNDANCY",
    "STANDARD_IA",
    "ONEZONE_IA",
    "INTELLIGENT_TIERING",
    "GLACIER_IR",
    "OUTPOSTS",
    "SNOW",
    "EXPRESS_ONEZONE",
)
CANNED_ACLS = (
    "private",
    "public-read",
    "public-read-write",
    "authenticated-read",
    "aws-exec-read",
    "bucket-owner-read",
    "bucket-owner-full-control",
)
CHECKSUM_ALGORITHMS = ("CRC32", "CRC32C", "SHA256", "CRC64NVME")

#: requests that create an object: they carry its encryption, class, ACL and checksum algorithm
_CREATING = frozenset({"put_object", "create_multipart_upload", "copy_object"})
#: requests on an existing SSE-C object or upload: S3 needs the customer key again on each
_SSE_C_AGAIN = frozenset(
    {"upload_part", "complete_multipart_upload", "list_parts", "head_object", "get_object"}
)
#: reads that return an object's stored checksum when asked
_CHECKSUM_READS = frozenset({"head_object", "get_object"})

#: the Content-Type of a data file, by output format (Delta writes Parquet files)
CONTENT_TYPES = {
    "parquet": "application/vnd.apache.parquet",
    "delta": "application/vnd.apache.parquet",
    "iceberg": "application/vnd.apache.parquet",
    "orc": "application/octet-stream",
    "csv": "text/csv",
    "json": "application/x-ndjson",
}
JSON_CONTENT_TYPE = "application/json"


@dataclass(frozen=True)
class RequestOptions:
    """The job's request options, as S3 spells them; the SSE-C key as its 32 bytes."""

    encryption_algorithm: str | None = None
    #: the KMS key id or ARN (SSE-KMS, DSSE-KMS); for SSE-C see ``customer_key``
    kms_key_id: str | None = None
    customer_key: bytes | None = field(default=None, repr=False)
    storage_class: str | None = None
    acl: str | None = None
    requester_pays: bool = False
    checksum_algorithm: str | None = None

    @classmethod
    def of(cls, options: Any) -> RequestOptions:
        """From resolved options (their ``encryption_*``, ``storage_class``, ... fields)."""
        algorithm = options.encryption_algorithm
        key = options.encryption_key
        if key and algorithm is None:
            raise InvalidOptionError(
                "option 'encryption.key' is given without 'encryption.algorithm': say which "
                "encryption it is for (aws:kms, aws:kms:dsse or SSE-C)",
                option="encryption.key",
            )
        if algorithm == SSE_C and not key:
            raise InvalidOptionError(
                "encryption.algorithm=SSE-C needs 'encryption.key': the base64 text of a "
                "256-bit key",
                option="encryption.key",
            )
        if algorithm == "AES256" and key:
            raise InvalidOptionError(
                "encryption.algorithm=AES256 (SSE-S3) takes no key: S3 manages it; leave out "
                "'encryption.key', or use aws:kms with a KMS key",
                option="encryption.key",
            )
        return cls(
            encryption_algorithm=algorithm,
            kms_key_id=key if algorithm in KMS_ALGORITHMS else None,
            customer_key=customer_key(key) if algorithm == SSE_C else None,
            storage_class=options.storage_class,
            acl=options.acl,
            requester_pays=options.requester_pays,
            checksum_algorithm=options.checksum_algorithm,
        )

    def secrets(self) -> tuple[str, ...]:
        """What must never be logged: the SSE-C key as given and as botocore sends it (its
        base64 text)."""
        if self.customer_key is None:
            return ()
        return (base64.b64encode(self.customer_key).decode(),)

    def arguments(self, operation: str) -> dict[str, Any]:
        """The request arguments these options add to ``operation`` (boto3's method name),
        before the caller's own (which win) and before what the operation does not take."""
        added: dict[str, Any] = {}
        if operation in _CREATING:
            added.update(self._encryption())
            if self.storage_class:
                added["StorageClass"] = self.storage_class
            if self.acl:
                added["ACL"] = self.acl
            if self.checksum_algorithm:
                added["ChecksumAlgorithm"] = self.checksum_algorithm
            if operation == "copy_object" and self.customer_key is not None:
                added.update(self._customer_key("CopySource"))
        elif operation in _SSE_C_AGAIN and self.customer_key is not None:
            added.update(self._customer_key())
        if operation == "upload_part" and self.checksum_algorithm:
            added["ChecksumAlgorithm"] = self.checksum_algorithm
        if operation in _CHECKSUM_READS and self.checksum_algorithm:
            added["ChecksumMode"] = "ENABLED"
        if self.requester_pays:
            added["RequestPayer"] = "requester"
        return added

    def _encryption(self) -> dict[str, Any]:
        if self.encryption_algorithm is None:
            return {}
        if self.customer_key is not None:
            return self._customer_key()
        added: dict[str, Any] = {"ServerSideEncryption": self.encryption_algorithm}
        if self.kms_key_id:
            added["SSEKMSKeyId"] = self.kms_key_id
        return added

    def _customer_key(self, prefix: str = "") -> dict[str, Any]:
        """SSE-C's three headers; botocore base64-encodes the key and adds its MD5 itself."""
        return {
            f"{prefix}SSECustomerAlgorithm": "AES256",
            f"{prefix}SSECustomerKey": self.customer_key,
        }

    def recorded(self) -> dict[str, str]:
        """What ``_SUCCESS`` says of them: the algorithm and the KMS key id, never an SSE-C key
        (its MD5 only, which names the key without revealing it)."""
        shown: dict[str, str] = {}
        if self.encryption_algorithm:
            shown["encryption.algorithm"] = self.encryption_algorithm
        if self.kms_key_id:
            shown["encryption.key"] = self.kms_key_id
        if self.customer_key is not None:
            digest = hashlib.md5(self.customer_key).digest()
            shown["encryption.key.md5"] = base64.b64encode(digest).decode()
        if self.storage_class:
            shown["create.storage.class"] = self.storage_class
        if self.acl:
            shown["acl.default"] = self.acl
        if self.requester_pays:
            shown["requester.pays.enabled"] = "true"
        if self.checksum_algorithm:
            shown["checksum.algorithm"] = self.checksum_algorithm
        return shown


def customer_key(text: str) -> bytes:
    """The 32 bytes of an SSE-C key given as base64 (S3A's ``fs.s3a.encryption.key``); the
    error never repeats the key."""
    try:
        key = base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        key = b""
    if len(key) != 32:
        raise InvalidOptionError(
            "option 'encryption.key' for SSE-C must be the base64 text of a 256-bit (32-byte) "
            "key, such as the output of `openssl rand -base64 32`; the value given is not",
            option="encryption.key",
        )
    return key


def _spelled(name: str, value: Any, choices: tuple[str, ...] | dict[str, str]) -> str:
    """``value`` matched to ``choices`` ignoring case, ``-`` / ``_`` and S3A's CamelCase
    (``BucketOwnerFullControl``)."""
    text = str(value).strip()
    loose = re.sub(r"(?<=[a-z])(?=[A-Z])", "-", text).lower().replace("_", "-")
    for choice in choices:
        if loose == choice.lower().replace("_", "-"):
            return choices[choice] if isinstance(choices, dict) else choice
    raise InvalidOptionError(
        f"option {name!r} must be one of {', '.join(choices)}, got {value!r}", option=name
    )


def parse_encryption_algorithm(name: str, value: Any) -> str:
    return _spelled(name, value, ENCRYPTION_ALGORITHMS)


def parse_storage_class(name: str, value: Any) -> str:
    if str(value).strip().upper().replace("-", "_") in ARCHIVE_CLASSES:
        raise InvalidOptionError(
            f"option {name!r} is {value!r}: objects of an archive class cannot be read until "
            "restored, and the commit reads back what it writes (pendingsets, journal, "
            "_SUCCESS), as readers read the data; write in a readable class and move the "
            "data with a lifecycle rule",
            option=name,
        )
    return _spelled(name, value, STORAGE_CLASSES)


def parse_acl(name: str, value: Any) -> str:
    return _spelled(name, value, CANNED_ACLS)


def parse_checksum_algorithm(name: str, value: Any) -> str:
    algorithm = _spelled(name, value, CHECKSUM_ALGORITHMS)
    if algorithm == "CRC64NVME" and not _importable("awscrt"):
        raise InvalidOptionError(
            f"option {name!r} is CRC64NVME, which botocore computes only with the AWS CRT "
            "installed: pip install 'botocore[crt]', or choose CRC32, CRC32C or SHA256",
            option=name,
        )
    if algorithm == "CRC32C" and not (_importable("crc32c") or _importable("awscrt")):
        raise InvalidOptionError(
            f"option {name!r} is CRC32C, which needs the crc32c package (pip install "
            "'s3commit-sdk[checksums]') or the AWS CRT (pip install 'botocore[crt]'); or "
            "choose CRC32 or SHA256",
            option=name,
        )
    return algorithm


def _importable(module: str) -> bool:
    return importlib.util.find_spec(module) is not None
