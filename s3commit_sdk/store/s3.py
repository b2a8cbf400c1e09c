"""The S3 store: multipart uploads, listings, batch deletes and conditional puts over boto3.

Retries and the connection pool come from botocore's own configuration. Every HTTP request
(retries included) is counted by operation; the counts go into ``_SUCCESS``.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime

import boto3
import botocore.config
import botocore.exceptions

from ..errors import StoreError

BATCH_DELETE_LIMIT = 1000
_CREDENTIAL_CODES = {
    "InvalidAccessKeyId",
    "SignatureDoesNotMatch",
    "AccessDenied",
    "ExpiredToken",
    "InvalidToken",
    "UnrecognizedClientException",
}


@dataclass(frozen=True)
class S3Settings:
    """How to reach S3, captured on the driver so the executors use the same endpoint.

    Fields left ``None`` fall back to boto3's own chain (env vars, profiles, instance roles)
    wherever the store is built.
    """

    endpoint_url: str | None = None
    region: str | None = None
    access_key: str | None = field(default=None, repr=False)
    secret_key: str | None = field(default=None, repr=False)
    session_token: str | None = field(default=None, repr=False)
    profile: str | None = None
    retry_mode: str = "standard"
    max_attempts: int = 5

    @classmethod
    def resolve(cls, options, environ=None) -> S3Settings:
        """Explicit options first, then boto3's environment variables of this process."""
        env = os.environ if environ is None else environ
        return cls(
            endpoint_url=options.endpoint
            or env.get("AWS_ENDPOINT_URL_S3")
            or env.get("AWS_ENDPOINT_URL"),
            region=options.region or env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION"),
            access_key=options.access_key or env.get("AWS_ACCESS_KEY_ID"),
            secret_key=options.secret_key or env.get("AWS_SECRET_ACCESS_KEY"),
            session_token=options.session_token or env.get("AWS_SESSION_TOKEN"),
            profile=options.profile or env.get("AWS_PROFILE"),
            retry_mode=options.retry_mode,
            max_attempts=options.retry_max_attempts,
        )


@dataclass(frozen=True)
class ObjectInfo:
    key: str
    size: int
    etag: str


@dataclass(frozen=True)
class PendingUploadInfo:
    key: str
    upload_id: str
    initiated: datetime | None


