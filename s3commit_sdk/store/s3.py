"""The S3 store: multipart uploads, listings, batch deletes and conditional puts over boto3.

Retries are ours, not botocore's (see :class:`RetryPolicy`): throttling and connection errors
have a budget of their own, apart from other transient errors, as Hadoop's S3A retries them.
Every HTTP request (retries included) is counted by operation, and every retry by its reason;
both go into ``_SUCCESS``.
"""

from __future__ import annotations

import contextvars
import hashlib
import os
import random
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import boto3
import botocore.config
import botocore.exceptions
import botocore.loaders
import botocore.session

from ..checksums import checksum, checksum_of, field_name
from ..credentials import AccessKeys, CredentialsProvider, provider_session, with_provider
from ..errors import AccessDeniedError, StoreError
from ..iam import permission_of
from ..redaction import hold_secrets
from ..request_options import RequestOptions
from .file_range import FileRange

BATCH_DELETE_LIMIT = 1000
#: up to this many keys a delete is confirmed by one HEAD per key, beyond by listing their range
CONFIRM_BY_HEAD_LIMIT = 16
_THROTTLE_CODES = {
    "SlowDown",
    "Throttling",
    "ThrottlingException",
    "ThrottledException",
    "RequestThrottled",
    "RequestLimitExceeded",
    "TooManyRequestsException",
    "ProvisionedThroughputExceededException",
    "503",
}
_TRANSIENT_CODES = {"InternalError", "RequestTimeout", "ServiceUnavailable", "500", "502", "504"}
_BACKOFF_CAP_S = 20.0
#: the retry kinds with the throttling budget (``retry.throttle.limit``)
THROTTLING = ("throttled", "connection")
_CREDENTIAL_CODES = {
    "InvalidAccessKeyId",
    "SignatureDoesNotMatch",
    "AccessDenied",
    "ExpiredToken",
    "InvalidToken",
    "UnrecognizedClientException",
}

