"""Commit metadata as JSON: ``.pendingset`` (of Hadoop's ``.pending`` entries), the commit
journal, task manifests, the rename committers' task-commit payloads and ``_SUCCESS``.

Each is a dataclass; code reads its attributes, never the JSON. Field names follow Hadoop's
S3A ``SinglePendingCommit`` / ``PendingSet`` / ``SuccessData`` and the manifest committer's
``TaskManifest`` so their readers understand ours; loading validates strictly (a fault is a
``PendingSetError``), because a tampered pendingset must never complete an upload outside the
job.
"""

from __future__ import annotations

import copy
import json
import socket
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any
from urllib.parse import quote, unquote

from . import checksums
from .errors import InvalidPathError, PendingSetError
from .layout import SUCCESS_FILES_NAME
from .paths import FsLocation, S3Location, parse_destination

PENDING_VERSION = 2
PENDINGSET_VERSION = 2
SUCCESS_NAME = "org.apache.hadoop.fs.s3a.commit.files.SuccessData/1"
SUCCESS_FILENAMES_CAP = 100  # Hadoop's cap on ``filenames``
#: ``files`` of ``_SUCCESS`` lists at most this many entries; a job with more writes the whole
#: list to ``layout.SUCCESS_FILES_NAME`` beside it, so ``_SUCCESS`` stays small at any job size
SUCCESS_FILES_CAP = 1000
SUCCESS_FILES_HEADER = "s3commit_sdk.SuccessFiles/1"


def _require(condition: bool, what: str) -> None:
    if not condition:
        raise PendingSetError(what)


@dataclass(slots=True)  # a job commit holds one per file: 100,000 of them, without __dict__
class PendingUpload:
    """One uncompleted multipart upload of one output file (Hadoop's ``.pending``)."""

    uri: str
    bucket: str
    destinationKey: str
    uploadId: str
    etags: list[str]
    length: int
    rows: int
    partition: dict[str, Any]
    jobId: str
    taskId: str
    created: int = field(default_factory=lambda: int(time.time() * 1000))
    version: int = PENDING_VERSION
    #: Hadoop's ``extraData``: what a table format needs of the file (Delta: its statistics)
    extraData: dict[str, str] = field(default_factory=dict)
    #: the upload's ``checksum.algorithm`` and each part's checksum (base64), kept with its
    #: ETag as Hadoop's newer pending files do ("S3A Committers: Architecture and
    #: Implementation"): the completion must repeat them; None and [] without checksums
    checksumAlgorithm: str | None = None
    checksums: list[str] = field(default_factory=list)

    def record_parts(self, parts: Sequence[Any], algorithm: str | None) -> None:
        """Keep the uploaded parts (``PartInfo``: ``etag``, ``checksum``), in part order."""
        self.etags = [part.etag for part in parts]
        self.checksumAlgorithm = algorithm
        self.checksums = [part.checksum for part in parts] if algorithm else []

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    def validate(self, job_id: str, bucket: str, dir_prefix: str) -> None:
        key = self.destinationKey
        _require(self.version == PENDING_VERSION, f"unknown .pending version {self.version!r}")
        _require(bool(self.uploadId), f"upload of {key!r} has no upload id")
        _require(self.jobId == job_id, f"upload of {key!r} belongs to job {self.jobId!r}")
        _require(self.bucket == bucket, f"upload of {key!r} targets bucket {self.bucket!r}")
        _require(
            isinstance(key, str) and key.startswith(dir_prefix) and len(key) > len(dir_prefix),
            f"upload key {key!r} does not lie under the destination {dir_prefix!r}",
        )
        _require(".." not in key.split("/"), f"upload key {key!r} contains '..'")
        _require(isinstance(self.length, int) and self.length >= 0, f"bad length for {key!r}")
        _require(isinstance(self.rows, int) and self.rows >= 0, f"bad row count for {key!r}")
        _require(
            isinstance(self.etags, list)
            and len(self.etags) >= 1
            and all(isinstance(e, str) and e for e in self.etags),
            f"upload of {key!r} has an empty or missing part ETag",
        )
        self._validate_checksums()
        _require(
            isinstance(self.extraData, dict)
            and all(isinstance(k, str) and isinstance(v, str) for k, v in self.extraData.items()),
            f"upload of {key!r} has malformed extraData",
        )

    def _validate_checksums(self) -> None:
        """No algorithm and no checksums, or one well-formed checksum of a known algorithm
        per part ETag."""
        key, algorithm = self.destinationKey, self.checksumAlgorithm
        if algorithm is None:
            _require(self.checksums == [], f"upload of {key!r} has checksums but no algorithm")
            return
        _require(
            isinstance(algorithm, str) and algorithm in checksums.DIGEST_SIZES,
            f"upload of {key!r} has an unknown checksum algorithm {algorithm!r:.40}",
        )
        _require(
            isinstance(self.checksums, list)
            and len(self.checksums) == len(self.etags)
            and all(checksums.well_formed(algorithm, c) for c in self.checksums),
            f"upload of {key!r} needs one {algorithm} checksum per part ETag",
        )


