"""A fault-injecting HTTP proxy in front of an S3 endpoint, for tests and benchmarks.

The proxy listens on 127.0.0.1, forwards every request to the real endpoint (the moto server)
and, where a rule says so, answers ``503 SlowDown`` or ``500 InternalError`` instead, resets the
connection, delays the request or caps its bandwidth; or it tampers with what passes: a wrong
ETag in the answer, a 412 turned into success (a store that ignores conditional requests), a
delete acknowledged but never made, a listing page that says it is truncated but never
advances, or a request body damaged on its way (and, as S3 does, checked against its checksum
header).
Faults travel over real sockets, so the
code under test sees them exactly as it would see them from S3: botocore retries them, or they
surface as errors.

Which requests fail is deterministic: each rule draws from its own ``random.Random`` seeded from
the proxy's seed and the rule's position, once per request it matches, so the n-th matching
request always gets the same decision whatever the thread interleaving. Requests are counted per
S3 operation (botocore's operation names), retries included.

    with FaultProxy(upstream) as proxy:
        proxy.set_rules([slow_down("UploadPart", occurrences=[2, 4]), delay(50)], seed=7)
        write_committed(df, url, options={"endpoint": proxy.endpoint})
        proxy.counts["UploadPart"], proxy.events

Requests are expected in path style (``/bucket/key``), which botocore uses for an IP endpoint.
Bodies are read whole before they are forwarded: fine for test-sized parts.
"""

from __future__ import annotations

import contextlib
import http.client
import random
import re
import socket
import struct
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit
from xml.sax.saxutils import escape

from .. import checksums

SLOW_DOWN = "slowdown"
INTERNAL_ERROR = "internal-error"
RESET = "reset"
DELAY = "delay"
BANDWIDTH = "bandwidth"
WRONG_ETAG = "wrong-etag"
IGNORE_CONDITIONS = "ignore-conditions"
STUCK_LISTING = "stuck-listing"
IGNORE_DELETES = "ignore-deletes"
HOLD = "hold"
EXPIRED_TOKEN = "expired-token"
ACCESS_DENIED = "access-denied"
REQUIRE_HEADER = "require-header"
STRICT_SSE_C = "strict-sse-c"
CORRUPT_BODY = "corrupt-body"
CHECK_CHECKSUMS = "check-checksums"
REFUSE_CHECKSUMS = "refuse-checksums"
ACTIONS = (
    SLOW_DOWN,
    INTERNAL_ERROR,
    RESET,
    DELAY,
    BANDWIDTH,
    WRONG_ETAG,
    IGNORE_CONDITIONS,
    STUCK_LISTING,
    IGNORE_DELETES,
    HOLD,
    EXPIRED_TOKEN,
    ACCESS_DENIED,
    REQUIRE_HEADER,
    STRICT_SSE_C,
    CORRUPT_BODY,
    CHECK_CHECKSUMS,
    REFUSE_CHECKSUMS,
)
TAMPERS = (WRONG_ETAG, IGNORE_CONDITIONS, STUCK_LISTING, CORRUPT_BODY, CHECK_CHECKSUMS)
#: the elements of a listing's answer that say where the next page starts, by operation
NEXT_MARKERS = {
    "ListObjectsV2": ("NextContinuationToken",),
    "ListObjects": ("NextMarker",),
    "ListMultipartUploads": ("NextKeyMarker", "NextUploadIdMarker"),
    "ListParts": ("NextPartNumberMarker",),
}
#: What a wrong-etag rule puts into an answer: a well-formed multipart ETag of nothing we wrote.
BOGUS_ETAG = '"00000000000000000000000000000000-1"'
COPIES = ("CopyObject", "UploadPartCopy")
#: the requests that create an object: what a bucket policy on ``s3:PutObject`` governs
OBJECT_CREATING = ("PutObject", "CreateMultipartUpload", "CopyObject")
OBJECT_READS = ("HeadObject", "GetObject")
#: the header that says a request carries an SSE-C key
SSE_C_HEADER = "x-amz-server-side-encryption-customer-algorithm"
_ERRORS = {
    SLOW_DOWN: (503, "SlowDown", "Please reduce your request rate."),
    INTERNAL_ERROR: (500, "InternalError", "We encountered an internal error. Please try again."),
    ACCESS_DENIED: (403, "AccessDenied", "Access Denied"),
    EXPIRED_TOKEN: (400, "ExpiredToken", "The provided token has expired."),
    REFUSE_CHECKSUMS: (400, "InvalidArgument", "Unsupported checksum algorithm."),
    REQUIRE_HEADER: (
        403,
        "AccessDenied",
        "Access Denied (an explicit deny in a resource-based policy: {header} must be {value})",
    ),
}
_HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "expect",
    "content-length",
}