#: answers of a GET for a key that does not exist
_MISSING_KEY = {"NoSuchKey", "404", "NotFound"}


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long one request is retried, by the kind of failure.

    After S3A (``fs.s3a.retry.throttle.*``): a store under load answers 503 SlowDown to many
    requests at once, and five attempts in all are not enough to ride that out, so throttling
    and connection errors get their own, larger budget with exponential backoff and full
    jitter; other transient errors (500, 502, 504, RequestTimeout) keep ``max_attempts``.
    ``max_duration_s`` bounds the time one request may spend retrying, whatever the counts.
    """

    max_attempts: int = 5
    throttle_limit: int = 20
    throttle_interval_s: float = 0.1
    max_duration_s: float = 300.0

    def backoff(self, retry: int, base_s: float) -> float:
        """Full jitter: uniform in [0, min(cap, base * 2**retry)]."""
        return random.uniform(0.0, min(_BACKOFF_CAP_S, base_s * 2**retry))


@dataclass(frozen=True)
class S3Settings(AccessKeys):
    """How to reach S3, captured on the driver so the executors use the same endpoint.

    Fields left ``None`` fall back to boto3's own chain (env vars, profiles, instance roles)
    wherever the store is built.
    """

    endpoint_url: str | None = None
    region: str | None = None
    profile: str | None = None
    retry_mode: str = "standard"
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    path_style: bool = False
    #: boto3 >= 1.36 sends and checks CRC checksums by default, which several S3-compatible
    #: stores refuse; "when_required" restores the older behaviour. None: boto3's default.
    checksums: str | None = None
    #: what every request of the job carries (encryption, storage class, ACL, ...)
    requests: RequestOptions = field(default_factory=RequestOptions)
    #: called where the store is built, driver and executors alike (see credentials.py)
    credentials_provider: Any = field(default=None, repr=False, compare=False)

    @classmethod
    def resolve(
        cls, options, environ=None, provider: CredentialsProvider | None = None
    ) -> S3Settings:
        """Explicit options first, then boto3's environment variables of this process.

        Credentials resolve as a set: explicit ``access.key``/``secret.key`` never take a
        session token from the environment, which belongs to other keys (S3 rejects the mix).
        A credentials ``provider`` (see credentials.py) replaces them and the profile.

        What travels to the executors follows where the credentials come from. Keys (the
        options, or ``AWS_ACCESS_KEY_ID`` of the driver, which executors often lack) are
        captured here as they are: temporary ones cannot be refreshed. A profile travels by
        name. Anything else is not resolved here: every store, driver and executors alike,
        takes botocore's chain where it runs (a profile's ``credential_process``, web
        identity, container role, instance profile), which refreshes what it finds.
        """
        env = os.environ if environ is None else environ
        if options.access_key or options.secret_key:
            access, secret, token = options.access_key, options.secret_key, options.session_token
        else:
            access = env.get("AWS_ACCESS_KEY_ID")
            secret = env.get("AWS_SECRET_ACCESS_KEY")
            token = options.session_token or env.get("AWS_SESSION_TOKEN")
        settings = cls(
            endpoint_url=options.endpoint
            or env.get("AWS_ENDPOINT_URL_S3")
            or env.get("AWS_ENDPOINT_URL"),
            region=options.region or env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION"),
            access_key=access,
            secret_key=secret,
            session_token=token,
            profile=options.profile or env.get("AWS_PROFILE"),
            retry_mode=options.retry_mode,
            retry=RetryPolicy(
                max_attempts=options.retry_max_attempts,
                throttle_limit=options.retry_throttle_limit,
                throttle_interval_s=options.retry_throttle_interval,
                max_duration_s=options.retry_throttle_max_duration,
            ),
            path_style=options.path_style_access,
            checksums=options.checksums,
            requests=RequestOptions.of(options),
        )
        return with_provider(settings, options, provider)


@dataclass(frozen=True)
class ObjectInfo:
    key: str
    size: int
    etag: str
    #: the stored checksum of the job's ``checksum.algorithm`` (HEAD only; ``<base64>-N`` for a
    #: multipart object), None without one
    checksum: str | None = None


@dataclass(frozen=True)
class PartInfo:
    """One uploaded part of a pending multipart upload."""

    number: int
    size: int
    etag: str
    #: the base64 checksum of the part's bytes by the job's ``checksum.algorithm``, which the
    #: completion must repeat; None without one
    checksum: str | None = None


@dataclass(frozen=True)
class PendingUploadInfo:
    key: str
    upload_id: str
    initiated: datetime | None


class RequestCounters:
    """Thread-safe counts of HTTP requests by S3 operation name, and of retries by reason."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()
        self._retries: Counter[str] = Counter()

    def add(self, operation: str, count: int = 1) -> None:
        with self._lock:
            self._counts[operation] += count

    def add_retry(self, reason: str) -> None:
        with self._lock:
            self._retries[reason] += 1

    def retries(self) -> dict[str, int]:
        """Retries by reason: ``throttled``, ``connection`` or ``transient``."""
        with self._lock:
            return dict(sorted(self._retries.items()))

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


#: botocore's model loader, shared by every store of the process: a new session's own loader
#: parses the S3 service model and endpoint rules again, ~0.2 s of CPU, and every task attempt
#: and every job makes a store
_LOADER = botocore.loaders.create_loader()
_LOADER_LOCK = threading.Lock()


def _session(profile: str | None) -> boto3.session.Session:
    """A new session (its own credential resolution) on the shared model loader."""
    core = botocore.session.get_session()
    core.register_component("data_loader", _LOADER)
    with _LOADER_LOCK:
        session = boto3.session.Session(botocore_session=core, profile_name=profile)
        # boto3 adds its data directory to the loader's search path once per session
        _LOADER.search_paths[:] = dict.fromkeys(_LOADER.search_paths)
    return session


def _secrets_of(settings: S3Settings, session: boto3.session.Session) -> tuple[str | None, ...]:
    """The secret key and session token a client of ``session`` signs with: the explicit keys,
    else what the session found (a provider's, the environment's, a profile's, a role's)."""
    if settings.access_key:
        return settings.secret_key, settings.session_token
    found = session.get_credentials()
    if found is None:
        return ()
    frozen = found.get_frozen_credentials()
    return frozen.secret_key, frozen.token


