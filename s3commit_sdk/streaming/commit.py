"""Job commit of one micro-batch, idempotent per (stream, batch).

Every attempt of a batch is the same job (:attr:`.batch.StreamBatch.job_id`), so an earlier
attempt's commit state is found by that id ("How the anchors get exactly-once": Spark's file
sink skips batches in its log; here the log is the journal and the batch record):

- its journal exists: it died while committing. Its commit is rolled forward with the stages
  ``s3commit recover`` runs (the uploads it names completed and verified, the table commit made
  once, the record written), and this attempt's uploads, which carry the same job id but are not
  in the journal, are aborted by its clean-up;
- its record exists: the batch is committed; this attempt's uploads are aborted;
- neither, but the destination's marker names the job: it died before its journal, having
  completed nothing; the marker is released and this attempt commits;
- otherwise this attempt commits, and its record is written before its journal is released.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from .. import layout
from ..errors import NOTHING_VISIBLE, ConcurrentCommitError
from ..formats import Journal, SuccessDocument
from ..protocol import JobContext, JobOutcome, TaskCommit
from ..stages import Stage, add_stage
from ..store import open_store
from .ledger import read_record, write_record

if TYPE_CHECKING:
    from ..committers.commit_run import CommitRun
    from ..committers.s3_job import S3Committer


def write_intent(run: CommitRun, body: bytes | bytearray) -> None:
    """The batch's journal, its intent, created only if absent: a second attempt of the batch
    committing at the same moment (two drivers on one checkpoint) is refused before any
    completion; a retried create whose first try landed finds its own bytes."""
    store, bucket, key = run.store, run.location.bucket, run.committer.journal_key
    if store.put_if_absent(bucket, key, body) or store.get_if_present(bucket, key) == body:
        return
    stream = run.job.stream
    assert stream is not None
    raise ConcurrentCommitError(
        f"another attempt of batch {stream.batch_id} of stream {stream.query_id} is committing "
        f"into {run.location.url()} (its journal exists): is a second query running on the "
        "same checkpoint? This attempt did not commit: nothing of it is visible.",
        **run.committer.error_fields(NOTHING_VISIBLE),
    )


def record_batch(run: CommitRun) -> None:
    """The batch's record (its ``_SUCCESS`` document), before the journal is released."""
    assert run.outcome is not None, "write_success makes the outcome"
    write_record(run.store, run.location, run.outcome.success)


def with_batch_record(stages: tuple[Stage, ...]) -> tuple[Stage, ...]:
    """A committer's stages with the batch record written between ``_SUCCESS`` and the release
    of the journal: from then on a replay finds the batch committed."""
    from ..committers.s3_rollback import finishing

    record = Stage("record_batch", record_batch, None, finishing("writing the batch record"))
    return add_stage(stages, record, before="release")


def settle_earlier_attempt(committer: S3Committer) -> JobOutcome | None:
    """The batch's outcome if an earlier attempt committed it (finishing that commit if it
    died mid-way), else None, with any marker it left released."""
    job, store, location = committer.job, committer.store, committer.location
    assert job.stream is not None
    body = store.get_if_present(location.bucket, committer.journal_key)
    if body is not None:
        return replace(committer.commit_job([], {}, resume=Journal.from_json(body)), replayed=True)
    record = read_record(store, location, job.stream)
    if record is not None:
        return replayed_outcome(record)
    if committer.locks_destination and committer.marker_job() == job.job_id:
        store.delete_keys(location.bucket, [layout.marker_key(location)])
    return None


def commit_batch(
    committer: S3Committer, messages: list[TaskCommit], phases: dict[str, float]
) -> JobOutcome:
    """Job commit of a micro-batch: exactly once, whatever attempt of it comes first."""
    settled = settle_earlier_attempt(committer)
    if settled is None:
        return committer.commit_job(messages, phases)
    committer.abort_job(messages)  # this attempt's uploads duplicate the committed batch
    return settled


def abort_batch(committer: S3Committer, messages: list[TaskCommit]) -> None:
    """Abort this attempt of a batch: an earlier attempt's unfinished commit is rolled forward
    first (its uploads carry the same job id: aborting by job id would take them too)."""
    settle_earlier_attempt(committer)
    committer.abort_job(messages)


def open_batch(job: JobContext) -> None:
    """A task's part of a batch's job setup: the job's alive marker (every task of the batch
    writes the same one), so its uploads pass the continuity check until the batch ends."""
    store = open_store(job.settings, threads=1)
    store.put(job.location.bucket, layout.alive_key(job.location, job.job_id), job.job_id.encode())


def replayed_outcome(record: SuccessDocument) -> JobOutcome:
    """A committed batch's outcome, from its record: nothing was committed this time."""
    return JobOutcome(
        list(record.files),
        record,
        dict(record.durations),
        dict(record.requests),
        replayed=True,
    )