@dataclass(frozen=True)
class Fault:
    """One rule: what to do to the requests of ``operation`` ("*": every operation).

    A rule fires on the matching requests listed in ``occurrences`` (1-based, counted per rule
    since the rules were set; None: every one), each with ``probability``. ``after=True`` makes
    an error or reset happen after the request reached the store: it took effect, but the
    client never hears so (the ambiguous failure). Delays and bandwidth caps of every firing
    rule add up; the first firing error or reset wins.
    """

    action: str
    operation: str = "*"
    probability: float = 1.0
    occurrences: frozenset[int] | None = None
    after: bool = False
    delay_ms: float = 0.0
    bytes_per_s: int = 0
    marker: str = ""
    #: an expire-keys rule's access key, and how many requests of its operation it passes
    access_key: str = ""
    valid_for: int = 0
    #: a require-header rule's header (lower case) and the value it must have ("": any)
    header: str = ""
    value: str = ""
    #: only requests whose path holds this text match ("": any path), e.g. "journal.json"
    key_contains: str = ""
    #: only requests after the ``after_count``-th ``after_operation`` request ("*": any) whose
    #: path holds ``after_key`` match ("": from the start): "the first DeleteObjects after
    #: that PUT"
    after_key: str = ""
    after_count: int = 1
    after_operation: str = "*"

    def __post_init__(self) -> None:
        if self.action not in ACTIONS:
            raise ValueError(f"unknown fault action {self.action!r}; use one of {ACTIONS}")
        if not 0.0 <= self.probability <= 1.0:
            raise ValueError(f"probability must lie in [0, 1], got {self.probability}")
        if self.occurrences is not None:
            object.__setattr__(self, "occurrences", frozenset(self.occurrences))
        if self.action == BANDWIDTH and self.bytes_per_s <= 0:
            raise ValueError("a bandwidth cap needs bytes_per_s > 0")

    def matches(self, operation: str, path: str = "") -> bool:
        if self.key_contains and self.key_contains not in unquote(path):
            return False
        if self.action == EXPIRED_TOKEN:  # an expired key is refused whatever it asks
            return operation != "MotoApi"
        if self.action == REQUIRE_HEADER and self.operation == "*":
            return operation in OBJECT_CREATING
        if self.action == STRICT_SSE_C and self.operation == "*":
            return operation in OBJECT_READS
        if self.operation == "*":
            return operation != "MotoApi"  # moto's admin API is no S3 operation
        return self.operation == operation


def _fault(action: str, operation: str, occurrences: Iterable[int] | None, **kwargs) -> Fault:
    chosen = None if occurrences is None else frozenset(occurrences)
    return Fault(action, operation, occurrences=chosen, **kwargs)


def _failure_rule(action: str, doc: str):
    """A rule constructor for one failure action; they differ only in what they answer."""

    def rule(
        operation: str = "*",
        *,
        probability: float = 1.0,
        occurrences: Iterable[int] | None = None,
        after: bool = False,
    ) -> Fault:
        return _fault(action, operation, occurrences, probability=probability, after=after)

    rule.__doc__ = doc
    rule.__name__ = rule.__qualname__ = action.replace("-", "_")
    return rule


slow_down = _failure_rule(SLOW_DOWN, "Answer ``503 SlowDown``, S3's throttling reply.")
internal_error = _failure_rule(INTERNAL_ERROR, "Answer ``500 InternalError`` (retried).")
reset = _failure_rule(RESET, "Close the client's connection with a TCP reset, no response.")
access_denied = _failure_rule(
    ACCESS_DENIED,
    "Refuse as S3 refuses credentials that lack the permission: ``403 AccessDenied``, and to "
    "``DeleteObjects`` (no ``s3:DeleteObject``) ``200`` with an ``AccessDenied`` error per key.",
)


def require_header(name: str, value: str = "", operation: str = "*") -> Fault:
    """Refuse as a bucket policy that denies ``s3:PutObject`` unless a header is set (e.g.
    ``x-amz-server-side-encryption: aws:kms``): ``403 AccessDenied`` to every object-creating
    request (:data:`OBJECT_CREATING`, or only ``operation``) whose header ``name`` is missing
    or, with ``value``, differs. Other requests pass. Moto and Ceph RGW 16 accept such a
    policy but do not enforce it; each refusal is an event of this rule."""
    return Fault(REQUIRE_HEADER, operation, header=name.lower(), value=value)


def strict_sse_c(operation: str = "*") -> Fault:
    """Refuse, as S3 does, a read (:data:`OBJECT_READS`, or only ``operation``) whose SSE-C
    headers do not fit the object: with them, of an object not written with a customer key;
    without them, of one that was (``400 InvalidRequest``). Objects count as written with a
    key when they were created through this proxy with the SSE-C headers. Moto keeps no SSE-C
    at all and Ceph RGW 16 serves a plain object to a read with a key; each refusal is an
    event of this rule."""
    return Fault(STRICT_SSE_C, operation)