#: the counters of the store whose request this thread is sending (:meth:`S3Store._call`): a
#: client is shared by the stores built alike, and each counts only its own requests
_SENDING_FOR: contextvars.ContextVar[RequestCounters | None] = contextvars.ContextVar(
    "s3commit_sending_for", default=None
)
#: clients kept per process, the least recently used dropped first
_CLIENTS_KEPT = 16
_CLIENTS: OrderedDict[tuple, Any] = OrderedDict()
_CLIENTS_LOCK = threading.Lock()
#: what boto3 reads from the environment when it builds a client, beside the settings
_CLIENT_ENVIRONMENT = ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy")


def _client_key(settings: S3Settings, pool_size: int) -> tuple | None:
    """What a client is built from: the settings and their credentials provider, the pool, the
    process (a forked child builds its own), the environment's ``AWS_*`` variables and proxies,
    and when the shared config and credentials files last changed. None if unhashable."""
    environ = tuple(
        sorted(
            (k, v)
            for k, v in os.environ.items()
            if k.startswith("AWS_") or k in _CLIENT_ENVIRONMENT
        )
    )
    files = []
    for variable, default in (
        ("AWS_CONFIG_FILE", "config"),
        ("AWS_SHARED_CREDENTIALS_FILE", "credentials"),
    ):
        path = os.path.expanduser(os.environ.get(variable, f"~/.aws/{default}"))
        try:
            files.append(os.stat(path).st_mtime_ns)
        except OSError:
            files.append(None)
    key = (os.getpid(), settings, settings.credentials_provider, pool_size, environ, tuple(files))
    try:
        hash(key)
    except TypeError:
        return None
    return key


def _count_sent(event_name: str, **_: object) -> None:
    counters = _SENDING_FOR.get()
    if counters is not None:
        counters.add(event_name.rsplit(".", 1)[-1])


def _build_client(settings: S3Settings, pool_size: int) -> Any:
    """A new client for ``settings``; its secrets stay out of every log record while it lives
    (redaction.py), however long the stores using it live."""
    if settings.credentials_provider is not None:
        session = provider_session(settings.credentials_provider)
    else:
        session = _session(settings.profile if not settings.access_key else None)
    checksums = settings.checksums
    if checksums in (None, "auto"):
        # a custom endpoint is an S3-compatible store: send checksums only where required
        checksums = "when_required" if settings.endpoint_url else None
    config = botocore.config.Config(
        # one attempt per call: _call retries, by the budgets of settings.retry
        retries={"mode": settings.retry_mode, "total_max_attempts": 1},
        max_pool_connections=max(pool_size, 10),
        region_name=settings.region or "us-east-1",
        s3={"addressing_style": "path"} if settings.path_style else None,
        request_checksum_calculation=checksums,
        response_checksum_validation=checksums,
    )
    client = session.client(
        "s3",
        endpoint_url=settings.endpoint_url,
        aws_access_key_id=settings.access_key,
        aws_secret_access_key=settings.secret_key,
        aws_session_token=settings.session_token,
        config=config,
    )
    client.meta.events.register("before-send.s3.*", _count_sent)
    hold_secrets(client, *_secrets_of(settings, session), *settings.requests.secrets())
    return client


def _shared_client(settings: S3Settings, pool_size: int) -> Any:
    """The process's client for ``settings`` (boto3's clients are thread-safe), built on first
    use. Building one costs about 20 ms of CPU (botocore registers some 1,400 event handlers
    per session) and every write opened three or four stores: a third of the client's CPU in
    a small pandas write (``bench/peers.py``, profiled with py-spy). Kept clients also keep
    their connections open from one job to the next."""
    key = _client_key(settings, pool_size)
    if key is None:
        return _build_client(settings, pool_size)
    with _CLIENTS_LOCK:
        found = _CLIENTS.get(key)
        if found is not None:
            _CLIENTS.move_to_end(key)
            return found
    built = _build_client(settings, pool_size)
    with _CLIENTS_LOCK:
        found = _CLIENTS.setdefault(key, built)
        while len(_CLIENTS) > _CLIENTS_KEPT:
            _CLIENTS.popitem(last=False)
    return found