class RequestCounters:
    """Thread-safe counts of HTTP requests by S3 operation name."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()

    def add(self, operation: str, count: int = 1) -> None:
        with self._lock:
            self._counts[operation] += count

    def merge(self, counts: dict[str, int]) -> None:
        with self._lock:
            self._counts.update(counts)

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(sorted(self._counts.items()))


def multipart_etag(part_etags: list[str]) -> str | None:
    """The ETag S3 gives a completed multipart upload, when part ETags are plain MD5s."""
    digests = []
    for etag in part_etags:
        text = etag.strip('"')
        if len(text) != 32:
            return None
        try:
            digests.append(bytes.fromhex(text))
        except ValueError:
            return None
    return f'"{hashlib.md5(b"".join(digests)).hexdigest()}-{len(part_etags)}"'


class S3Store:
    """One boto3 client with a pool sized to the caller's thread count, and its counters."""

    def __init__(self, settings: S3Settings, pool_size: int = 10) -> None:
        self.settings = settings
        self.counters = RequestCounters()
        session = boto3.session.Session(
            profile_name=settings.profile if not settings.access_key else None
        )
        config = botocore.config.Config(
            retries={"mode": settings.retry_mode, "total_max_attempts": settings.max_attempts},
            max_pool_connections=max(pool_size, 10),
            region_name=settings.region or "us-east-1",
        )
        self.client = session.client(
            "s3",
            endpoint_url=settings.endpoint_url,
            aws_access_key_id=settings.access_key,
            aws_secret_access_key=settings.secret_key,
            aws_session_token=settings.session_token,
            config=config,
        )
        self.client.meta.events.register("before-send.s3.*", self._count)

    def _count(self, event_name: str, **_: object) -> None:
        self.counters.add(event_name.rsplit(".", 1)[-1])

    # -- errors -------------------------------------------------------------------------------
    def _call(self, what: str, bucket: str, fn, tolerate: tuple[str, ...] = (), **kwargs):
        """One request; error codes in ``tolerate`` answer None, others raise StoreError."""
        try:
            return fn(Bucket=bucket, **kwargs)
        except botocore.exceptions.ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in tolerate:
                return None
            raise _store_error(what, bucket, exc) from exc
        except botocore.exceptions.BotoCoreError as exc:
            raise StoreError(
                f"{what} in bucket {bucket!r} failed: {exc} "
                f"(endpoint {self.settings.endpoint_url or 'AWS default'})"
            ) from exc

    # -- buckets and objects ------------------------------------------------------------------
    def check_bucket(self, bucket: str) -> None:
        """Fail early, naming the bucket and the cause, before any upload starts."""
        self._call("checking the bucket", bucket, self.client.head_bucket)

    def head(self, bucket: str, key: str) -> ObjectInfo | None:
        reply = self._call(
            f"HEAD {key!r}",
            bucket,
            self.client.head_object,
            tolerate=("404", "NoSuchKey", "NotFound"),
            Key=key,
        )
        return None if reply is None else ObjectInfo(key, reply["ContentLength"], reply["ETag"])

    def list_objects(self, bucket: str, prefix: str) -> Iterator[ObjectInfo]:
        """Every object under ``prefix``, one page (1000 keys) per request."""
        token = None
        while True:
            kwargs = {"Prefix": prefix, **({"ContinuationToken": token} if token else {})}
            page = self._call(f"listing {prefix!r}", bucket, self.client.list_objects_v2, **kwargs)
            for item in page.get("Contents", []):
                yield ObjectInfo(item["Key"], item["Size"], item["ETag"])
            token = page.get("NextContinuationToken")
            if not page.get("IsTruncated") or not token:
                return

    def get(self, bucket: str, key: str) -> bytes:
        reply = self._call(f"GET {key!r}", bucket, self.client.get_object, Key=key)
        return reply["Body"].read()

    def put(self, bucket: str, key: str, body: bytes, content_type: str | None = None) -> str:
        extra = {"ContentType": content_type} if content_type else {}
        reply = self._call(
            f"PUT {key!r}", bucket, self.client.put_object, Key=key, Body=body, **extra
        )
        return reply["ETag"]

    def copy(self, bucket: str, source: str, target: str) -> str:
        """Server-side copy: what a "rename" costs on S3 (seed 003, "Results")."""
        reply = self._call(
            f"copying {source!r} to {target!r}",
            bucket,
            self.client.copy_object,
            Key=target,
            CopySource={"Bucket": bucket, "Key": source},
        )
        return reply["CopyObjectResult"]["ETag"]

    def put_if_absent(self, bucket: str, key: str, body: bytes) -> bool:
        """Create ``key`` only if it does not exist (``If-None-Match: *``); False if it did."""
        reply = self._call(
            f"conditional PUT {key!r}",
            bucket,
            self.client.put_object,
            tolerate=("PreconditionFailed", "412", "ConditionalRequestConflict"),
            Key=key,
            Body=body,
            IfNoneMatch="*",
        )
        return reply is not None

    def delete_keys(self, bucket: str, keys: list[str]) -> int:
        """Batch delete, ``BATCH_DELETE_LIMIT`` keys per request; raises if any key failed."""
        deleted = 0
        for start in range(0, len(keys), BATCH_DELETE_LIMIT):
            chunk = keys[start : start + BATCH_DELETE_LIMIT]
            reply = self._call(
                "batch delete",
                bucket,
                self.client.delete_objects,
                Delete={"Objects": [{"Key": k} for k in chunk], "Quiet": True},
            )
            if reply.get("Errors"):
                first = reply["Errors"][0]
                raise StoreError(
                    f"batch delete in bucket {bucket!r} failed for {len(reply['Errors'])} keys, "
                    f"first {first.get('Key')!r}: {first.get('Code')} {first.get('Message')}"
                )
            deleted += len(chunk)
        return deleted

    # -- multipart uploads --------------------------------------------------------------------
    def initiate(self, bucket: str, key: str) -> str:
        reply = self._call(
            f"initiating the upload of {key!r}",
            bucket,
            self.client.create_multipart_upload,
            Key=key,
        )
        return reply["UploadId"]

    def upload_part(self, bucket: str, key: str, upload_id: str, number: int, body) -> str:
        reply = self._call(
            f"uploading part {number} of {key!r}",
            bucket,
            self.client.upload_part,
            Key=key,
            UploadId=upload_id,
            PartNumber=number,
            Body=body,
        )
        return reply["ETag"]

    def complete(self, bucket: str, key: str, upload_id: str, etags: list[str]) -> str:
        parts = [{"PartNumber": i + 1, "ETag": etag} for i, etag in enumerate(etags)]
        reply = self._call(
            f"completing the upload of {key!r}",
            bucket,
            self.client.complete_multipart_upload,
            Key=key,
            UploadId=upload_id,
            MultipartUpload={"Parts": parts},
        )
        return reply["ETag"]

    def abort(self, bucket: str, key: str, upload_id: str) -> bool:
        """Abort one upload; False if it no longer exists (already completed or aborted)."""
        reply = self._call(
            f"aborting the upload of {key!r}",
            bucket,
            self.client.abort_multipart_upload,
            tolerate=("NoSuchUpload", "404"),
            Key=key,
            UploadId=upload_id,
        )
        return reply is not None

    def list_pending(self, bucket: str, prefix: str) -> list[PendingUploadInfo]:
        """Pending multipart uploads under a directory prefix, following every page.

        A non-empty prefix must end in ``/`` so a sibling like ``ds10`` never matches ``ds1``.
        """
        if prefix and not prefix.endswith("/"):
            raise ValueError(f"pending uploads are listed by directory; {prefix!r} needs a '/'")
        found: list[PendingUploadInfo] = []
        markers: dict[str, str] = {}
        while True:
            page = self._call(
                f"listing pending uploads under {prefix!r}",
                bucket,
                self.client.list_multipart_uploads,
                Prefix=prefix,
                **markers,
            )
            for item in page.get("Uploads", []):
                found.append(
                    PendingUploadInfo(item["Key"], item["UploadId"], item.get("Initiated"))
                )
            if not page.get("IsTruncated"):
                return found
            markers = {
                "KeyMarker": page.get("NextKeyMarker", ""),
                "UploadIdMarker": page.get("NextUploadIdMarker", ""),
            }

    # -- bucket lifecycle ---------------------------------------------------------------------
    def get_lifecycle_rules(self, bucket: str) -> list[dict]:
        """The bucket's lifecycle rules as S3 returns them; [] when it has none."""
        try:
            reply = self.client.get_bucket_lifecycle_configuration(Bucket=bucket)
        except botocore.exceptions.ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "NoSuchLifecycleConfiguration":
                return []
            raise _store_error("reading the lifecycle rules", bucket, exc) from exc
        except botocore.exceptions.BotoCoreError as exc:
            raise StoreError(
                f"reading the lifecycle rules of bucket {bucket!r} failed: {exc}"
            ) from exc
        return list(reply.get("Rules", []))

    def put_lifecycle_rules(self, bucket: str, rules: list[dict]) -> None:
        """Replace the bucket's whole lifecycle configuration (S3 has no per-rule update)."""
        self._call(
            "writing the lifecycle rules",
            bucket,
            self.client.put_bucket_lifecycle_configuration,
            LifecycleConfiguration={"Rules": rules},
        )


def _store_error(what: str, bucket: str, exc: botocore.exceptions.ClientError) -> StoreError:
    error = exc.response.get("Error", {})
    code = error.get("Code", "?")
    message = error.get("Message", "")
    if code in ("NoSuchBucket", "404") and "bucket" in what:
        cause = f"bucket {bucket!r} does not exist (or is not visible to these credentials)"
    elif code == "NoSuchBucket":
        cause = f"bucket {bucket!r} does not exist"
    elif code in _CREDENTIAL_CODES or code == "403":
        cause = (
            f"access to bucket {bucket!r} was refused ({code}): check AWS_ACCESS_KEY_ID / "
            "AWS_SECRET_ACCESS_KEY, the profile, and the bucket policy"
        )
    else:
        cause = f"{code}: {message}".strip()
    return StoreError(f"{what} in bucket {bucket!r} failed: {cause}")
