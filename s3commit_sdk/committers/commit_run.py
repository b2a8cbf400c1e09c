"""One S3 job commit in progress: the value its stages read and extend.

As Hadoop's "Manifest Committer Protocol" passes one ``StageConfig`` through its stages and
pyiceberg builds a commit as a value, every stage of the S3 committers' job commit
(:mod:`.s3_stages`) takes a :class:`CommitRun` and adds what it learned: the pendingsets, the
journal, what completion sent and verified, what cleanup aborted, the outcome. What a failure
left behind is read off the same value (``sent``, ``marker_owned``, ``journal_written``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..formats import Journal, PendingSet, PendingUpload
from ..protocol import JobOutcome, TaskCommit
from ..store import PendingUploadInfo
from ..store.s3 import RequestCounters

if TYPE_CHECKING:  # the committer imports this module
    from .s3_job import S3Committer


@dataclass
class CommitRun:
    """The state of one job commit (or of its resumption by ``s3commit recover``)."""

    committer: S3Committer
    messages: list[TaskCommit]
    phases: dict[str, float]
    #: set by ``s3commit recover``: the journal of a commit whose driver died
    resumed_from: Journal | None = None
    started: float = field(default_factory=time.monotonic)
    pendingsets: list[PendingSet] = field(default_factory=list)
    #: the uploads of every committed task, in the order of their messages
    commits: list[PendingUpload] = field(default_factory=list)
    #: what replace mode deletes, listed under the marker
    replaced: list[str] = field(default_factory=list)
    #: what the replace deletes removed (a resumed commit: confirmed by looking)
    deleted: list[str] = field(default_factory=list)
    #: what a table format needs in the journal to finish the job (``Journal.extraData``)
    journal_extra: dict[str, Any] = field(default_factory=dict)
    journal: Journal | None = None
    marker_owned: bool = False
    journal_written: bool = False
    #: a resumed commit: the pending uploads and the job's saved pendingsets (by key) its
    #: first stage listed, read and checked (``journal_trust.check_resumed``)
    listed_pending: list[PendingUploadInfo] | None = None
    saved_pendingsets: dict[str, PendingSet] = field(default_factory=dict)
    #: upload ids found completed before this run (a resumed commit)
    found_complete: set[str] = field(default_factory=set)
    #: completions sent: each may have made its file visible whatever its answer said
    sent: list[PendingUpload] = field(default_factory=list)
    #: (upload, the completion's answered ETag or None) of every completion that went through
    answered: list[tuple[PendingUpload, str | None]] = field(default_factory=list)
    #: verified ETags by upload id
    etags: dict[str, str] = field(default_factory=dict)
    completion_checks: RequestCounters = field(default_factory=RequestCounters)
    #: fields a table format adds to ``_SUCCESS`` (Delta: the version the job produced)
    table_fields: dict[str, Any] = field(default_factory=dict)
    aborted_uploads: int = 0
    outcome: JobOutcome | None = None

    @property
    def job(self):
        return self.committer.job

    @property
    def store(self):
        return self.committer.store

    @property
    def location(self):
        return self.committer.location

    @property
    def resumed(self) -> bool:
        return self.resumed_from is not None

    def require_checked(self) -> CommitRun:
        """This run, once a resumed commit's first stage has listed what it checked."""
        if self.listed_pending is None:
            raise AssertionError("a resumed stage ran before check_journal")
        return self

    def require_journal(self) -> Journal:
        if self.journal is None:
            raise AssertionError("a stage needing the journal ran before write_journal")
        return self.journal

    def completed_now(self) -> list[str]:
        """Keys whose upload this run completed."""
        return [c.destinationKey for c, _ in self.answered if c.uploadId not in self.found_complete]

    def already_complete(self) -> list[str]:
        """Keys a resumed commit found completed before it."""
        return [c.destinationKey for c in self.commits if c.uploadId in self.found_complete]
