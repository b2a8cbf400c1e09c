"""Commit metadata as JSON: ``.pendingset`` (of Hadoop's ``.pending`` entries), the commit
journal, task manifests and ``_SUCCESS``.

Field names follow Hadoop's S3A ``SinglePendingCommit`` / ``PendingSet`` / ``SuccessData`` so
their readers understand ours; loading validates strictly, because a tampered pendingset must
never complete an upload outside the job.
"""

from __future__ import annotations

import json
import socket
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Any

from .errors import PendingSetError

PENDING_VERSION = 2
PENDINGSET_VERSION = 2
SUCCESS_NAME = "org.apache.hadoop.fs.s3a.commit.files.SuccessData/1"
SUCCESS_FILENAMES_CAP = 100  # Hadoop's cap on ``filenames``; ``files`` lists them all.


def _require(condition: bool, what: str) -> None:
    if not condition:
        raise PendingSetError(what)


@dataclass
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
        _require(
            isinstance(self.extraData, dict)
            and all(isinstance(k, str) and isinstance(v, str) for k, v in self.extraData.items()),
            f"upload of {key!r} has malformed extraData",
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


def success_document(
    *,
    committer: str,
    job_id: str,
    job_id_source: str,
    description: str,
    filenames: list[str],
    metrics: dict[str, int],
    diagnostics: dict[str, str],
    extra: dict[str, Any],
) -> dict[str, Any]:
    """The ``_SUCCESS`` JSON: Hadoop's SuccessData fields, then ours (Hadoop ignores extras)."""
    now = datetime.now(timezone.utc)
    return {
        "name": SUCCESS_NAME,
        "timestamp": int(now.timestamp() * 1000),
        "date": now.strftime("%a %b %d %H:%M:%S UTC %Y"),
        "hostname": socket.gethostname(),
        "committer": committer,
        "description": description,
        "jobId": job_id,
        "jobIdSource": job_id_source,
        "filenames": filenames[:SUCCESS_FILENAMES_CAP],
        "metrics": metrics,
        "diagnostics": diagnostics,
        "iostatistics": iostatistics(metrics),
        "success": True,
        **extra,
    }


def parse_success(body: bytes) -> dict[str, Any] | None:
    """The parsed ``_SUCCESS``; None for the 0-byte marker of the classic committer."""
    if not body.strip():
        return None
    try:
        doc = json.loads(body)
    except ValueError as exc:
        raise PendingSetError(f"_SUCCESS is not valid JSON: {exc}") from exc
    if not isinstance(doc, dict) or doc.get("name") != SUCCESS_NAME:
        raise PendingSetError("_SUCCESS is not a SuccessData JSON document")
    return doc


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
        return json.dumps(asdict(self), ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str | bytes) -> Journal:
        return _with_commits(cls, text, "commit journal")

    def validate(self, job_id: str, bucket: str, dir_prefix: str) -> None:
        _require(self.version == JOURNAL_VERSION, f"unknown journal version {self.version!r}")
        _require(self.jobId == job_id, f"journal belongs to job {self.jobId!r}, not {job_id!r}")
        _require(self.bucket == bucket, f"journal targets bucket {self.bucket!r}")
        PendingSet(job_id, "journal", "journal", self.commits).validate(job_id, bucket, dir_prefix)
        for key in self.replaced:
            _require(
                isinstance(key, str) and key.startswith(dir_prefix) and ".." not in key.split("/"),
                f"journal would delete {key!r}, outside the destination {dir_prefix!r}",
            )


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


def task_manifest(
    job_id: str,
    task_id: str,
    attempt_id: str,
    attempt_dir: str,
    files: list[dict[str, Any]],
    directories: list[dict[str, Any]],
    extra: dict[str, Any],
    counters: dict[str, int],
) -> str:
    """A manifest committer task manifest (seed 004, "Manifest Committer Protocol").

    ``files`` entries: ``s`` source URI, ``d`` destination URI, ``z`` size, ``e`` etag;
    ``directories``: ``d`` URI, ``t`` status, ``l`` depth. URIs are percent-encoded.
    """
    return json.dumps(
        {
            "type": TASK_MANIFEST_TYPE,
            "version": 1,
            "jobId": job_id,
            "jobAttemptNumber": 0,
            "taskID": task_id,
            "taskAttemptID": attempt_id,
            "taskAttemptDir": attempt_dir,
            "files": files,
            "directories": directories,
            "extraData": extra,
            "iostatistics": iostatistics(counters),
        }
    )


def load_task_manifest(body: bytes, job_id: str) -> dict[str, Any]:
    try:
        doc = json.loads(body)
    except ValueError as exc:
        raise PendingSetError(f"malformed task manifest: {exc}") from exc
    _require(isinstance(doc, dict), "a task manifest must be a JSON object")
    _require(doc.get("type") == TASK_MANIFEST_TYPE, f"not a task manifest: {doc.get('type')!r}")
    _require(doc.get("version") == 1, f"unknown task manifest version {doc.get('version')!r}")
    _require(doc.get("jobId") == job_id, f"task manifest of job {doc.get('jobId')!r}")
    destinations = [f.get("d") for f in doc.get("files", [])]
    _require(len(destinations) == len(set(destinations)), "duplicate destinations in a manifest")
    return doc
