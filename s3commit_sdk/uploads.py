"""Pending-upload inspection, abort and lifecycle, and ``_SUCCESS`` reading.

Shared by the ``s3commit`` CLI, the notebook widgets and the demo, so every front end lists
the same uploads the same way: always under the directory prefix with its trailing ``/`` (a
listing of ``ds1`` never reaches ``ds10``), with the job UUID read from the key.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone
from typing import Any

from .errors import InvalidArgumentError, StoreError
from .formats import SuccessDocument, parse_success
from .paths import SUCCESS_MARKER, parse_s3_url, partition_dir
from .progress import DURATION_PHASES
from .store import PendingUploadInfo, S3Store, open_store
from .textformat import format_bytes

#: A job UUID as our writers put it in every file name: ``part-00003-<uuid>-c000.parquet``.
JOB_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.I)
#: Our file names, and so the keys of our uploads: ``part-<task>-<uuid>-c<n><ext>``, or
#: ``part-<task>-<uuid>.c<n><ext>`` inside a partition directory (writers.TaskOutputWriter).
_OUR_FILE_NAME = re.compile(rf"part-\d+-(?P<job>{JOB_UUID.pattern})[-.]c\d+(?:\.[^/]*)?", re.I)
_DURATION_PART = re.compile(r"(\d+)([smhd])")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
LIFECYCLE_RULE_PREFIX = "s3commit-abort-incomplete-uploads:"
#: requests on uploads sent at once (aborts; the widget's part listings)
PARALLEL_REQUESTS = 16


def open_uploads_store(options: Mapping[str, Any] | None = None) -> S3Store:
    """The store these functions use when given none: one per front end, sized for
    ``PARALLEL_REQUESTS``."""
    return open_store(options, threads=PARALLEL_REQUESTS)


def _store(options: Mapping[str, Any] | None, store: S3Store | None = None) -> S3Store:
    return store if store is not None else open_uploads_store(options)


def pending_uploads(path: str, options: dict[str, Any] | None = None) -> list[PendingUploadInfo]:
    """Every pending multipart upload under the directory ``path`` (never its siblings)."""
    location = parse_s3_url(path)
    return _store(options).list_pending(location.bucket, location.dir_prefix)


def parse_duration(text: str) -> timedelta:
    """``24h``, ``90m``, ``1d12h``, ``30s``: Hadoop's ``-days/-hours/...`` in one argument.

    Units are required, so a bare ``24`` is never silently read as seconds.
    """
    compact = re.sub(r"\s+", "", str(text)).lower()
    if not compact or _DURATION_PART.sub("", compact):
        raise InvalidArgumentError(
            f"cannot read the duration {text!r}: use numbers with units s, m, h, d "
            "such as 30m, 24h or 1d12h"
        )
    seconds = sum(int(n) * _UNIT_SECONDS[u] for n, u in _DURATION_PART.findall(compact))
    return timedelta(seconds=seconds)


def format_duration(age: timedelta | None) -> str:
    """The two largest units of a duration, e.g. ``5432d 3h`` or ``2m 5s``."""
    if age is None:
        return "?"
    seconds = max(0, int(age.total_seconds()))
    parts = []
    for unit in ("d", "h", "m", "s"):
        size = _UNIT_SECONDS[unit]
        if seconds >= size or (unit == "s" and not parts):
            parts.append(f"{seconds // size}{unit}")
            seconds %= size
    return " ".join(parts[:2])


def job_uuid(text: str) -> str:
    """``text`` as a full job UUID, lower-case; anything else (an empty string too) is refused.

    Whatever selects keys by job must never select by a fragment: ``part`` or ``''`` match
    every file.
    """
    if not isinstance(text, str) or not JOB_UUID.fullmatch(text):
        raise InvalidArgumentError(
            f"expected a full job UUID like 0b1e8f0e-1111-4222-8333-444455556666, got {text!r}"
        )
    return text.lower()


def job_of_key(key: str) -> str | None:
    """The job UUID of a key whose file name is one of ours (``part-NNNNN-<uuid>...``).

    Only that position counts: a UUID elsewhere in the key names no job of ours.
    """
    match = _OUR_FILE_NAME.fullmatch(key.rsplit("/", 1)[-1])
    return match["job"].lower() if match else None


def as_utc(moment: datetime | None) -> datetime | None:
    """A timezone-aware datetime; a naive one is taken to be UTC (as S3 reports times)."""
    if moment is None or moment.tzinfo is not None:
        return moment
    return moment.replace(tzinfo=timezone.utc)


def upload_age(upload: PendingUploadInfo, now: datetime | None = None) -> timedelta | None:
    """How long ago the upload was initiated; None when the store did not say."""
    initiated = as_utc(upload.initiated)
    if initiated is None:
        return None
    return (as_utc(now) or datetime.now(timezone.utc)) - initiated


def filter_uploads(
    uploads: Iterable[PendingUploadInfo],
    *,
    older_than: timedelta | None = None,
    job: str | None = None,
    now: datetime | None = None,
) -> list[PendingUploadInfo]:
    """The uploads initiated at least ``older_than`` before ``now`` whose key carries ``job``.

    ``now`` defaults to the clock; pass it to decide ages against a fixed moment (tests, and
    stores like moto that report one fixed initiation time). An upload without an initiation
    time never matches an age filter: it might be a running job's.
    """
    wanted_job = None if job is None else job_uuid(job)
    moment = as_utc(now) or datetime.now(timezone.utc)
    chosen = []
    for upload in uploads:
        if wanted_job is not None and job_of_key(upload.key) != wanted_job:
            continue
        if older_than is not None:
            age = upload_age(upload, moment)
            if age is None or age < older_than:
                continue
        chosen.append(upload)
    return chosen


def find_uploads(
    path: str,
    *,
    older_than: timedelta | None = None,
    job: str | None = None,
    now: datetime | None = None,
    options: dict[str, Any] | None = None,
    store: S3Store | None = None,
) -> list[PendingUploadInfo]:
    """The pending uploads under the directory ``path`` that pass :func:`filter_uploads`."""
    location = parse_s3_url(path)
    found = _store(options, store).list_pending(location.bucket, location.dir_prefix)
    return filter_uploads(found, older_than=older_than, job=job, now=now)


def abort_uploads(
    path: str,
    uploads: Iterable[PendingUploadInfo],
    *,
    options: dict[str, Any] | None = None,
    store: S3Store | None = None,
) -> list[tuple[PendingUploadInfo, bool]]:
    """Abort ``uploads`` (found under ``path``) in parallel; True where this call aborted it.

    False means the upload was already gone (completed or aborted by someone else). Keys
    outside the directory ``path`` are refused, so a stale list can never reach a sibling.
    """
    location = parse_s3_url(path)
    chosen = list(uploads)
    for upload in chosen:
        location.relative(upload.key)  # raises InvalidPathError outside the directory
    if not chosen:
        return []
    s3 = _store(options, store)
    workers = min(len(chosen), PARALLEL_REQUESTS)
    with ThreadPoolExecutor(workers, "s3commit-abort") as pool:
        done = pool.map(lambda u: s3.abort(location.bucket, u.key, u.upload_id), chosen)
        return list(zip(chosen, done, strict=True))


def upload_parts(
    path: str,
    upload: PendingUploadInfo,
    *,
    options: dict[str, Any] | None = None,
    store: S3Store | None = None,
) -> tuple[int, int] | None:
    """``(parts, bytes)`` uploaded so far to a pending upload under ``path``: what S3 bills.

    None where the parts cannot be listed (the upload is gone, or ``s3:ListMultipartUploadParts``
    is not allowed). Pages through every part.
    """
    location = parse_s3_url(path)
    location.relative(upload.key)  # raises InvalidPathError outside the directory
    try:
        parts = _store(options, store).list_parts(location.bucket, upload.key, upload.upload_id)
    except StoreError as exc:
        if exc.code in ("AccessDenied", "403"):
            return None
        raise
    return None if parts is None else (len(parts), sum(p.size for p in parts))


def describe_upload(
    upload: PendingUploadInfo, bucket: str, now: datetime | None = None
) -> dict[str, Any]:
    """One upload as JSON-ready fields (``uploads list --json``)."""
    initiated = as_utc(upload.initiated)
    age = upload_age(upload, now)
    return {
        "bucket": bucket,
        "key": upload.key,
        "uploadId": upload.upload_id,
        "job": job_of_key(upload.key),
        "initiated": initiated.isoformat() if initiated else None,
        "ageSeconds": int(age.total_seconds()) if age is not None else None,
    }


# -- bucket lifecycle --------------------------------------------------------------------------
def abort_rule_id(dir_prefix: str) -> str:
    """Our lifecycle rule's ID for one directory prefix (S3 caps IDs at 255 characters)."""
    return (LIFECYCLE_RULE_PREFIX + dir_prefix)[:255]