def expire_keys(access_key: str, *, after: int = 0, operation: str = "*") -> Fault:
    """Refuse as S3 refuses temporary credentials past their expiry: once ``after`` requests
    of ``operation`` signed with ``access_key`` have passed, every request signed with it (of
    any operation) gets ``400 ExpiredToken``. Moto checks no expiry, and the keys of Ceph RGW's
    users never expire, so tests emulate it here; each refusal is an event of this rule."""
    return Fault(EXPIRED_TOKEN, operation, access_key=access_key, valid_for=after)


def wrong_etag(
    operation: str = "CompleteMultipartUpload",
    *,
    probability: float = 1.0,
    occurrences: Iterable[int] | None = None,
) -> Fault:
    """Forward the request, then replace the ETag of its answer (header and XML) by
    ``BOGUS_ETAG``: a gateway or store whose answer does not match what it stored."""
    return _fault(WRONG_ETAG, operation, occurrences, probability=probability)


def ignore_conditions(
    operation: str = "PutObject",
    *,
    probability: float = 1.0,
    occurrences: Iterable[int] | None = None,
) -> Fault:
    """Answer ``200 OK`` where the store refused a conditional request with 412: to the client
    this is a store that ignores ``If-None-Match`` / ``If-Match`` (the headers are signed, so
    the proxy cannot simply drop them)."""
    return _fault(IGNORE_CONDITIONS, operation, occurrences, probability=probability)


def ignore_deletes(
    operation: str = "DeleteObjects",
    *,
    probability: float = 1.0,
    occurrences: Iterable[int] | None = None,
) -> Fault:
    """Answer a delete (``DeleteObjects``: every key "Deleted"; ``DeleteObject``: 204) without
    forwarding it: a store that acknowledges deletes it did not make, as one does that stored
    the key under another name."""
    return _fault(IGNORE_DELETES, operation, occurrences, probability=probability)


def corrupt_body(
    operation: str = "UploadPart",
    *,
    probability: float = 1.0,
    occurrences: Iterable[int] | None = None,
) -> Fault:
    """Flip the last byte of the request's body and forward it with every header unchanged
    (its ``x-amz-checksum-*`` and signature included): data damaged on its way to the store."""
    return _fault(CORRUPT_BODY, operation, occurrences, probability=probability)


def check_checksums(operation: str = "*") -> Fault:
    """Check checksums as S3 does, without forwarding what fails: a body that its
    ``x-amz-checksum-<algorithm>`` header does not describe is answered ``400 BadDigest``, the
    completion of an upload created with a checksum algorithm whose parts lack their checksums
    ``400 InvalidRequest``. Moto 5.2.5 stores a part whatever its checksum header says and
    completes without the part checksums; Ceph RGW 16 keeps no checksums at all."""
    return _fault(CHECK_CHECKSUMS, operation, None)


def refuse_checksums(operation: str = "*") -> Fault:
    """Answer ``400 InvalidArgument`` to every request that carries an additional checksum or
    names a checksum algorithm: a store that refuses S3's additional checksums outright."""
    return _fault(REFUSE_CHECKSUMS, operation, None)


def stuck_listing(
    operation: str = "ListObjectsV2",
    *,
    marker: str = "s3commit-stuck",
    probability: float = 1.0,
    occurrences: Iterable[int] | None = None,
) -> Fault:
    """Forward a listing, then answer that it is truncated and goes on at ``marker``, the same
    every time (``""``: with no marker at all): a store whose paging never advances. The
    markers are those of :data:`NEXT_MARKERS` (a number for ``ListParts``)."""
    return _fault(STUCK_LISTING, operation, occurrences, probability=probability, marker=marker)


def delay(
    ms: float,
    operation: str = "*",
    *,
    probability: float = 1.0,
    occurrences: Iterable[int] | None = None,
    key_contains: str = "",
    after_key: str = "",
    after_count: int = 1,
    after_operation: str = "*",
) -> Fault:
    """Hold the request ``ms`` milliseconds before forwarding it (latency).

    If the client disconnects meanwhile (it crashed), the request is dropped, never forwarded:
    a long delay on the n-th request is how tests kill a driver just before that request.
    ``key_contains``: only requests whose path holds it match (and are counted);
    ``after_key``: only requests after the ``after_count``-th ``after_operation`` request
    whose path holds it.
    """
    return _fault(
        DELAY,
        operation,
        occurrences,
        probability=probability,
        delay_ms=ms,
        key_contains=key_contains,
        after_key=after_key,
        after_count=after_count,
        after_operation=after_operation,
    )


def hold(operation: str = "*", *, occurrences: Iterable[int] | None = None) -> Fault:
    """Hold the request until :meth:`FaultProxy.release` (or the proxy's timeout), then forward
    it: a request in flight for exactly as long as a test needs, whatever the machine's speed.
    A caller that died while held never gets its request forwarded, as with :func:`delay`."""
    return _fault(HOLD, operation, occurrences)