@dataclass
class PendingSet:
    """Every pending upload of one task attempt (Hadoop's ``.pendingset``)."""

    jobId: str
    taskId: str
    taskAttemptId: str
    commits: list[PendingUpload]
    iostatistics: dict[str, Any] = field(default_factory=dict)
    version: int = PENDINGSET_VERSION
    retries: dict[str, int] = field(default_factory=dict)  # the attempt's retries, by reason

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, text: str | bytes) -> PendingSet:
        """A saved pendingset, also one an earlier version saved (``_FORMER_PENDINGSET_FIELDS``)."""
        return _with_commits(cls, text, "pendingset", ignored=_FORMER_PENDINGSET_FIELDS)

    @classmethod
    def from_dict(cls, raw: Any) -> PendingSet:
        """From a decoded task commit's payload."""
        return _commits_from(cls, raw, "pendingset")

    def validate(self, job_id: str, bucket: str, dir_prefix: str) -> None:
        _require(self.version == PENDINGSET_VERSION, f"unknown pendingset version {self.version!r}")
        _require(self.jobId == job_id, f"pendingset belongs to job {self.jobId!r}, not {job_id!r}")
        keys = set()
        for commit in self.commits:
            commit.validate(job_id, bucket, dir_prefix)
            _require(
                commit.destinationKey not in keys,
                f"two uploads in one pendingset target {commit.destinationKey!r}",
            )
            keys.add(commit.destinationKey)


def _with_commits(cls, text: str | bytes, what: str, ignored: tuple[str, ...] = ()):
    """Parse a document holding a ``commits`` list; any structural fault is a typed error."""
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise PendingSetError(f"malformed {what}: {exc}") from exc
    if isinstance(raw, dict):
        raw = {k: v for k, v in raw.items() if k not in ignored}
    return _commits_from(cls, raw, what)


#: fields the task runner once stamped into saved pendingsets (now in ``TaskSummary``): an
#: older job's metadata still carries them, and ``s3commit recover`` must still read it
_FORMER_PENDINGSET_FIELDS = (
    "taskDurationSeconds",
    "taskWriteSeconds",
    "taskFiles",
    "taskBytes",
    "taskRows",
)


def _commits_from(cls, raw: Any, what: str):
    try:
        _require(isinstance(raw, dict), f"a {what} must be a JSON object")
        fields = dict(raw)
        commits = [PendingUpload(**c) for c in fields.pop("commits")]
        return cls(commits=commits, **fields)
    except PendingSetError:
        raise
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise PendingSetError(f"malformed {what}: {exc}") from exc


def iostatistics(counters: dict[str, int]) -> dict[str, Any]:
    """Hadoop's IOStatistics shape with only counters filled in."""
    return {
        "counters": dict(counters),
        "gauges": {},
        "minimums": {},
        "maximums": {},
        "meanstatistics": {},
    }