class S3Store:
    """A boto3 client with a pool sized to the caller's thread count, and this store's
    counters. Stores built alike share one client per process (:func:`_shared_client`)."""

    def __init__(self, settings: S3Settings, pool_size: int = 10) -> None:
        self.settings = settings
        self.counters = RequestCounters()
        self.client = _shared_client(settings, pool_size)
        self._added: dict[str, dict[str, Any]] = {}

    def _request_options(self, operation: str) -> dict[str, Any]:
        """What the job's :class:`RequestOptions` add to ``operation``, cut to the arguments
        the operation takes."""
        added = self._added.get(operation)
        if added is None:
            api_name = self.client.meta.method_to_api_mapping.get(operation)
            takes = (
                self.client.meta.service_model.operation_model(api_name).input_shape.members
                if api_name
                else {}
            )
            wanted = self.settings.requests.arguments(operation)
            added = self._added[operation] = {k: v for k, v in wanted.items() if k in takes}
        return added

    # -- errors, retries and pages -------------------------------------------------------------
    def _call(self, what: str, bucket: str, fn, tolerate: tuple[str, ...] = (), **kwargs):
        """One request, retried by the policy; codes in ``tolerate`` answer None.

        Anything else that fails for good raises StoreError. A stream body is rewound before
        each retry. The job's :class:`RequestOptions` are added here, the one place every
        request passes through.
        """
        policy = self.settings.retry
        kwargs = {**self._request_options(getattr(fn, "__name__", "")), **kwargs}
        kwargs.update(_body_checksum(kwargs))
        body = kwargs.get("Body")
        start = body.tell() if hasattr(body, "seek") else None
        started = time.monotonic()
        throttled = transient = 0
        while True:
            try:
                return self._send(fn, Bucket=bucket, **kwargs)
            except botocore.exceptions.ClientError as exc:
                code = _error_code(exc)
                if code in tolerate:
                    return None
                failure: Exception = exc
                kind = _retry_kind(exc)
            except botocore.exceptions.BotoCoreError as exc:
                failure, code = exc, None
                kind = _retry_kind(exc)
            if kind in THROTTLING:
                throttled += 1
                retry = throttled < policy.throttle_limit
                pause = policy.backoff(throttled - 1, policy.throttle_interval_s)
            elif kind == "transient":
                transient += 1
                retry = transient < policy.max_attempts
                pause = policy.backoff(transient - 1, 0.05)
            else:
                retry, pause = False, 0.0
            if retry and time.monotonic() - started + pause > policy.max_duration_s:
                retry = False
            if not retry:
                if isinstance(failure, botocore.exceptions.ClientError):
                    raise _store_error(what, bucket, failure, kwargs.get("Key")) from failure
                raise StoreError(
                    f"{what} in bucket {bucket!r} failed: {failure} "
                    f"(endpoint {self.settings.endpoint_url or 'AWS default'})",
                    code=code,
                ) from failure
            self.counters.add_retry(kind)
            time.sleep(pause)
            if start is not None:
                body.seek(start)

    def _send(self, fn, **kwargs):
        """One attempt of ``fn``, its requests counted by this store (the client is shared:
        :func:`_count_sent` adds to the counters named here)."""
        sending = _SENDING_FOR.set(self.counters)
        try:
            return fn(**kwargs)
        finally:
            _SENDING_FOR.reset(sending)

    def _pages(
        self,
        what: str,
        bucket: str,
        fn,
        markers: tuple[tuple[str, str], ...],
        tolerate: tuple[str, ...] = (),
        **kwargs,
    ) -> Iterator[dict | None]:
        """The pages of a paged listing. ``markers`` pairs each "next" field of an answer with
        the request parameter that continues from it, the first being the one that must move;
        a code in ``tolerate`` ends the pages with None.

        A truncated page whose markers are missing or repeat the ones just sent would make the
        loop ask for the same page forever: that raises ``StoreError`` (code ``ListingStuck``).
        """
        sent: dict[str, Any] = {}
        while True:
            page = self._call(what, bucket, fn, tolerate, **kwargs, **sent)
            yield page
            if page is None or not page.get("IsTruncated"):
                return
            following = {
                param: page[field] for field, param in markers if page.get(field) not in (None, "")
            }
            if not following.get(markers[0][1]) or following == sent:
                shown = ", ".join(f"{k}={v!r}" for k, v in following.items())
                reason = (
                    f"continues at the marker just sent ({shown})"
                    if following.get(markers[0][1])
                    else "gives no marker to continue from"
                )
                raise StoreError(
                    f"{what} in bucket {bucket!r} stopped: the server answered a truncated page "
                    f"that {reason}, so asking again would never end (endpoint "
                    f"{self.settings.endpoint_url or 'AWS default'}). The server, or a proxy in "
                    "front of it, pages listings wrongly.",
                    code="ListingStuck",
                )
            sent = following

    # -- buckets and objects ------------------------------------------------------------------
    def check_bucket(self, bucket: str) -> None:
        """Fail early, naming the bucket and the cause, before any upload starts."""
        self._call(CHECKING_ACCESS, bucket, self.client.head_bucket)

    def head(self, bucket: str, key: str) -> ObjectInfo | None:
        reply = self._read(
            f"HEAD {key!r}",
            bucket,
            self.client.head_object,
            tolerate=("404", "NoSuchKey", "NotFound"),
            Key=key,
        )
        if reply is None:
            return None
        stored = _stored_checksum(reply, self.settings.requests.checksum_algorithm)
        return ObjectInfo(key, reply["ContentLength"], reply["ETag"], stored)

    def list_objects(self, bucket: str, prefix: str, start_after: str = "") -> Iterator[ObjectInfo]:
        """Every object under ``prefix`` (after ``start_after``), 1000 keys per request."""
        pages = self._pages(
            f"listing {prefix!r}",
            bucket,
            self.client.list_objects_v2,
            (("NextContinuationToken", "ContinuationToken"),),
            Prefix=prefix,
            **({"StartAfter": start_after} if start_after else {}),
        )
        for page in pages:
            for item in page.get("Contents", []):
                yield ObjectInfo(item["Key"], item["Size"], item["ETag"])

    def get(self, bucket: str, key: str) -> bytes:
        reply = self._read(f"GET {key!r}", bucket, self.client.get_object, Key=key)
        return reply["Body"].read()

    def get_if_present(self, bucket: str, key: str) -> bytes | None:
        """The object's bytes, or None if it does not exist (one request either way)."""
        try:
            return self.get(bucket, key)
        except StoreError as exc:
            if exc.code in _MISSING_KEY:
                return None
            raise

    def get_range(self, bucket: str, key: str, start: int, end: int) -> bytes:
        """Bytes ``start`` up to (not including) ``end`` of an object: one ranged GET."""
        reply = self._read(
            f"GET {key!r} bytes {start}-{end - 1}",
            bucket,
            self.client.get_object,
            Key=key,
            Range=f"bytes={start}-{end - 1}",
        )
        return reply["Body"].read()

    def _read(self, what: str, bucket: str, fn, tolerate: tuple[str, ...] = (), **kwargs):
        """A HEAD or GET of an object that need not be this job's.

        S3 refuses (400) a read whose SSE-C headers do not fit the object. With SSE-C on, an
        object written without a customer key (data a ``replace`` deletes, an older job's
        ``_SUCCESS``, a Delta log entry) is read again without the key. An object that needs
        a key the read lacks (or another one) stays refused, and the error says so.
        """
        try:
            return self._call(what, bucket, fn, tolerate, **kwargs)
        except StoreError as exc:
            if not _misfit_sse_c(exc):
                raise
            refused = exc
        if self.settings.requests.customer_key is not None:
            try:
                return self._call(what, bucket, _without_customer_key(fn), tolerate, **kwargs)
            except StoreError as exc:
                if not _misfit_sse_c(exc):
                    raise
        raise StoreError(
            f"{what} in bucket {bucket!r} was refused with 400 Bad Request ({refused.code}), "
            "as S3 refuses a read of an object encrypted with a customer key (SSE-C) that does "
            "not give that key: if it is one, read it with the options "
            "encryption.algorithm=SSE-C and encryption.key set to the key it was written with",
            code=refused.code,
        ) from refused

    def put(
        self, bucket: str, key: str, body: bytes | bytearray, content_type: str | None = None
    ) -> str:
        extra = {"ContentType": content_type} if content_type else {}
        reply = self._call(
            f"PUT {key!r}", bucket, self.client.put_object, Key=key, Body=body, **extra
        )
        return reply["ETag"]

    def copy(self, bucket: str, source: str, target: str) -> str:
        """Server-side copy: what a "rename" costs on S3 ("A Zero-Rename Committer", Results)."""
        reply = self._call(
            f"copying {source!r} to {target!r}",
            bucket,
            self.client.copy_object,
            Key=target,
            CopySource={"Bucket": bucket, "Key": source},
        )
        return reply["CopyObjectResult"]["ETag"]

    def put_if_absent(self, bucket: str, key: str, body: bytes | bytearray) -> bool:
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
                raise _batch_delete_error(bucket, reply["Errors"])
            deleted += len(chunk)
        return deleted

    def delete_confirmed(self, bucket: str, keys: Iterable[str]) -> list[str]:
        """Delete ``keys`` and check it: the keys that existed before and are gone now.

        DeleteObjects answers "Deleted" for every key it was given, also for keys that never
        existed or that the server stores under another name, so its answer proves nothing.
        The keys are looked up before and after the delete (a HEAD each for up to
        ``CONFIRM_BY_HEAD_LIMIT`` keys, else one listing of the range they span); a key still
        there afterwards raises ``StoreError`` (code ``DeleteNotConfirmed``) naming it.
        """
        wanted = list(dict.fromkeys(keys))
        if not wanted:
            return []
        before = self._present(bucket, wanted)
        self.delete_keys(bucket, wanted)
        after = self._present(bucket, wanted)
        left = [k for k in wanted if k in after]
        if left:
            raise StoreError(
                f"deleting {len(wanted)} objects in bucket {bucket!r} left {len(left)} in place "
                f"although the server answered that it deleted them: {left[:5]!r}"
                + (" and more" if len(left) > 5 else ""),
                code="DeleteNotConfirmed",
            )
        return [k for k in wanted if k in before]

    def _present(self, bucket: str, keys: list[str]) -> set[str]:
        """Which of ``keys`` exist now."""
        if len(keys) <= CONFIRM_BY_HEAD_LIMIT:
            return {k for k in keys if self.head(bucket, k) is not None}
        first, last = min(keys), max(keys)
        wanted, found = set(keys), set()
        prefix = os.path.commonprefix([first, last])  # noqa: RUF071 - keys, by character
        # a proper prefix of the first key sorts before it: the listing starts just below it
        for info in self.list_objects(bucket, prefix, first[:-1]):
            if info.key > last:
                break
            if info.key in wanted:
                found.add(info.key)
        return found

    # -- multipart uploads --------------------------------------------------------------------
    def initiate(self, bucket: str, key: str, content_type: str | None = None) -> str:
        extra = {"ContentType": content_type} if content_type else {}
        reply = self._call(
            f"initiating the upload of {key!r}",
            bucket,
            self.client.create_multipart_upload,
            Key=key,
            **extra,
        )
        return reply["UploadId"]

    def upload_part(
        self,
        bucket: str,
        key: str,
        upload_id: str,
        number: int,
        body: bytes | bytearray | FileRange,
    ) -> PartInfo:
        """Upload one part, in memory or a range of a local file; with ``checksum.algorithm``
        it carries the checksum of ``body``, which the server checks against what arrived,
        and which the completion repeats."""
        algorithm = self.settings.requests.checksum_algorithm
        sent = None
        if algorithm:
            chunks = body.chunks() if isinstance(body, FileRange) else [body]
            sent = checksum_of(algorithm, chunks)
        reply = self._call(
            f"uploading part {number} of {key!r}",
            bucket,
            self.client.upload_part,
            Key=key,
            UploadId=upload_id,
            PartNumber=number,
            Body=body,
            **({field_name(algorithm): sent} if algorithm else {}),
        )
        return PartInfo(number, len(body), reply["ETag"], sent)

    def complete(
        self,
        bucket: str,
        key: str,
        upload_id: str,
        etags: list[str],
        checksum_algorithm: str | None = None,
        checksums: list[str] | None = None,
    ) -> str:
        """Complete an upload from its parts' ETags and, for an upload created with a checksum
        algorithm, their checksums: S3 refuses such a completion without them."""
        parts = [{"PartNumber": i + 1, "ETag": etag} for i, etag in enumerate(etags)]
        if checksum_algorithm and checksums:
            for part, value in zip(parts, checksums, strict=True):
                part[field_name(checksum_algorithm)] = value
        reply = self._call(
            f"completing the upload of {key!r}",
            bucket,
            self.client.complete_multipart_upload,
            Key=key,
            UploadId=upload_id,
            MultipartUpload={"Parts": parts},
        )
        return reply.get("ETag") or ""  # Ceph RGW answers an empty <ETag/>: callers verify

    def abort(self, bucket: str, key: str, upload_id: str) -> bool:
        """Abort one upload; False if it no longer exists (already completed or aborted)."""
        reply = self._call(
            f"aborting the upload of {key!r}",
            bucket,
            self.client.abort_multipart_upload,
            tolerate=("NoSuchUpload", "NoSuchKey", "404"),  # NoSuchKey: Ceph RGW
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
        pages = self._pages(
            f"listing pending uploads under {prefix!r}",
            bucket,
            self.client.list_multipart_uploads,
            (("NextKeyMarker", "KeyMarker"), ("NextUploadIdMarker", "UploadIdMarker")),
            Prefix=prefix,
        )
        return [
            PendingUploadInfo(item["Key"], item["UploadId"], item.get("Initiated"))
            for page in pages
            for item in page.get("Uploads", [])
        ]

    def list_parts(self, bucket: str, key: str, upload_id: str) -> list[PartInfo] | None:
        """The parts uploaded so far to a pending upload; None if the upload no longer exists."""
        found: list[PartInfo] = []
        pages = self._pages(
            f"listing the parts of {key!r}",
            bucket,
            self.client.list_parts,
            (("NextPartNumberMarker", "PartNumberMarker"),),
            ("NoSuchUpload", "NoSuchKey", "404"),  # NoSuchKey: Ceph RGW
            Key=key,
            UploadId=upload_id,
        )
        for page in pages:
            if page is None:
                return None
            algorithm = page.get("ChecksumAlgorithm") or self.settings.requests.checksum_algorithm
            found += [
                PartInfo(
                    int(p["PartNumber"]),
                    int(p.get("Size", 0)),
                    p.get("ETag", ""),
                    _stored_checksum(p, algorithm),
                )
                for p in page.get("Parts", [])
            ]
        return found

    # -- bucket configuration -----------------------------------------------------------------
    def versioning(self, bucket: str) -> str | None:
        """The bucket's versioning status (``Enabled``, ``Suspended``), None if never enabled."""
        reply = self._call(
            "reading the versioning status", bucket, self.client.get_bucket_versioning
        )
        return reply.get("Status") or None

    def get_lifecycle_rules(self, bucket: str) -> list[dict]:
        """The bucket's lifecycle rules as S3 returns them; [] when it has none."""
        reply = self._call(
            "reading the lifecycle rules",
            bucket,
            self.client.get_bucket_lifecycle_configuration,
            tolerate=("NoSuchLifecycleConfiguration",),
        )
        return [] if reply is None else list(reply.get("Rules", []))

    def put_lifecycle_rules(self, bucket: str, rules: list[dict]) -> None:
        """Replace the bucket's whole lifecycle configuration (S3 has no per-rule update)."""
        self._call(
            "writing the lifecycle rules",
            bucket,
            self.client.put_bucket_lifecycle_configuration,
            LifecycleConfiguration={"Rules": rules},
        )


def _body_checksum(kwargs: dict[str, Any]) -> dict[str, str]:
    """The checksum of a request's bytes by its ``ChecksumAlgorithm``, computed by the SDK
    (:mod:`..checksums`): botocore computes CRC32C only with the AWS CRT installed."""
    algorithm, body = kwargs.get("ChecksumAlgorithm"), kwargs.get("Body")
    if not algorithm or field_name(algorithm) in kwargs:
        return {}
    if not isinstance(body, bytes | bytearray | memoryview):
        return {}
    return {field_name(algorithm): checksum(algorithm, body)}


def _stored_checksum(reply: dict[str, Any], algorithm: str | None) -> str | None:
    """An answer's checksum of ``algorithm`` (HEAD, ListParts), None if it carries none."""
    return reply.get(field_name(algorithm)) if algorithm else None


def _error_code(exc: botocore.exceptions.ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code") or _status(exc) or "?")


def _status(exc: botocore.exceptions.ClientError) -> int | None:
    return exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")


#: the codes of S3's 400 to a read whose SSE-C headers do not fit the object (HEAD: no body)
_SSE_C_MISFIT_CODES = ("400", "BadRequest", "InvalidRequest", "InvalidArgument")


def _misfit_sse_c(exc: StoreError) -> bool:
    """Could this refusal be S3's to SSE-C headers that do not fit the object?"""
    cause = exc.__cause__
    return (
        isinstance(cause, botocore.exceptions.ClientError)
        and _status(cause) == 400
        and exc.code in _SSE_C_MISFIT_CODES
    )


def _without_customer_key(fn):
    """``fn`` (a client method) without the SSE-C arguments the store adds to it; under its
    name, so the store still adds the rest (requester pays, checksum mode)."""

    def call(**kwargs):
        return fn(**{k: v for k, v in kwargs.items() if not k.startswith("SSECustomer")})

    call.__name__ = fn.__name__
    return call


def _retry_kind(exc: Exception) -> str | None:
    """``throttled``, ``connection`` or ``transient`` if the request may succeed again."""
    if isinstance(exc, botocore.exceptions.ClientError):
        code, status = _error_code(exc), _status(exc)
        if code in _THROTTLE_CODES or status in (429, 503):
            return "throttled"
        if code in _TRANSIENT_CODES or status in (500, 502, 504):
            return "transient"
        return None
    if isinstance(exc, botocore.exceptions.EndpointConnectionError):
        return "transient"  # nothing listens there: a few attempts, not a throttling budget
    if isinstance(exc, botocore.exceptions.HTTPClientError):
        return "connection"  # reset, closed or timed out under load
    return None


#: what ``check_bucket`` is doing, in its errors: "checking access in bucket 'b' failed: ..."
CHECKING_ACCESS = "checking access"


def _store_error(
    what: str, bucket: str, exc: botocore.exceptions.ClientError, key: str | None = None
) -> StoreError:
    """The typed error of a request that failed for good; ``key``: the object it was for.

    A refusal names the IAM action the request needs (:mod:`..iam`): ``AccessDenied`` says
    the credentials may not make it, and a 403 without a reason (a HEAD has no body) may be
    that or unknown keys, so its message names both.
    """
    error = exc.response.get("Error", {})
    code = _error_code(exc)
    message = error.get("Message", "")
    permission = permission_of(exc.operation_name)
    if code in ("AccessDenied", "403") and permission:
        return _access_denied(what, bucket, key, permission, code)
    if code in ("NoSuchBucket", "404") and what == CHECKING_ACCESS:
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
    return StoreError(f"{what} in bucket {bucket!r} failed: {cause}", code=code)


def _access_denied(
    what: str, bucket: str, key: str | None, permission: str, code: str
) -> AccessDeniedError:
    target = f"s3://{bucket}/{key}" if key else f"the bucket {bucket!r}"
    keys = (
        " or the keys are not known to the store (a refused HEAD says no more: check "
        "AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY and the profile)"
        if code == "403"
        else ""
    )
    policy = (
        " (such as one requiring server-side encryption: the option encryption.algorithm)"
        if permission.endswith("s3:PutObject")
        else ""
    )
    return AccessDeniedError(
        f"{what} in bucket {bucket!r} failed: access was refused ({code}): the credentials "
        f"lack the permission {permission} on {target}{keys}, or a bucket policy refuses the "
        f"request{policy}. Grant {permission} (`s3commit iam-policy s3://{bucket}/PREFIX` "
        "prints the policy with every action the SDK needs).",
        permission=permission,
        bucket=bucket,
        key=key,
        code=code,
    )


def _batch_delete_error(bucket: str, errors: list[dict[str, Any]]) -> StoreError:
    """DeleteObjects answers 200 and one error per key it did not delete; a refused key (AWS,
    moto: no ``s3:DeleteObject`` on it) is an :class:`AccessDeniedError` naming it."""
    first = errors[0]
    what = f"batch delete ({len(errors)} keys failed, first {first.get('Key')!r})"
    if first.get("Code") == "AccessDenied":
        return _access_denied(what, bucket, first.get("Key"), "s3:DeleteObject", "AccessDenied")
    return StoreError(
        f"batch delete in bucket {bucket!r} failed for {len(errors)} keys, "
        f"first {first.get('Key')!r}: {first.get('Code')} {first.get('Message')}",
        code=first.get("Code"),
    )