def bandwidth(
    bytes_per_s: int,
    operation: str = "*",
    *,
    probability: float = 1.0,
    occurrences: Iterable[int] | None = None,
) -> Fault:
    """Move the request and response bodies at no more than ``bytes_per_s``.

    Server-side copies are paced too: a copy's reply waits until its bytes would have moved
    ("A Zero-Rename Committer", "Results", measured S3 copying at about 10 MB/s).
    """
    return _fault(
        BANDWIDTH,
        operation,
        probability=probability,
        occurrences=occurrences,
        bytes_per_s=bytes_per_s,
    )


@dataclass(frozen=True)
class FaultEvent:
    """A fault the proxy injected: into the ``number``-th request of ``operation``."""

    operation: str
    number: int
    action: str


@dataclass
class _Plan:
    delay_s: float = 0.0
    rate: int = 0
    failure: Fault | None = None
    tampers: set[str] = field(default_factory=set)
    stuck_marker: str = ""
    hold: threading.Event | None = None
    number: int = 0
    strict_sse_c: bool = False


@dataclass(frozen=True)
class SeenRequest:
    """One request as the proxy received it: its operation and the headers it records."""

    operation: str
    headers: dict[str, str]
    #: the request's path (``/bucket/key``), without its query
    path: str = ""


# -- which S3 operation is this request? -------------------------------------------------------
_BUCKET_OPS = {
    ("GET", "uploads"): "ListMultipartUploads",
    ("GET", "versions"): "ListObjectVersions",
    ("GET", "location"): "GetBucketLocation",
    ("GET", "lifecycle"): "GetBucketLifecycleConfiguration",
    ("PUT", "lifecycle"): "PutBucketLifecycleConfiguration",
    ("DELETE", "lifecycle"): "DeleteBucketLifecycle",
    ("POST", "delete"): "DeleteObjects",
}
_OBJECT_SUBRESOURCES = {
    ("GET", "uploadId"): "ListParts",
    ("DELETE", "uploadId"): "AbortMultipartUpload",
    ("POST", "uploads"): "CreateMultipartUpload",
    ("POST", "uploadId"): "CompleteMultipartUpload",
    ("POST", "restore"): "RestoreObject",
    ("GET", "tagging"): "GetObjectTagging",
    ("PUT", "tagging"): "PutObjectTagging",
    ("DELETE", "tagging"): "DeleteObjectTagging",
    ("GET", "acl"): "GetObjectAcl",
    ("PUT", "acl"): "PutObjectAcl",
    ("GET", "attributes"): "GetObjectAttributes",
}
_OBJECT_PLAIN = {
    "GET": "GetObject",
    "HEAD": "HeadObject",
    "PUT": "PutObject",
    "DELETE": "DeleteObject",
    "POST": "PostObject",
}
_LIST_PARAMS = {
    "list-type",
    "prefix",
    "delimiter",
    "encoding-type",
    "max-keys",
    "marker",
    "continuation-token",
    "start-after",
    "fetch-owner",
}
_BUCKET_PLAIN = {
    "HEAD": "HeadBucket",
    "PUT": "CreateBucket",
    "DELETE": "DeleteBucket",
    "GET": "ListObjects",
}


def s3_operation(method: str, path: str, query: Mapping[str, object], headers: Mapping) -> str:
    """botocore's name of the S3 operation a path-style request performs."""
    method = method.upper()
    bucket, _, key = path.lstrip("/").partition("/")
    copy = headers.get("x-amz-copy-source") is not None
    if bucket == "moto-api":
        return "MotoApi"
    if not bucket:
        return "ListBuckets" if method == "GET" else f"{method.title()}Service"
    if not key:
        for (verb, sub), name in _BUCKET_OPS.items():
            if verb == method and sub in query:
                return name
        if method == "GET" and query.get("list-type") in (["2"], "2"):
            return "ListObjectsV2"
        subs = sorted(k for k in query if k not in _LIST_PARAMS)
        if subs and method in ("GET", "PUT", "DELETE"):
            return f"{method.title()}Bucket{subs[0].title()}"  # e.g. GetBucketCors
        return _BUCKET_PLAIN.get(method, f"{method.title()}Bucket")
    if method == "PUT" and "partNumber" in query and "uploadId" in query:
        return "UploadPartCopy" if copy else "UploadPart"
    for (verb, sub), name in _OBJECT_SUBRESOURCES.items():
        if verb == method and sub in query:
            return name
    if method == "PUT" and copy:
        return "CopyObject"
    return _OBJECT_PLAIN.get(method, f"{method.title()}Object")