@dataclass(frozen=True, slots=True)  # one per file in every outcome: no __dict__
class CommittedFile:
    """One file a job committed: its full URL, store key, size, rows, partition values, ETag,
    the id of the task that wrote it and, with ``checksum.algorithm``, its stored checksum."""

    path: str
    key: str
    size: int
    rows: int
    partition: dict[str, str | None]
    etag: str
    task: str = ""
    #: the object's checksum as the store keeps it (``<base64>-<parts>``: composite) and its
    #: algorithm; None without checksums (``checksumAlgorithm`` / ``checksum`` in ``_SUCCESS``)
    checksum_algorithm: str | None = None
    checksum: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The ``_SUCCESS`` ``files`` entry: every field but ``path`` (the destination and the
        key give it back); the checksum only where there is one."""
        entry = {
            "key": self.key,
            "size": self.size,
            "rows": self.rows,
            "partition": dict(self.partition),
            "etag": self.etag,
            "task": self.task,
        }
        if self.checksum_algorithm:
            entry |= {"checksumAlgorithm": self.checksum_algorithm, "checksum": self.checksum}
        return entry

    def __getitem__(self, name: str) -> Any:
        """The fields by name, as the ``files`` entries of ``_SUCCESS`` (and of the job outcome
        before it was typed) are read: ``f["rows"]``."""
        if name in _FILE_CHECKSUM_KEYS:
            return getattr(self, _FILE_CHECKSUM_KEYS[name])
        if name not in _FILE_KEYS and name != "path":
            raise KeyError(name)
        return getattr(self, name)

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any], location: S3Location | FsLocation) -> CommittedFile:
        """A ``files`` entry of ``_SUCCESS`` at ``location``; a malformed one is a typed error."""
        _require(
            isinstance(raw, Mapping)
            and set(raw) in (_FILE_KEYS, _FILE_KEYS | set(_FILE_CHECKSUM_KEYS)),
            f"a _SUCCESS files entry needs exactly {sorted(_FILE_KEYS)}, and optionally "
            f"{sorted(_FILE_CHECKSUM_KEYS)}: {raw!r:.200}",
        )
        key = raw["key"]
        _require(isinstance(key, str) and bool(key), f"a _SUCCESS file has a bad key {key!r}")
        for name, check in (
            ("size", _is_count),
            ("rows", _is_count),
            ("partition", _is_partition),
            ("etag", _is_str),
            ("task", _is_str),
            (
                "checksumAlgorithm",
                lambda v: v is None or (_is_str(v) and v in checksums.DIGEST_SIZES),
            ),
            ("checksum", lambda v: v is None or _is_str(v)),
        ):
            value = raw.get(name)
            _require(check(value), f"_SUCCESS file {key!r} has a bad {name} {value!r:.80}")
        return cls(
            path=location.url(key),
            key=key,
            size=raw["size"],
            rows=raw["rows"],
            partition=dict(raw["partition"]),
            etag=raw["etag"],
            task=raw["task"],
            checksum_algorithm=raw.get("checksumAlgorithm"),
            checksum=raw.get("checksum"),
        )


_FILE_KEYS = {"key", "size", "rows", "partition", "etag", "task"}
#: the optional keys of a ``files`` entry, by the field that holds each
_FILE_CHECKSUM_KEYS = {"checksumAlgorithm": "checksum_algorithm", "checksum": "checksum"}


def _is_str(value: Any) -> bool:
    return isinstance(value, str)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_count(value: Any) -> bool:
    return _is_int(value) and value >= 0


def _is_number(value: Any) -> bool:
    return _is_int(value) or isinstance(value, float)


def _is_partition(value: Any) -> bool:
    return _map_of(lambda v: v is None or isinstance(v, str))(value)


def _list_of(check: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda value: isinstance(value, list) and all(check(v) for v in value)


def _map_of(check: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda value: (
        isinstance(value, dict) and all(isinstance(k, str) and check(v) for k, v in value.items())
    )


#: The ``_SUCCESS`` keys after ``name``, in the order written (Hadoop's SuccessData fields,
#: then ours), each with its attribute on :class:`SuccessDocument` and the check of its shape.
_SUCCESS_FIELDS: tuple[tuple[str, str, Callable[[Any], bool]], ...] = (
    ("timestamp", "timestamp", _is_int),
    ("date", "date", _is_str),
    ("hostname", "hostname", _is_str),
    ("committer", "committer", _is_str),
    ("description", "description", _is_str),
    ("jobId", "job_id", _is_str),
    ("jobIdSource", "job_id_source", _is_str),
    ("filenames", "filenames", _list_of(_is_str)),
    ("metrics", "metrics", _map_of(_is_int)),
    ("diagnostics", "diagnostics", _map_of(_is_str)),
    ("iostatistics", "iostatistics", _map_of(lambda v: isinstance(v, dict))),
    ("success", "success", lambda v: isinstance(v, bool)),
    ("destination", "destination", _is_str),
    ("conflictMode", "conflict_mode", _is_str),
    ("format", "format", _is_str),
    ("partitionBy", "partition_by", _list_of(_is_str)),
    ("files", "files", lambda v: isinstance(v, list)),  # entries: CommittedFile.from_dict
    ("partitions", "partitions", _list_of(_is_str)),
    ("replacedObjects", "replaced_objects", _is_count),
    ("rows", "rows", _is_count),
    ("bytes", "bytes", _is_count),
    ("bytesUploaded", "bytes_uploaded", _is_count),
    ("durations", "durations", _map_of(_is_number)),
    ("taskDurations", "task_durations", _map_of(_is_number)),
    ("requests", "requests", _map_of(_is_int)),
    ("retries", "retries", _map_of(_is_int)),
    ("completionChecks", "completion_checks", _map_of(_is_int)),
)
_SUCCESS_ATTRS = {key: attr for key, attr, _ in _SUCCESS_FIELDS}
#: written when known, absent from documents of older versions and of recovered commits:
#: the data files' columns, as Spark's JSON schema (``StructType.jsonValue``)
_SUCCESS_SCHEMA = "schema"
#: written by every job of this version, absent from older documents: the job's request options
#: as ``RequestOptions.recorded()`` shows them (an SSE-C key by its MD5 only)
_SUCCESS_REQUEST_OPTIONS = "requestOptions"
#: written by every job of this version: how many files the job committed (``files`` may list
#: fewer) and, past :data:`SUCCESS_FILES_CAP`, the name of the object listing them all
_SUCCESS_FILE_COUNT = "fileCount"
_SUCCESS_FILES_MANIFEST = "filesManifest"
_SUCCESS_OPTIONAL = (
    _SUCCESS_SCHEMA,
    _SUCCESS_REQUEST_OPTIONS,
    _SUCCESS_FILE_COUNT,
    _SUCCESS_FILES_MANIFEST,
)


@dataclass
class SuccessDocument(Mapping[str, Any]):
    """The ``_SUCCESS`` JSON every committer writes, typed: Hadoop's SuccessData fields
    ("Committing work to S3 with the S3A Committers") then ours; Hadoop ignores the extras.

    ``name`` is always :data:`SUCCESS_NAME`. ``table`` holds the fields a table format adds
    at the top level (Delta: ``deltaVersion``, ``deltaRemovedFiles``). As a ``Mapping`` the
    document is its JSON view: ``doc["jobId"]`` is ``to_dict()["jobId"]``, for code written
    when ``_SUCCESS`` was a dict; new code reads the attributes.
    """

    timestamp: int  # milliseconds since the epoch
    date: str
    hostname: str
    committer: str
    description: str
    job_id: str
    job_id_source: str
    filenames: list[str]  # the first SUCCESS_FILENAMES_CAP files, as "/key"
    metrics: dict[str, int]
    diagnostics: dict[str, str]
    iostatistics: dict[str, Any]  # Hadoop's IOStatistics shape, counters only
    destination: str
    conflict_mode: str
    format: str
    partition_by: list[str]
    files: list[CommittedFile]  # the first SUCCESS_FILES_CAP, or all once read in full
    partitions: list[str]
    replaced_objects: int
    rows: int
    bytes: int
    bytes_uploaded: int
    durations: dict[str, float]  # seconds per phase
    task_durations: dict[str, float]  # seconds per committed task
    requests: dict[str, int]  # HTTP requests (or store calls) by operation
    retries: dict[str, int]  # retries by reason
    completion_checks: dict[str, int]
    success: bool = True
    table: dict[str, Any] = field(default_factory=dict)
    #: the data files' columns (partition columns excluded) as Spark's JSON schema; None in
    #: documents that do not record it (older versions, recovered commits)
    schema: dict[str, Any] | None = None
    #: encryption, storage class, ACL, requester pays, checksum algorithm of the job's
    #: requests (``encryption.algorithm``: ``aws:kms``, ...); None in older documents
    request_options: dict[str, str] | None = None
    #: files the job committed; None in older documents (``files`` lists them all there)
    file_count: int | None = None
    #: the object beside ``_SUCCESS`` listing every file, when ``files`` is cut short
    files_manifest: str | None = None

    def __post_init__(self) -> None:
        ours = {"name", *_SUCCESS_OPTIONAL, *_SUCCESS_ATTRS}
        shadowed = sorted(set(self.table) & ours)
        if shadowed:
            raise ValueError(f"table fields {shadowed} would replace _SUCCESS fields")

    def to_dict(self) -> dict[str, Any]:
        """The JSON document, keys in the order written."""
        return {key: self[key] for key in self}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False)

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> SuccessDocument:
        """A parsed ``_SUCCESS``; any key missing or of the wrong shape is a typed error.

        Keys beyond ours are a table format's (:attr:`table`), kept as they are; ``schema``
        alone may be absent (documents of older versions lack it).
        """
        _require(
            isinstance(raw, Mapping) and raw.get("name") == SUCCESS_NAME,
            "_SUCCESS is not a SuccessData JSON document",
        )
        missing = [key for key in _SUCCESS_ATTRS if key not in raw]
        _require(not missing, f"_SUCCESS lacks {', '.join(missing)}: not written by s3commit_sdk")
        for key, _, check in _SUCCESS_FIELDS:
            _require(check(raw[key]), f"_SUCCESS has a malformed {key}: {raw[key]!r:.200}")
        try:
            location = parse_destination(raw["destination"])
        except InvalidPathError as exc:
            raise PendingSetError(f"_SUCCESS names a bad destination: {exc}") from exc
        values = {a: copy.deepcopy(raw[k]) for k, a in _SUCCESS_ATTRS.items() if k != "files"}
        values["files"] = [CommittedFile.from_dict(f, location) for f in raw["files"]]
        schema = raw.get(_SUCCESS_SCHEMA)
        _require(
            schema is None or (isinstance(schema, dict) and schema.get("type") == "struct"),
            f"_SUCCESS has a malformed {_SUCCESS_SCHEMA}: {schema!r:.200}",
        )
        requests = raw.get(_SUCCESS_REQUEST_OPTIONS)
        _require(
            requests is None or _map_of(_is_str)(requests),
            f"_SUCCESS has malformed {_SUCCESS_REQUEST_OPTIONS}: {requests!r:.200}",
        )
        count, manifest = raw.get(_SUCCESS_FILE_COUNT), raw.get(_SUCCESS_FILES_MANIFEST)
        listed = len(values["files"])
        _require(
            count is None or (_is_count(count) and count >= listed),
            f"_SUCCESS has a malformed {_SUCCESS_FILE_COUNT}: {count!r:.200}",
        )
        # only the fixed name beside _SUCCESS: a crafted document must not send readers elsewhere
        cut_short = count not in (None, listed)
        _require(
            manifest in (None, SUCCESS_FILES_NAME) and (manifest is not None) == cut_short,
            f"_SUCCESS has a malformed {_SUCCESS_FILES_MANIFEST}: {manifest!r:.200}",
        )
        ours = {"name", *_SUCCESS_OPTIONAL, *_SUCCESS_ATTRS}
        table = {k: copy.deepcopy(v) for k, v in raw.items() if k not in ours}
        return cls(
            **values,
            table=table,
            schema=copy.deepcopy(schema),
            request_options=None if requests is None else dict(requests),
            file_count=count,
            files_manifest=manifest,
        )

    @property
    def file_total(self) -> int:
        """How many files the job committed, whether or not ``files`` lists them all."""
        return len(self.files) if self.file_count is None else self.file_count

    def with_all_files(self, manifest: bytes) -> SuccessDocument:
        """This document with ``files`` read from its :attr:`files_manifest`; the manifest
        must be this job's and hold :attr:`file_total` entries (a later job's replaced it)."""
        location = parse_destination(self.destination)
        lines = manifest.splitlines()
        try:
            header = json.loads(lines[0]) if lines else None
            entries = [json.loads(line) for line in lines[1:]]
        except ValueError as exc:
            raise PendingSetError(f"{SUCCESS_FILES_NAME} is not JSON lines: {exc}") from exc
        _require(
            isinstance(header, dict)
            and header.get("name") == SUCCESS_FILES_HEADER
            and header.get("jobId") == self.job_id
            and len(entries) == self.file_total,
            f"{SUCCESS_FILES_NAME} does not list the {self.file_total} files of job "
            f"{self.job_id} (another job committed since _SUCCESS was read: read it again)",
        )
        files = [CommittedFile.from_dict(entry, location) for entry in entries]
        return replace(self, files=files)

    def files_manifest_body(self, files: Sequence[CommittedFile]) -> bytearray:
        """The manifest of ``files`` (all of this job's): a header line, then one entry a line."""
        header = {"name": SUCCESS_FILES_HEADER, "jobId": self.job_id, "files": len(files)}
        body = bytearray(json.dumps(header).encode() + b"\n")
        for entry in files:  # a line at a time: never every entry as text at once
            body += json.dumps(entry.to_dict(), ensure_ascii=False).encode() + b"\n"
        return body

    # -- the JSON view ---------------------------------------------------------------------------
    def __getitem__(self, key: str) -> Any:
        """The value ``to_dict()`` has under ``key`` (a copy: changing it changes nothing)."""
        if key == "name":
            return SUCCESS_NAME
        if key == _SUCCESS_SCHEMA and self.schema is not None:
            return copy.deepcopy(self.schema)
        if key == _SUCCESS_REQUEST_OPTIONS and self.request_options is not None:
            return dict(self.request_options)
        if key == _SUCCESS_FILE_COUNT and self.file_count is not None:
            return self.file_count
        if key == _SUCCESS_FILES_MANIFEST and self.files_manifest is not None:
            return self.files_manifest
        attr = _SUCCESS_ATTRS.get(key)
        if attr is None:
            return copy.deepcopy(self.table[key])
        if attr == "files":
            return [f.to_dict() for f in self.files]
        return copy.deepcopy(getattr(self, attr))

    def __iter__(self) -> Iterator[str]:
        yield "name"
        yield from _SUCCESS_ATTRS
        if self.schema is not None:
            yield _SUCCESS_SCHEMA
        if self.request_options is not None:
            yield _SUCCESS_REQUEST_OPTIONS
        if self.file_count is not None:
            yield _SUCCESS_FILE_COUNT
        if self.files_manifest is not None:
            yield _SUCCESS_FILES_MANIFEST
        yield from self.table

    def __len__(self) -> int:
        optional = sum(
            value is not None
            for value in (self.schema, self.request_options, self.file_count, self.files_manifest)
        )
        return 1 + len(_SUCCESS_ATTRS) + optional + len(self.table)


def read_pendingset(body: bytes) -> PendingSet | None:
    """A saved ``.pendingset``; None if unreadable (its uploads are still found by the listing
    of the job's pending uploads)."""
    try:
        return PendingSet.from_json(body)
    except (PendingSetError, ValueError, TypeError):
        return None


def parse_success(body: bytes) -> SuccessDocument | None:
    """The parsed ``_SUCCESS``; None for the 0-byte marker of the classic committer."""
    if not body.strip():
        return None
    try:
        raw = json.loads(body)
    except ValueError as exc:
        raise PendingSetError(f"_SUCCESS is not valid JSON: {exc}") from exc
    return SuccessDocument.from_dict(raw)


JOURNAL_VERSION = 1


@dataclass
class Journal:
    """Everything a job commit will do, written before it does any of it (DESIGN section 4).

    A commit killed halfway is rolled forward or back from this alone, idempotently.
    """

    jobId: str
    destination: str
    bucket: str
    committer: str
    conflictMode: str
    format: str
    partitionBy: list[str]
    markSuccess: bool
    commits: list[PendingUpload]
    replaced: list[str]
    options: dict[str, Any] = field(default_factory=dict)
    created: int = field(default_factory=lambda: int(time.time() * 1000))
    version: int = JOURNAL_VERSION
    #: what a table format needs to finish the job (Delta: schema and read version)
    extraData: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        return self.encoded().decode()

    def encoded(self) -> bytearray:
        """The JSON, encoded one upload at a time: at 100,000 files the journal never exists
        as dicts (``asdict``) or as text, only once, as the bytes written (a ``bytearray``
        the store sends as it is, not copied into ``bytes``)."""
        head = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "commits"}
        body = bytearray(json.dumps(head, ensure_ascii=False)[:-1].encode())
        body += b', "commits": ['
        for index, commit in enumerate(self.commits):
            body += b"," if index else b""
            body += json.dumps(asdict(commit), ensure_ascii=False).encode()
        body += b"]}"
        return body

    @classmethod
    def from_json(cls, text: str | bytes) -> Journal:
        """Parsed, its shape checked; whether recovery may act on it is ``journal_trust``'s
        question (every key the job's own, its marker held)."""
        return _with_commits(cls, text, "commit journal")


