"""The batch records of the streams writing into a destination: proof that a batch committed.

A committed micro-batch's record is its ``_SUCCESS`` document (with its stream and batch ids),
saved under ``__s3commit/streams/<stream>/`` before the batch's journal is released. So at every
moment a batch is either unfinished (its journal names its uploads: the intent, rolled forward
on replay), committed (its record exists), or never began completing (neither): a replay can
tell which. Like Spark's file sink log ("How the anchors get exactly-once"), but the data stays
readable by any lister, and the records of old batches can be expired.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .. import layout
from ..errors import InvalidArgumentError, JournalTrustError, PendingSetError
from ..formats import SuccessDocument, parse_success
from ..paths import S3Location, parse_s3_url
from ..store import S3Store
from ..uploads import open_uploads_store
from .batch import BATCH_KEY, QUERY_KEY, StreamBatch, is_stream_id

#: Spark keeps the last 100 batches replayable (spark.sql.streaming.minBatchesToRetain)
DEFAULT_KEEP = 100


def read_record(store: S3Store, location: S3Location, batch: StreamBatch) -> SuccessDocument | None:
    """The batch's record, or None if the batch has not committed.

    A record that does not name exactly this batch and its job is refused: a crafted or
    misplaced record must never make a batch count as committed (its rows would be lost).
    """
    key = layout.batch_record_key(location, batch.query_id, batch.batch_id)
    body = store.get_if_present(location.bucket, key)
    if body is None:
        return None
    try:
        record = parse_success(body)
    except PendingSetError as exc:
        raise _untrusted(location, key, str(exc)) from exc
    if record is None or record.job_id != batch.job_id:
        raise _untrusted(location, key, f"it names job {getattr(record, 'job_id', None)!r}")
    if StreamBatch.from_fields(record.table) != batch:
        raise _untrusted(location, key, "it names another stream or batch")
    return record


def write_record(store: S3Store, location: S3Location, success: SuccessDocument) -> None:
    """Save a committed batch's record (idempotent: a resumed commit writes the same)."""
    batch = StreamBatch.from_fields(success.table)
    assert batch is not None, "a batch record needs its stream fields"
    key = layout.batch_record_key(location, batch.query_id, batch.batch_id)
    store.put(location.bucket, key, success.to_json().encode(), "application/json")


def _untrusted(location: S3Location, key: str, why: str) -> JournalTrustError:
    return JournalTrustError(
        f"the batch record {location.url(key)} is not this batch's ({why}): nothing was "
        "committed or skipped on its word. Delete it if it is not a record this SDK wrote, "
        "then restart the query",
        journal_key=key,
        problem=why,
    )


# -- what `s3commit streams` shows ------------------------------------------------------------
@dataclass(frozen=True)
class BatchRecord:
    """One committed micro-batch, as its record says."""

    stream: str
    batch_id: int
    job_id: str
    committed_ms: int
    rows: int
    files: int
    bytes: int
    commit_s: float  # the batch's job commit: from the tasks' end to its record

    @classmethod
    def of(cls, doc: SuccessDocument) -> BatchRecord:
        return cls(
            stream=doc.table[QUERY_KEY],
            batch_id=doc.table[BATCH_KEY],
            job_id=doc.job_id,
            committed_ms=doc.timestamp,
            rows=doc.rows,
            files=doc.file_total,
            bytes=doc.bytes,
            commit_s=float(doc.durations.get("job_commit", 0.0)),
        )

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class StreamSummary:
    """A stream's committed batches at a destination, summed."""

    stream: str
    batches: int
    first_batch: int
    last_batch: int
    rows: int
    files: int
    bytes: int
    last_committed_ms: int
    last_commit_s: float
    mean_commit_s: float

    @classmethod
    def of(cls, stream: str, records: list[BatchRecord]) -> StreamSummary:
        last = records[-1]
        return cls(
            stream=stream,
            batches=len(records),
            first_batch=records[0].batch_id,
            last_batch=last.batch_id,
            rows=sum(r.rows for r in records),
            files=sum(r.files for r in records),
            bytes=sum(r.bytes for r in records),
            last_committed_ms=last.committed_ms,
            last_commit_s=last.commit_s,
            mean_commit_s=sum(r.commit_s for r in records) / len(records),
        )

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _open(path: str, options: Mapping[str, Any] | None) -> tuple[S3Store, S3Location]:
    return open_uploads_store(dict(options) if options else None), parse_s3_url(path)


def record_keys(store: S3Store, location: S3Location, stream: str) -> list[str]:
    prefix = layout.streams_prefix(location, StreamBatch(stream, 0).query_id)
    keys = [o.key for o in store.list_objects(location.bucket, prefix)]
    return sorted(k for k in keys if k.endswith(".json") and "/batch-" in k)


def stream_batches(
    path: str, stream: str, options: Mapping[str, Any] | None = None
) -> list[BatchRecord]:
    """The committed batches of ``stream`` at the destination ``path``, oldest first."""
    store, location = _open(path, options)
    records = []
    for key in record_keys(store, location, stream):
        body = store.get_if_present(location.bucket, key)
        if body is None:  # expired meanwhile
            continue
        doc = parse_success(body)
        batch = None if doc is None else StreamBatch.from_fields(doc.table)
        if batch is None or batch.query_id != stream or batch.job_id != doc.job_id:
            raise PendingSetError(f"{location.url(key)} is not a record of stream {stream!r}")
        records.append(BatchRecord.of(doc))
    return records


def list_streams(path: str, options: Mapping[str, Any] | None = None) -> list[StreamSummary]:
    """Every stream that committed batches into ``path`` (whose records are kept)."""
    store, location = _open(path, options)
    prefix = layout.streams_prefix(location)
    listed = store.list_objects(location.bucket, prefix)
    names = {o.key[len(prefix) :].split("/", 1)[0] for o in listed}
    streams = sorted(n for n in names if is_stream_id(n))  # anything else is not ours
    found = []
    for stream in streams:
        records = stream_batches(path, stream, options)
        if records:
            found.append(StreamSummary.of(stream, records))
    return found


def expire_batches(
    path: str, stream: str, keep: int = DEFAULT_KEEP, options: Mapping[str, Any] | None = None
) -> list[int]:
    """Delete the records of all but the newest ``keep`` batches of ``stream``; the batch ids
    whose records were deleted.

    Exactly-once needs the record of every batch Spark may still replay: only the batch after
    the last one in the checkpoint's commit log, and Spark keeps at least
    ``spark.sql.streaming.minBatchesToRetain`` (100) batches, so keeping 1 is enough for
    replays and the default keeps what Spark keeps. The data files are never touched.
    """
    if isinstance(keep, bool) or not isinstance(keep, int) or keep < 1:
        raise InvalidArgumentError(
            f"keep={keep!r}: keep at least the newest batch's record (its replay needs it)"
        )
    store, location = _open(path, options)
    keys = record_keys(store, location, stream)
    doomed = keys[: max(len(keys) - keep, 0)]
    store.delete_keys(location.bucket, doomed)
    return [int(k.rsplit("batch-", 1)[1].removesuffix(".json")) for k in doomed]


def records_json(records: list[BatchRecord] | list[StreamSummary]) -> str:
    return json.dumps([r.to_dict() for r in records], indent=2)