# -- the proxy ---------------------------------------------------------------------------------
class FaultProxy:
    """A reverse proxy on 127.0.0.1 in front of ``upstream`` that injects faults by rule."""

    def __init__(
        self,
        upstream: str,
        rules: Iterable[Fault] = (),
        seed: int | str = 0,
        port: int = 0,
        timeout: float = 60.0,
    ) -> None:
        target = urlsplit(upstream)
        if target.scheme != "http" or not target.hostname:
            raise ValueError(f"upstream must be an http:// URL, got {upstream!r}")
        self.upstream = (target.hostname, target.port or 80)
        self.timeout = timeout
        self._port = port
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()
        self._copied = 0
        self._events: list[FaultEvent] = []
        self._recorded_headers: tuple[str, ...] = ()
        self._seen: list[SeenRequest] = []
        #: paths of the objects created through the proxy with an SSE-C key
        self._customer_keyed: set[str] = set()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._client = None
        self._released = threading.Event()
        self.set_rules(rules, seed)

    # -- configuration ----------------------------------------------------------------------
    def set_rules(self, rules: Iterable[Fault], seed: int | str | None = None) -> None:
        """Replace the rules (and optionally the seed); per-rule counters start again.
        Requests held under the old rules are released."""
        with self._lock:
            self._released.set()
            self._released = threading.Event()
            if seed is not None:
                self.seed = seed
            self.rules = list(rules)
            self._matched = [0] * len(self.rules)
            self._passed = [0] * len(self.rules)  # requests holding a rule's after_key seen
            self._uses = [0] * len(self.rules)  # requests of its operation an expire rule passed
            self._rngs = [random.Random(f"{self.seed}:{i}") for i in range(len(self.rules))]

    def release(self) -> None:
        """Forward every request a :func:`hold` rule is holding, and those it will hold."""
        with self._lock:
            self._released.set()

    def reset(self) -> None:
        """No rules, no counts, no events, no recorded requests: a clean pass-through proxy.
        Which objects were created with an SSE-C key (:func:`strict_sse_c`) stays known."""
        self.set_rules([])
        with self._lock:
            self._counts.clear()
            self._events.clear()
            self._copied = 0
            self._recorded_headers = ()
            self._seen.clear()

    def record_headers(self, *names: str) -> None:
        """From now on keep every request's ``names`` headers (absent: not in its dict), in
        :attr:`requests`: how a test sees what each request of a job carried."""
        with self._lock:
            self._recorded_headers = tuple(name.lower() for name in names)
            self._seen.clear()

    @property
    def requests(self) -> list[SeenRequest]:
        """The requests seen since :meth:`record_headers`, in arrival order (MotoApi left out)."""
        with self._lock:
            return list(self._seen)

    @property
    def counts(self) -> dict[str, int]:
        """Requests seen per S3 operation since the last ``reset`` (faulted ones included)."""
        with self._lock:
            return dict(sorted(self._counts.items()))

    @property
    def copied_bytes(self) -> int:
        """Bytes the store copied server-side (CopyObject, UploadPartCopy) since ``reset``."""
        with self._lock:
            return self._copied

    def _count_copy(self, size: int) -> None:
        with self._lock:
            self._copied += size

    @property
    def events(self) -> list[FaultEvent]:
        """Every fault injected since the last ``reset``, in decision order."""
        with self._lock:
            return list(self._events)

    def _plan(self, operation: str, headers: Mapping[str, str], path: str = "") -> _Plan:
        with self._lock:
            self._counts[operation] += 1
            number = self._counts[operation]
            plan = _Plan(number=number)
            if self._recorded_headers and operation != "MotoApi":
                kept = {h: headers[h] for h in self._recorded_headers if headers.get(h) is not None}
                self._seen.append(SeenRequest(operation, kept, path.split("?", 1)[0]))
            for i, rule in enumerate(self.rules):
                if rule.after_key and self._passed[i] < rule.after_count:
                    wanted = rule.after_operation in ("*", operation)
                    self._passed[i] += wanted and rule.after_key in unquote(path)
                    continue
                if not rule.matches(operation, path):
                    continue
                if rule.action == REQUIRE_HEADER and _has_header(headers, rule):
                    continue
                if rule.action == REFUSE_CHECKSUMS and not _carries_checksum(headers):
                    continue
                if rule.action == STRICT_SSE_C:
                    plan.strict_sse_c = True  # decided on the answer: an event if it refuses
                    continue
                if rule.action == EXPIRED_TOKEN and not self._expired(i, operation, headers):
                    continue
                self._matched[i] += 1
                chance = self._rngs[i].random()  # one draw per match keeps sequences aligned
                if rule.occurrences is not None and self._matched[i] not in rule.occurrences:
                    continue
                if chance >= rule.probability:
                    continue
                if rule.action == DELAY:
                    plan.delay_s += rule.delay_ms / 1000
                elif rule.action == HOLD:
                    plan.hold = self._released
                elif rule.action == BANDWIDTH:
                    plan.rate = min(plan.rate or rule.bytes_per_s, rule.bytes_per_s)
                elif rule.action in TAMPERS:
                    plan.tampers.add(rule.action)
                    if rule.action == STUCK_LISTING:
                        plan.stuck_marker = rule.marker
                elif plan.failure is None:
                    plan.failure = rule
                else:
                    continue
                self._events.append(FaultEvent(operation, number, rule.action))
        return plan

    def _created(self, path: str, headers: Mapping[str, str]) -> None:
        with self._lock:
            if headers.get(SSE_C_HEADER) is not None:
                self._customer_keyed.add(path)
            else:
                self._customer_keyed.discard(path)

    def _misfit_sse_c(self, operation: str, number: int, path: str, headers) -> str | None:
        """S3's refusal of a read whose SSE-C headers do not fit the object, as an event."""
        keyed = headers.get(SSE_C_HEADER) is not None
        with self._lock:
            if keyed == (path in self._customer_keyed):
                return None
            self._events.append(FaultEvent(operation, number, STRICT_SSE_C))
        if keyed:
            return "The encryption parameters are not applicable to this object."
        return (
            "The object was stored using a form of Server Side Encryption. The correct "
            "parameters must be provided to retrieve the object."
        )

    def _expired(self, i: int, operation: str, headers: Mapping[str, str]) -> bool:
        """Is the request signed with the key of expire rule ``i``, and has the key expired?"""
        rule = self.rules[i]
        signed = _SIGNING_KEY.search(headers.get("authorization") or "")
        if signed is None or signed[1] != rule.access_key:
            return False
        if rule.operation in ("*", operation):
            self._uses[i] += 1
        return self._uses[i] > rule.valid_for

    def upstream_client(self):
        """A boto3 client on the upstream (credentials from the environment), made once."""
        with self._lock:
            if self._client is None:
                import boto3

                host, port = self.upstream
                self._client = boto3.client("s3", endpoint_url=f"http://{host}:{port}")
            return self._client

    # -- lifecycle --------------------------------------------------------------------------
    @property
    def endpoint(self) -> str:
        """The URL to give boto3 (option ``endpoint`` or ``AWS_ENDPOINT_URL``)."""
        if self._server is None:
            raise RuntimeError("the proxy is not running; call start() first")
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> FaultProxy:
        if self._server is not None:
            return self
        self._server = _Server(("127.0.0.1", self._port), _Handler)
        self._server.owner = self
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="s3commit-faultproxy", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.close_connections()
        server.server_close()
        if self._thread is not None:
            self._thread.join(10)
            self._thread = None

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    owner: FaultProxy

    def __init__(self, *args, **kwargs) -> None:
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()
        super().__init__(*args, **kwargs)

    def process_request(self, request, client_address) -> None:
        with self._connections_lock:
            self._connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request) -> None:
        with self._connections_lock:
            self._connections.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        """Wake handler threads parked on idle keep-alive connections so they end."""
        with self._connections_lock:
            connections = list(self._connections)
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)

    def handle_error(self, request, client_address) -> None:
        pass  # a client that went away mid-request is normal here