@dataclass
class CommitMarker:
    """The per-destination marker created with ``If-None-Match: *``: one commit at a time."""

    jobId: str
    journal: str
    hostname: str = field(default_factory=socket.gethostname)
    started: int = field(default_factory=lambda: int(time.time() * 1000))

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str | bytes) -> CommitMarker:
        try:
            raw = json.loads(text)
            _require(isinstance(raw, dict), "a commit marker must be a JSON object")
            return cls(**raw)
        except PendingSetError:
            raise
        except (ValueError, TypeError) as exc:
            raise PendingSetError(f"malformed commit marker: {exc}") from exc


TASK_MANIFEST_TYPE = (
    "org.apache.hadoop.mapreduce.lib.output.committer.manifest.files.TaskManifest/1"
)


@dataclass(frozen=True)
class ManifestFile:
    """One file of a task manifest: where the task wrote it, where job commit renames it, its
    size, and the rows and partition values ``_SUCCESS`` reports (kept in ``extraData``)."""

    source: str
    destination: str
    size: int
    rows: int = 0
    partition: dict[str, str | None] = field(default_factory=dict)


@dataclass(frozen=True)
class ManifestDirectory:
    """A directory job commit creates before renaming into it: its path, status and depth."""

    path: str
    status: int
    depth: int