def install_abort_rule(
    path: str,
    days: int,
    *,
    options: dict[str, Any] | None = None,
    store: S3Store | None = None,
) -> tuple[dict[str, Any], int]:
    """Install (or update) the rule that aborts uploads under ``path`` ``days`` after they start.

    The backstop the seeds recommend for uploads nobody cleaned up (a driver that died). S3
    only stores a bucket's lifecycle as a whole, so the other rules are read and written back
    unchanged. Returns the rule and how many other rules were kept.
    """
    if not isinstance(days, int) or isinstance(days, bool) or days < 1:
        raise InvalidArgumentError(f"--abort-incomplete-days must be a whole number >= 1: {days}")
    location = parse_s3_url(path)
    s3 = _store(options, store)
    rule_id = abort_rule_id(location.dir_prefix)
    others = [r for r in s3.get_lifecycle_rules(location.bucket) if r.get("ID") != rule_id]
    rule = {
        "ID": rule_id,
        "Status": "Enabled",
        "Filter": {"Prefix": location.dir_prefix},
        "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": days},
    }
    s3.put_lifecycle_rules(location.bucket, [*others, rule])
    return rule, len(others)


def lifecycle_warning(days: int, longest_job: timedelta | None) -> str | None:
    """Why an abort-after-``days`` rule could abort a running job's uploads, if it could."""
    if longest_job is None or timedelta(days=days) > longest_job:
        return None
    return (
        f"uploads are aborted {days} day(s) after they start, but the longest job runs "
        f"{format_duration(longest_job)}: a job that long would lose its uploads before it "
        f"commits. Use --abort-incomplete-days {longest_job.days + 1} or more."
    )