class _Throttle:
    """Sleeps so that bytes moved stay under ``rate`` bytes per second (0: no cap)."""

    def __init__(self, rate: int) -> None:
        self.rate = rate
        self.chunk = max(1024, rate // 20) if rate else 1 << 20
        self.started = time.monotonic()
        self.moved = 0

    def tick(self, n: int) -> None:
        self.moved += n
        if self.rate:
            ahead = self.moved / self.rate - (time.monotonic() - self.started)
            if ahead > 0:
                time.sleep(ahead)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, and "100 Continue" for botocore's Expect
    timeout = 120  # an idle client connection is dropped after this
    #: TCP_NODELAY: a response goes out as headers, then body; with Nagle's algorithm the body
    #: waited for the client's delayed ACK, about 40 ms added to every answer with a body
    disable_nagle_algorithm = True
    server: _Server

    def setup(self) -> None:
        super().setup()
        self._upstream: http.client.HTTPConnection | None = None

    def finish(self) -> None:
        if self._upstream is not None:
            self._upstream.close()
        super().finish()

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self._proxy()

    do_PUT = do_POST = do_DELETE = do_HEAD = do_GET

    def _proxy(self) -> None:
        proxy = self.server.owner
        split = urlsplit(self.path)
        query = parse_qs(split.query, keep_blank_values=True)
        operation = s3_operation(self.command, split.path, query, self.headers)
        plan = proxy._plan(operation, self.headers, self.path)
        throttle = _Throttle(plan.rate)
        body = self._read_body(throttle)
        if plan.delay_s or plan.hold is not None:
            time.sleep(plan.delay_s)
            if plan.hold is not None:
                plan.hold.wait(proxy.timeout)
            if self._client_gone():  # the caller died while held: its request never lands
                self.close_connection = True
                return
        failure = plan.failure
        if failure is not None and failure.action == IGNORE_DELETES:
            self._acknowledge_delete(body)
            return
        if failure is not None and failure.action == ACCESS_DENIED and operation == "DeleteObjects":
            self._deny_each_key(body)
            return
        if failure is not None and not failure.after:
            self._fail(failure)
            return
        if CORRUPT_BODY in plan.tampers and body:
            body = body[:-1] + bytes([body[-1] ^ 0xFF])
        if CHECK_CHECKSUMS in plan.tampers and (
            refusal := self._checksum_refusal(operation, split.path, query, body)
        ):
            self._error_reply(400, *refusal)
            return
        try:
            status, reason, headers, payload = self._forward(body)
        except OSError as exc:
            self._error_reply(502, "BadGateway", f"upstream unreachable: {exc}")
            return
        if failure is not None:
            self._fail(failure)
            return
        if operation in OBJECT_CREATING and status == 200:
            proxy._created(split.path, self.headers)
        if plan.strict_sse_c and status in (200, 206):
            misfit = proxy._misfit_sse_c(operation, plan.number, split.path, self.headers)
            if misfit is not None:
                self._error_reply(400, "InvalidRequest", escape(misfit))
                return
        if IGNORE_CONDITIONS in plan.tampers and status == 412:
            status, reason, payload = 200, "OK", b""
            headers = [("ETag", BOGUS_ETAG), ("Content-Length", "0")]
        if WRONG_ETAG in plan.tampers and status == 200:
            headers, payload = _with_bogus_etag(headers, payload)
        if STUCK_LISTING in plan.tampers and status == 200 and operation in NEXT_MARKERS:
            payload = _stuck_page(payload, NEXT_MARKERS[operation], plan.stuck_marker)
        if operation in COPIES and status == 200:
            copied = self._copy_size()
            proxy._count_copy(copied)
            throttle.tick(copied)  # a bandwidth rule paces server-side copies too
        self.send_response_only(status, reason)
        length = None
        for name, value in headers:
            if name.lower() == "content-length":
                length = value
            elif name.lower() not in _HOP_BY_HOP:
                self.send_header(name, value)
        no_body = self.command == "HEAD" or status in (204, 304)
        if not no_body or length is not None:
            self.send_header("Content-Length", length if no_body else str(len(payload)))
        self.end_headers()
        if not no_body:
            for start in range(0, len(payload), throttle.chunk):
                chunk = payload[start : start + throttle.chunk]
                self.wfile.write(chunk)
                throttle.tick(len(chunk))

    def _checksum_refusal(
        self, operation: str, path: str, query: Mapping[str, list[str]], body: bytes
    ) -> tuple[str, str] | None:
        """S3's error code and message for a request its checksums do not fit (see
        :func:`check_checksums`); None if they fit."""
        digest = _bad_digest(self.headers, body)
        if digest is not None:
            return "BadDigest", digest
        if operation != "CompleteMultipartUpload":
            return None
        bucket, _, key = unquote(path).lstrip("/").partition("/")
        upload_id = query["uploadId"][0]
        listed = self.server.owner.upstream_client().list_multipart_uploads(
            Bucket=bucket, Prefix=key
        )
        algorithm = next(
            (
                u.get("ChecksumAlgorithm")
                for u in listed.get("Uploads", [])
                if u["UploadId"] == upload_id
            ),
            None,
        )
        parts = re.findall(rb"<Part>.*?</Part>", body, flags=re.S)
        if not algorithm or all(f"<Checksum{algorithm}>".encode() in p for p in parts):
            return None
        return "InvalidRequest", (
            f"The upload was created using a {algorithm.lower()} checksum. The complete request "
            "must include the checksum for each part."
        )

    def _copy_size(self) -> int:
        """Bytes a successful copy moved: its range, or the size of the source object."""
        ranged = self.headers.get("x-amz-copy-source-range", "")
        if ranged.startswith("bytes="):
            first, last = ranged[len("bytes=") :].split("-")
            return int(last) - int(first) + 1
        source = unquote(self.headers.get("x-amz-copy-source", "").split("?", 1)[0])
        bucket, _, key = source.lstrip("/").partition("/")
        # a signed HEAD with this process's credentials: stores such as Ceph RGW check them
        reply = self.server.owner.upstream_client().head_object(Bucket=bucket, Key=key)
        return int(reply["ContentLength"])

    def _client_gone(self) -> bool:
        try:
            self.connection.setblocking(False)
            return self.connection.recv(1, socket.MSG_PEEK) == b""
        except BlockingIOError:
            return False
        except OSError:
            return True
        finally:
            with contextlib.suppress(OSError):
                self.connection.setblocking(True)

    def _read_body(self, throttle: _Throttle) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            data = bytearray()
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    return bytes(data)
                data += self.rfile.read(size)
                self.rfile.readline()
                throttle.tick(size)
        remaining = int(self.headers.get("Content-Length") or 0)
        data = bytearray()
        while remaining > 0:
            chunk = self.rfile.read(min(remaining, throttle.chunk))
            if not chunk:
                raise ConnectionError("client closed the connection mid-body")
            data += chunk
            remaining -= len(chunk)
            throttle.tick(len(chunk))
        return bytes(data)

    def _forward(self, body: bytes) -> tuple[int, str, list[tuple[str, str]], bytes]:
        """Send the request upstream on this connection's upstream socket, reconnecting once."""
        headers = [(k, v) for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP]
        if body or self.command in ("PUT", "POST"):
            headers.append(("Content-Length", str(len(body))))
        for attempt in (1, 2):
            reused = self._upstream is not None
            if self._upstream is None:
                host, port = self.server.owner.upstream
                self._upstream = http.client.HTTPConnection(
                    host, port, timeout=self.server.owner.timeout
                )
            conn = self._upstream
            try:
                conn.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
                for name, value in headers:
                    conn.putheader(name, value)
                conn.endheaders(body or None)
                response = conn.getresponse()
                payload = response.read()
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                conn.close()
                self._upstream = None
                if reused and attempt == 1:
                    continue  # the upstream closed an idle keep-alive connection
                raise
            if response.will_close:
                conn.close()
                self._upstream = None
            return response.status, response.reason, response.getheaders(), payload
        raise AssertionError("unreachable")

    def _fail(self, fault: Fault) -> None:
        if fault.action == RESET:
            self.close_connection = True
            linger = struct.pack("ii", 1, 0)  # close with RST, not FIN
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger)
            self.connection.close()
            return
        status, code, message = _ERRORS[fault.action]
        shown = message.format(header=fault.header, value=fault.value)
        self._error_reply(status, code, escape(shown))

    def _acknowledge_delete(self, body: bytes) -> None:
        if self.command != "POST":  # DeleteObject
            self.send_response_only(204)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self._delete_result(
            b"<Deleted>" + key + b"</Deleted>"
            for key in re.findall(rb"<Key>.*?</Key>", body, flags=re.S)
        )

    def _deny_each_key(self, body: bytes) -> None:
        self._delete_result(
            b"<Error>" + key + b"<Code>AccessDenied</Code><Message>Access Denied</Message></Error>"
            for key in re.findall(rb"<Key>.*?</Key>", body, flags=re.S)
        )

    def _delete_result(self, entries: Iterable[bytes]) -> None:
        """A ``DeleteObjects`` answer of these ``<Deleted>`` / ``<Error>`` entries."""
        reply = (
            b'<?xml version="1.0" encoding="UTF-8"?>\n'
            b'<DeleteResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
            + b"".join(entries)
            + b"</DeleteResult>"
        )
        self.send_response_only(200)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def _error_reply(self, status: int, code: str, message: str) -> None:
        request_id = uuid.uuid4().hex[:16].upper()
        body = (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            f"<Error><Code>{code}</Code><Message>{message}</Message>"
            f"<Resource>{escape(urlsplit(self.path).path)}</Resource>"
            f"<RequestId>{request_id}</RequestId><HostId>faultproxy</HostId></Error>"
        ).encode()
        self.send_response_only(status)
        self.send_header("Content-Type", "application/xml")
        self.send_header("x-amz-request-id", request_id)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)