@dataclass
class TaskManifest:
    """A manifest committer task manifest ("Manifest Committer Protocol", TaskManifest).

    In the JSON, ``files`` entries are ``s`` source URI, ``d`` destination URI, ``z`` size,
    ``e`` etag; ``directories`` entries ``d`` URI, ``t`` status, ``l`` depth; URIs are
    percent-encoded. ``extraData`` maps a file's encoded destination to its rows and partition.
    Here the paths are plain.
    """

    job_id: str
    task_id: str
    attempt_id: str
    attempt_dir: str
    files: list[ManifestFile]
    directories: list[ManifestDirectory]
    counters: dict[str, int]  # the task's store requests, by operation

    def to_json(self) -> str:
        return json.dumps(
            {
                "type": TASK_MANIFEST_TYPE,
                "version": 1,
                "jobId": self.job_id,
                "jobAttemptNumber": 0,
                "taskID": self.task_id,
                "taskAttemptID": self.attempt_id,
                "taskAttemptDir": quote(self.attempt_dir),
                "files": [
                    {"s": quote(f.source), "d": quote(f.destination), "z": f.size, "e": None}
                    for f in self.files
                ],
                "directories": [
                    {"d": quote(d.path), "t": d.status, "l": d.depth} for d in self.directories
                ],
                "extraData": {
                    quote(f.destination): {"rows": f.rows, "partition": f.partition}
                    for f in self.files
                },
                "iostatistics": iostatistics(self.counters),
            }
        )

    @classmethod
    def from_json(cls, body: bytes, job_id: str) -> TaskManifest:
        """A saved manifest of job ``job_id``; any fault of shape or ownership is a typed error."""
        try:
            doc = json.loads(body)
        except ValueError as exc:
            raise PendingSetError(f"malformed task manifest: {exc}") from exc
        _require(isinstance(doc, dict), "a task manifest must be a JSON object")
        kind, version = doc.get("type"), doc.get("version")
        _require(kind == TASK_MANIFEST_TYPE, f"not a task manifest: {kind!r}")
        _require(version == 1, f"unknown task manifest version {version!r}")
        _require(doc.get("jobId") == job_id, f"task manifest of job {doc.get('jobId')!r}")
        try:
            extra = doc["extraData"]
            files = [_manifest_file(f, extra.get(f["d"], {})) for f in doc["files"]]
            directories = [
                ManifestDirectory(
                    unquote(_checked(d["d"], _is_str)),
                    _checked(d["t"], _is_int),
                    _checked(d["l"], _is_int),
                )
                for d in doc["directories"]
            ]
            manifest = cls(
                job_id,
                _checked(doc["taskID"], _is_str),
                _checked(doc["taskAttemptID"], _is_str),
                unquote(_checked(doc["taskAttemptDir"], _is_str)),
                files,
                directories,
                _checked(doc["iostatistics"]["counters"], _map_of(_is_int)),
            )
        except (TypeError, KeyError, AttributeError) as exc:
            raise PendingSetError(f"malformed task manifest: {exc!r}") from exc
        destinations = [f.destination for f in files]
        _require(
            len(destinations) == len(set(destinations)), "duplicate destinations in a manifest"
        )
        return manifest