# -- _SUCCESS ----------------------------------------------------------------------------------
def read_success(path: str, options: dict[str, Any] | None = None) -> SuccessDocument | None:
    """The destination's ``_SUCCESS`` document; None for the classic committer's empty file.

    A missing ``_SUCCESS`` raises :class:`StoreError` saying so: the job never committed there
    (or ran with ``marksuccessfuljobs=false``).
    """
    location = parse_s3_url(path)
    s3 = _store(options)
    key = location.key(SUCCESS_MARKER)
    if s3.head(location.bucket, key) is None:
        s3.check_bucket(location.bucket)  # a missing bucket also answers 404: name it
        raise StoreError(
            f"no {SUCCESS_MARKER} at {location.url(key)}: no job has committed there (or it "
            "ran with marksuccessfuljobs=false)"
        )
    doc = parse_success(s3.get(location.bucket, key))
    return with_all_files(doc, lambda name: s3.get(location.bucket, location.key(name)))


def with_all_files(
    doc: SuccessDocument | None, read: Callable[[str], bytes]
) -> SuccessDocument | None:
    """``doc`` listing every file: past ``SUCCESS_FILES_CAP`` files ``_SUCCESS`` lists the
    first ones and the rest are read from its manifest (``read``: a name beside it -> bytes)."""
    if doc is None or doc.files_manifest is None:
        return doc
    return doc.with_all_files(read(doc.files_manifest))


def partition_name(partition: Mapping[str, Any] | None, root: str) -> str:
    """A ``_SUCCESS`` entry's partition as its directory (as in the keys); ``root`` if none."""
    partition = partition or {}
    return partition_dir(list(partition), list(partition.values())) or root


def partition_totals(files: Iterable[Mapping[str, Any]], root: str) -> list[dict[str, Any]]:
    """Files, rows and bytes per partition of a ``_SUCCESS`` file list, sorted by name."""
    totals: dict[str, dict[str, Any]] = {}
    for entry in files:
        name = partition_name(entry.get("partition"), root)
        row = totals.setdefault(name, {"partition": name, "files": 0, "rows": 0, "bytes": 0})
        row["files"] += 1
        row["rows"] += int(entry.get("rows", 0))
        row["bytes"] += int(entry.get("size", 0))
    return [totals[name] for name in sorted(totals)]


#: the phases a write's duration adds up from (``progress.job_seconds``); every other phase is
#: timed inside one of them
JOB_PHASES = DURATION_PHASES
#: the parts of ``tasks``: its wall time split as the tasks spent theirs (runner.split_task_phase)
TASK_PHASE_PARTS = ("task_write", "task_commit")
#: the part of job commit timed in no phase of its own (marker, journal, _SUCCESS, ...)
OTHER_STEPS = "other steps"
#: what a ``taskDurations`` value is, beside the ``tasks`` phase
TASK_TIME_NOTE = (
    "each task's own time, from its first row to its task commit; the tasks phase is the wall "
    "time of all of them, run side by side on the engine's slots, with the engine's scheduling "
    "and the start of its workers"
)

