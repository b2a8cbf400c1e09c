"""The S3 committers' shared side: job setup, continuity, saved pendingsets, and the stages of
job commit they run (:mod:`.s3_stages`).

Subclasses decide how tasks produce uploads (staging: local files uploaded at task commit;
magic: streams) and where their metadata lies; every one of them commits the job through the
same stages, which a table format extends by adding one (``Delta``: ``delta_commit``).
"""

from __future__ import annotations

from abc import abstractmethod
from datetime import datetime, timezone

from .. import layout
from ..errors import NOTHING_VISIBLE, CommitError, ConcurrentCommitError, S3CommitError
from ..formats import CommitMarker, Journal, PendingSet, iostatistics
from ..interrupts import held_interrupts
from ..protocol import Committer, JobContext, JobOutcome, TaskCommit
from ..stages import Stage, run_stages
from ..store import open_store
from ..streaming.commit import with_batch_record
from .checksum_probe import require_kept_checksums
from .commit_run import CommitRun
from .conflict import DirectoryConflict
from .exclusive import require_conditional_create
from .s3_rollback import abort
from .s3_stages import S3_STAGES, resumed


class S3Committer(Committer):
    """Driver side of the S3 committers; subclasses decide how tasks produce uploads."""

    conflict_class: type[DirectoryConflict] = DirectoryConflict
    #: Take the per-destination commit marker. A table format whose log serialises commits
    #: (Delta) does not: its journal alone records an unfinished job (see committers/delta.py).
    locks_destination = True
    #: job commit, in order: a table format adds its stage (``stages.add_stage``)
    stages: tuple[Stage[CommitRun], ...] = S3_STAGES

    def __init__(self, job: JobContext) -> None:
        super().__init__(job)
        self.location = job.location
        self.conflict = self.make_conflict_policy()
        threads = max(job.options.threads, job.options.upload_threads)
        self.store = open_store(job.settings, threads=threads)
        if job.stream is not None:  # a micro-batch: its record before the release
            self.stages = with_batch_record(self.stages)

    def visible(self, relprefix: str) -> list[str]:
        """Keys a reader would see under a directory of the destination."""
        listed = self.store.list_objects(self.location.bucket, self.location.key(relprefix))
        return [o.key for o in listed if not layout.is_hidden(self.location.relative(o.key))]

    def make_conflict_policy(self) -> DirectoryConflict:
        return self.conflict_class(self.job.conflict_mode)

    # -- this job's hidden metadata: subclasses say where --------------------------------------
    @property
    @abstractmethod
    def metadata_prefix(self) -> str:
        """Hidden directory of this job's pendingsets; deleted at job end."""

    @abstractmethod
    def pendingset_key(self, pendingset: PendingSet) -> str: ...

    @abstractmethod
    def attempt_of(self, key: str) -> str | None:
        """The task attempt that saved the metadata file ``key``; None to never read it."""

    def save_pendingset(self, pendingset: PendingSet) -> None:
        """Persisted as well as returned, so an abort after a driver crash can find uploads."""
        # The statistics include the two requests they cannot observe: the PUT that saves them
        # and the job-alive check after it.
        counters = self.store.counters.snapshot()
        for op in ("PutObject", "HeadObject"):
            counters[op] = counters.get(op, 0) + 1
        pendingset.iostatistics = iostatistics(counters)
        pendingset.retries = self.store.counters.retries()
        body = pendingset.to_json().encode()
        key = self.pendingset_key(pendingset)
        self.store.put(self.location.bucket, key, body)
        try:
            self.ensure_job_alive()
        except CommitError:
            self.store.delete_keys(self.location.bucket, [key])
            raise

    # -- job setup ----------------------------------------------------------------------------
    def setup_job(self) -> None:
        self.check_destination()
        marker = layout.marker_key(self.location)
        if self.locks_destination and self.store.head(self.location.bucket, marker) is not None:
            raise self.concurrent_commit_error(uploads_aborted=False)
        self.conflict.check_job(self.visible, self.location.url())
        self.store.put(self.location.bucket, self.alive_key, self.job.job_id.encode())

    def check_destination(self) -> None:
        """The bucket, and what the job's options need of the store; nothing is written
        (a stream checks once, then each batch's tasks open their job: streaming.commit)."""
        self.store.check_bucket(self.location.bucket)
        require_kept_checksums(self.job.settings, self.location)  # first: every PUT has them
        if self.job.options.exclusive_commit == "required":
            require_conditional_create(self.job.settings, self.location)

    # -- continuity: no attempt can add output after the job ended ----------------------------
    @property
    def alive_key(self) -> str:
        """Exists from job setup until job end; its deletion precedes the final upload listing."""
        return layout.alive_key(self.location, self.job.job_id)

    def ensure_job_alive(self) -> None:
        """Called by an attempt after it started uploads and saved the metadata naming them.

        "A Zero-Rename Committer" ("Correctness", continuity): a straggler must never make
        output visible or leave it pending after the job ended. Job end deletes the alive marker
        *before* it lists this job's pending uploads and metadata, so an upload or metadata file
        created before a successful check here is found by that listing, and one created before
        a failed check is removed by the attempt itself (its task abort).
        """
        if self.store.head(self.location.bucket, self.alive_key) is None:
            raise CommitError(
                f"job {self.job.job_id} has already ended at {self.location.url()}: this "
                "attempt (a late retry or a losing speculative copy) discards its output",
                **self.error_fields(),
            )

    # -- job commit: the stages of s3_stages over one CommitRun --------------------------------
    def commit_job(
        self,
        messages: list[TaskCommit],
        phases: dict[str, float],
        resume: Journal | None = None,
    ) -> JobOutcome:
        """Run :attr:`stages` (or, with ``resume``, the journal's commit from completion on).

        Anything raised before the first completion, KeyboardInterrupt included, aborts the
        job; from the first completion on the journal names every upload, so a failure rolls
        back truthfully and a crash is resolved by ``s3commit recover`` / ``abort``. A Ctrl-C
        is held until the next stage (:mod:`..interrupts`), whose policy then applies; one
        that arrives during the last stage is raised once the job has committed.
        """
        run = CommitRun(self, messages, phases, resumed_from=resume)
        stages = resumed(self.stages) if resume is not None else self.stages
        url = self.location.url()
        committed = (
            f"s3commit: job {self.job.job_id} was interrupted as its commit ended and committed "
            f"all the same: every file is visible at {url} and nothing of it is pending."
        )
        with held_interrupts(committed):
            run_stages(run, stages, phases, self.job.job_id)
        assert run.outcome is not None, "the stages produced no outcome"
        return run.outcome

    def abort_job(self, messages: list[TaskCommit]) -> None:
        abort(CommitRun(self, messages, {}))

    def commit_keys(self) -> list[str]:
        """The journal, and the marker if this job takes one: released together, marker last."""
        marker = [layout.marker_key(self.location)] if self.locks_destination else []
        return [self.journal_key, *marker]

    @property
    def journal_key(self) -> str:
        return layout.journal_key(self.location, self.job.job_id)

    @property
    def locked_note(self) -> str:
        return "; the destination stays locked for other jobs" if self.locks_destination else ""

    def drop_local_buffers(self) -> None:
        """What attempts left on this host's disk, dropped at job end (staging committers)."""
        return None

    @property
    def delete_metadata(self) -> bool:
        return True

    def marker_job(self) -> str | None:
        try:
            body = self.store.get(self.location.bucket, layout.marker_key(self.location))
            return CommitMarker.from_json(body).jobId
        except S3CommitError:
            return None

    def concurrent_commit_error(self, uploads_aborted: bool) -> ConcurrentCommitError:
        url = self.location.url()
        try:
            marker = CommitMarker.from_json(
                self.store.get(self.location.bucket, layout.marker_key(self.location))
            )
            other = f"job {marker.jobId} (started {_ms_date(marker.started)} on {marker.hostname})"
        except S3CommitError:
            other = "another job"
        done = "its uploads were aborted; " if uploads_aborted else ""
        return ConcurrentCommitError(
            f"{other} is committing into {url}, or its commit crashed unfinished. Wait for it, "
            f"or resolve it with `s3commit recover {url}` (finish it) or `s3commit abort {url}` "
            f"(roll it back). This job ({self.job.job_id}) did not commit: {done}nothing of it "
            "is visible.",
            **self.error_fields(NOTHING_VISIBLE, "recover"),
        )


def _ms_date(epoch_ms: int) -> str:
    return datetime.fromtimestamp(epoch_ms / 1000, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