def _manifest_file(entry: dict[str, Any], info: dict[str, Any]) -> ManifestFile:
    """A manifest's ``files`` entry with its ``extraData`` (rows, partition)."""
    return ManifestFile(
        unquote(_checked(entry["s"], _is_str)),
        unquote(_checked(entry["d"], _is_str)),
        _checked(entry["z"], _is_count),
        _checked(info.get("rows", 0), _is_count),
        _checked(info.get("partition", {}), _is_partition),
    )


def _checked(value: Any, check: Callable[[Any], bool]) -> Any:
    """``value`` if it passes ``check``; else a ``TypeError`` (a malformed document)."""
    if not check(value):
        raise TypeError(f"unexpected value {value!r:.200}")
    return value


@dataclass(frozen=True)
class ManifestPayload:
    """The manifest committer's task-commit payload: the store path of the attempt's saved
    task manifest (job commit loads that one, never a losing attempt's)."""

    manifest: str

    def to_dict(self) -> dict[str, Any]:
        return {"manifest": self.manifest}

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> ManifestPayload:
        _require(
            isinstance(raw, Mapping) and set(raw) == {"manifest"} and _is_str(raw["manifest"]),
            f"a manifest task payload is {{'manifest': path}}, not {raw!r:.200}",
        )
        return cls(raw["manifest"])