PhaseTree = list[tuple[str, float, list[tuple[str, float]]]]


def phase_tree(durations: Mapping[str, float]) -> PhaseTree:
    """The write's phases (:data:`JOB_PHASES`), each with the phases timed inside it.

    The parts of a phase add up to it: job commit's end with :data:`OTHER_STEPS`, the time of
    its steps that no phase times. A part whose phase was not recorded stands on its own.
    """
    parts: dict[str, list[tuple[str, float]]] = {name: [] for name in JOB_PHASES}
    alone: list[tuple[str, float]] = []
    for name, seconds in durations.items():
        if name in JOB_PHASES:
            continue
        phase = "tasks" if name in TASK_PHASE_PARTS else "job_commit"
        (parts[phase] if phase in durations else alone).append((name, float(seconds)))
    commit_parts = parts["job_commit"]
    if commit_parts:
        rest = float(durations["job_commit"]) - sum(seconds for _, seconds in commit_parts)
        if rest >= 0.0005:  # what rounds to 0.000 is not a step
            commit_parts.append((OTHER_STEPS, rest))
    tree = [(name, float(durations[name]), parts[name]) for name in JOB_PHASES if name in durations]
    return tree + [(name, seconds, []) for name, seconds in alone]


def _sum_text(parts: Iterable[tuple[str, float]]) -> str:
    return " + ".join(f"{name}={seconds:.3f}" for name, seconds in parts)


def replaced_text(doc: Mapping[str, Any]) -> str:
    """What the job replaced: the objects it deleted, or, for a table, the files its commit
    removed from the table (a table's replace deletes no object: they stay for time travel)."""
    if "deltaVersion" in doc:
        removed, version = doc.get("deltaRemovedFiles", 0), doc["deltaVersion"]
        by = f"the Delta transaction of version {version}"
        return f"{removed} files (removed from the table by {by}; no object deleted)"
    if "icebergSnapshotId" in doc:
        removed, snapshot = doc.get("icebergRemovedFiles", 0), doc["icebergSnapshotId"]
        by = f"Iceberg snapshot {snapshot}"
        return f"{removed} files (removed from the table by {by}; no object deleted)"
    return f"{doc.get('replacedObjects', 0)} objects"


def format_success(doc: Mapping[str, Any] | None) -> str:
    """A plain-text summary of a ``_SUCCESS`` document, one table per concern.

    Phases are shown as they nest: the job's duration is setup + tasks + job commit, and each
    of those is the sum of its parts. Task durations are each task's own time, said as such.
    """
    if doc is None:
        return "_SUCCESS is a 0-byte file: the classic committer ran; it records nothing else."
    lines = [
        f"committer     {doc.get('committer', '?')}  (job {doc.get('jobId', '?')})",
        f"destination   {doc.get('destination', '?')}",
        f"conflict mode {doc.get('conflictMode', '?')}   format {doc.get('format', '?')}",
        f"committed     {len(doc.get('files', []))} files, {doc.get('rows', 0)} rows, "
        f"{format_bytes(doc.get('bytes', 0))}; replaced {replaced_text(doc)}",
        "",
        f"{'partition':<40} {'files':>5} {'rows':>10} {'bytes':>12}",
    ]
    for row in partition_totals(doc.get("files", []), "(root)"):
        lines.append(
            f"{row['partition']:<40} {row['files']:>5} {row['rows']:>10} {row['bytes']:>12}"
        )
    tree = phase_tree(doc.get("durations", {}))
    total = sum(seconds for _, seconds, _ in tree)
    phases = f"{_sum_text((n, s) for n, s, _ in tree)} = {total:.3f}" if tree else "none recorded"
    lines += ["", f"phase durations (s): {phases}"]
    lines += [f"  {name}={sec:.3f} = {_sum_text(parts)}" for name, sec, parts in tree if parts]
    tasks = [float(v) for v in doc.get("taskDurations", {}).values()]
    if any(tasks):  # a resumed commit records 0 for tasks it did not see run
        lines.append(
            f"task durations (s): {len(tasks)} tasks, {min(tasks):.3f} to {max(tasks):.3f} "
            f"each, {sum(tasks):.3f} in all: {TASK_TIME_NOTE}"
        )
    lines.append("requests: " + ", ".join(f"{k}={v}" for k, v in doc.get("requests", {}).items()))
    return "\n".join(lines)