def _bad_digest(headers: Mapping[str, str], body: bytes) -> str | None:
    """S3's message for a body that its ``x-amz-checksum-*`` header does not describe."""
    for algorithm in checksums.COMPOSITE:
        sent = headers.get(f"x-amz-checksum-{algorithm.lower()}")
        if sent is not None and sent != checksums.checksum(algorithm, body):
            return f"The {algorithm} you specified did not match the calculated checksum."
    return None


def _carries_checksum(headers: Mapping[str, str]) -> bool:
    """A request names a checksum algorithm or carries a checksum (not: asks for one back)."""
    return any(
        name.lower().startswith(("x-amz-checksum-", "x-amz-sdk-checksum-"))
        and name.lower() != "x-amz-checksum-mode"
        for name in headers
    )


def _has_header(headers: Mapping[str, str], rule: Fault) -> bool:
    """Does a request satisfy a require-header rule (present, and equal to its value if any)?"""
    found = headers.get(rule.header)
    return found is not None and (not rule.value or found == rule.value)


#: the access key id in a signature version 4 ``Authorization`` header
_SIGNING_KEY = re.compile(r"Credential=([^/,\s]+)/")


def _with_bogus_etag(
    headers: list[tuple[str, str]], payload: bytes
) -> tuple[list[tuple[str, str]], bytes]:
    headers = [(k, BOGUS_ETAG if k.lower() == "etag" else v) for k, v in headers]
    bogus = BOGUS_ETAG.replace('"', "&quot;").encode()
    return headers, re.sub(
        rb"<ETag>.*?</ETag>", b"<ETag>" + bogus + b"</ETag>", payload, flags=re.S
    )


def _stuck_page(payload: bytes, markers: tuple[str, ...], marker: str) -> bytes:
    """A listing's answer made truncated, every next marker set to ``marker`` (or removed)."""
    for name in ("IsTruncated", *markers):
        tag = name.encode()
        payload = re.sub(rb"<%s\s*/>|<%s>.*?</%s>" % (tag, tag, tag), b"", payload, flags=re.S)
    added = "<IsTruncated>true</IsTruncated>" + "".join(
        f"<{name}>{escape(marker)}</{name}>" for name in markers if marker
    )
    # into the root element: the first tag that is no XML declaration
    return re.sub(rb"(<[^?!][^>]*>)", lambda m: m[1] + added.encode(), payload, count=1)