@dataclass(frozen=True)
class TaskFile:
    """A file a task attempt wrote: path relative to the destination, rows, size, partition."""

    relpath: str
    rows: int
    size: int
    partition: dict[str, str | None]


@dataclass(frozen=True)
class ClassicPayload:
    """The classic (``file``) committer's task-commit payload: the attempt's files, which job
    commit merges (v1) or reports (v2), and the store requests the attempt made."""

    files: list[TaskFile]
    requests: dict[str, int]

    def to_dict(self) -> dict[str, Any]:
        """Files as ``[relpath, rows, size, partition]`` rows: the message stays small."""
        return {
            "files": [[f.relpath, f.rows, f.size, f.partition] for f in self.files],
            "requests": dict(self.requests),
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> ClassicPayload:
        try:
            _require(isinstance(raw, Mapping) and set(raw) == {"files", "requests"}, "bad keys")
            files = [
                TaskFile(
                    _checked(relpath, lambda v: _is_str(v) and bool(v)),
                    _checked(rows, _is_count),
                    _checked(size, _is_count),
                    dict(_checked(partition, _is_partition)),
                )
                for relpath, rows, size, partition in raw["files"]
            ]
            return cls(files, dict(_checked(raw["requests"], _map_of(_is_int))))
        except (PendingSetError, TypeError, ValueError) as exc:
            raise PendingSetError(f"malformed file committer task payload: {exc}") from exc
