"""A randomized fault-schedule explorer: random sequences of jobs, faults, kills, recoveries and
readers against a real S3 server, with the correctness properties checked after every step.

Built on hypothesis's stateful testing: :class:`CommitSchedules` is a
``RuleBasedStateMachine`` whose rules run jobs (committer, conflict mode, rows; the format and
partitioning are the destination's), jobs whose requests fault through a
:class:`~.faultproxy.FaultProxy` (throttling, 500s, resets before and after the store acted,
wrong ETags, stuck listings, latency), drivers killed by SIGKILL at a job-commit request
(:func:`~.crash.crash_write`), ``recover`` / ``abort`` through the API or the CLI, two jobs
whose commits overlap, and the SDK's reader while a commit is held in flight. A model holds the
rows the destination must show; after every step the invariants of "A Zero-Rename Committer"
(section "Correctness") are checked against listings and the objects' bytes:

- complete, consistent: with no commit unfinished, the visible rows are the model's, exactly;
- exclusive: every visible file belongs to a committed job (its UUID in the name);
- concurrent: a job set up while another commits is refused, and changes nothing; a job set up
  before another committed commits over it as the model says, their files never mixed;
- abortable: a failed job leaves nothing visible unless its error says so (``visible``), and
  its ``visible`` matches a listing;
- no leaks: with no commit unfinished, no pending upload and no commit marker remain;
- recoverable: a killed commit (marker held) is brought by ``recover`` to the new state and by
  ``abort`` to the old one (minus what replace had deleted, which abort reports);
- continuity: ``_SUCCESS`` names the last committed job and exactly its visible files;
- reader view: the SDK's reader returns the old or the new rows of a commit in flight, never
  half of it.

Failing schedules shrink to a minimal sequence of steps (hypothesis); ``tests/test_explorer.py``
runs a fixed-seed budget, ``S3COMMIT_EXPLORE_EXAMPLES`` a longer random one. Not a stable API
(see :mod:`s3commit_sdk.testing`).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.json as pajson
import pyarrow.parquet as pq
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from .. import layout
from ..errors import VISIBLE, ConcurrentCommitError, ConflictError, S3CommitError
from ..paths import parse_s3_url
from ..uploads import job_of_key
from . import faultproxy as fp
from .crash import crash_write

Row = tuple[int, str, str]  # id, name, day
DAYS = ("d1", "d2", "d3")
#: the committers that take the destination's commit marker: killed, overlapped, read mid-commit
COMMITTERS = ("directory", "partitioned", "magic")
#: the rename committers on S3 (copy + delete): no marker, no recovery, so only whole jobs
#: ("S3A Committers: Architecture and Implementation", "The FileOutputCommitter")
RENAME_COMMITTERS = ("manifest", "file")
#: committers whose unit of conflict is the whole destination, whatever its partitions
WHOLE_DESTINATION = ("directory", "file")
MODES = ("append", "replace", "fail")
FORMATS = ("parquet", "csv", "json")
#: the explorer's rules and checks that can be switched off by name (``S3COMMIT_EXPLORE_SKIP``),
#: while a violation they find is being fixed: ``error_visible`` accepts an error whose
#: ``visible`` is None (it must still have left nothing); ``rename_while_unfinished`` runs no
#: rename committer while an S3 committer's commit is unfinished (they take no marker)
SWITCHABLE = (
    "reader",
    "kill_driver",
    "overlapping_commits",
    "error_visible",
    "rename_while_unfinished",
)
SKIP_ENV = "S3COMMIT_EXPLORE_SKIP"
#: random schedules to run instead of the fixed-seed budget
EXAMPLES_ENV = "S3COMMIT_EXPLORE_EXAMPLES"
#: a file to append each run's :class:`Stats` to, as a JSON line
SUMMARY_ENV = "S3COMMIT_EXPLORE_SUMMARY"
#: ``0``: find only, no shrinking (a long run goes on to the next seed sooner); the summary
#: keeps the failing schedule as drawn, and rerunning its seed without this shrinks it
SHRINK_ENV = "S3COMMIT_EXPLORE_SHRINK"
#: requests a job makes, which a fault may hit
FAULTED_OPERATIONS = (
    "CreateMultipartUpload",
    "UploadPart",
    "CompleteMultipartUpload",
    "PutObject",
    "DeleteObjects",
    "ListObjectsV2",
    "HeadObject",
    "GetObject",
    "ListMultipartUploads",
    "AbortMultipartUpload",
)
#: few attempts per request, so that two faults in a row fail a request for good
RETRIES = {
    "retry.max-attempts": 2,
    "retry.throttle.limit": 2,
    "retry.throttle.interval": "10ms",
}
#: the job-commit requests at which a killed driver dies, at an occurrence every job reaches:
#: with one task and one thread the child's requests are sequential; a completion up to the
#: job's file count, or DeleteObjects #2-#4 (#1 is the child's setup probe, then come the
#: replace deletes if any, the hidden-file cleanup and the release)
KILL_POINTS = ("CompleteMultipartUpload", "DeleteObjects")


# -- what a step does -------------------------------------------------------------------------
@dataclass(frozen=True)
class JobSpec:
    """One write: its committer, conflict mode, one row per day listed, and its task count."""

    committer: str
    mode: str
    days: tuple[str, ...]
    tasks: int = 1

    def files(self, partitioned: bool) -> int:
        """Files one task writes, two rows per file (``max_records_per_file``)."""
        if not partitioned:
            return -(-len(self.days) // 2)
        return sum(-(-self.days.count(day) // 2) for day in set(self.days))


@dataclass(frozen=True)
class FaultSpec:
    """A fault on the listed occurrences of one operation, as the proxy's rules express it."""

    action: str
    operation: str
    occurrences: tuple[int, ...]

    def rules(self) -> list[fp.Fault]:
        when = {"occurrences": self.occurrences}
        make: dict[str, Callable[[], fp.Fault]] = {
            "slow-down": lambda: fp.slow_down(self.operation, **when),
            "internal-error": lambda: fp.internal_error(self.operation, **when),
            "internal-error-after": lambda: fp.internal_error(self.operation, after=True, **when),
            "reset": lambda: fp.reset(self.operation, **when),
            "reset-after": lambda: fp.reset(self.operation, after=True, **when),
            "wrong-etag": lambda: fp.wrong_etag(self.operation, **when),
            "stuck-listing": lambda: fp.stuck_listing(self.operation, **when),
            "slow": lambda: fp.delay(150, self.operation, **when),
        }
        return [make[self.action]()]


def job_specs(
    tasks: tuple[int, ...] = (1, 2), committers: tuple[str, ...] = COMMITTERS
) -> st.SearchStrategy[JobSpec]:
    return st.builds(
        JobSpec,
        committer=st.sampled_from(committers),
        mode=st.sampled_from(MODES),
        days=st.lists(st.sampled_from(DAYS), min_size=1, max_size=4).map(tuple),
        tasks=st.sampled_from(tasks),
    )


_TIMES = st.lists(st.integers(1, 6), min_size=1, max_size=3, unique=True).map(
    lambda xs: tuple(sorted(xs))
)
#: the operations a tampering fault applies to (the others: any of FAULTED_OPERATIONS)
_TAMPERED = {
    "wrong-etag": ("CompleteMultipartUpload", "UploadPart"),
    "stuck-listing": ("ListObjectsV2", "ListMultipartUploads"),
}
FAULT_ACTIONS = (
    "slow-down",
    "internal-error",
    "internal-error-after",
    "reset",
    "reset-after",
    "wrong-etag",
    "stuck-listing",
    "slow",
)
FAULTS = st.sampled_from(FAULT_ACTIONS).flatmap(
    lambda action: st.builds(
        FaultSpec,
        st.just(action),
        st.sampled_from(_TAMPERED.get(action, FAULTED_OPERATIONS)),
        _TIMES,
    )
)


# -- what the destination holds -----------------------------------------------------------------
@dataclass
class Unfinished:
    """A commit left unfinished (driver killed, or a failure whose error names a command):
    the rows before it, the rows it commits, and the command its error named, if any."""

    job_id: str
    old: frozenset[Row]
    new: frozenset[Row]
    remedy: str | None = None


@dataclass
class Stats:
    """What one server's exploration ran and found; written as JSON (``SUMMARY_ENV``)."""

    server: str
    schedules: int = 0
    steps: int = 0
    jobs: int = 0
    committed: int = 0
    failed: int = 0
    kills: int = 0
    recoveries: int = 0
    faults: dict[str, int] = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def write(self, path: str | None) -> None:
        """Append this run as one JSON line to ``path`` (if given)."""
        if path:
            with open(path, "a") as out:
                out.write(json.dumps(self.__dict__) + "\n")


def rows_of_object(key: str, body: bytes, fmt: str) -> list[Row]:
    """The rows of one visible data file, as (id, name, day) whatever the format."""
    if fmt == "parquet":
        table = pq.read_table(io.BytesIO(body))
    elif fmt == "csv":  # as Spark writes it: no header
        options = pacsv.ReadOptions(autogenerate_column_names=True)
        table = pacsv.read_csv(io.BytesIO(body), read_options=options)
    else:
        table = pajson.read_json(io.BytesIO(body))
    columns = table.to_pydict()
    values = list(columns.values())
    day = next((seg[4:] for seg in key.split("/") if seg.startswith("day=")), None)
    rows = []
    for i in range(table.num_rows):
        row_day = day if day is not None else str(values[2][i])
        rows.append((int(values[0][i]), str(values[1][i]), row_day))
    return rows


def sdk_rows(url: str, options: dict[str, Any]) -> list[Row]:
    """The destination as the SDK's own reader returns it (``scan``: what the ``s3commit``
    data source reads)."""
    from .. import scan
    from ..errors import InvalidPathError
    from ..options import resolve_options
    from ..store import S3Settings

    settings = S3Settings.resolve(resolve_options(options))
    store = scan.store_for(settings)
    location = parse_s3_url(url)
    listing = scan.list_table(store, location, None)
    try:
        data = scan.file_schema(store, listing)
    except InvalidPathError:  # no visible file
        return []
    wanted = pa.schema([*data, *(pa.field(c, pa.string()) for c in listing.partition_columns)])
    rows: list[Row] = []
    for split in scan.plan_splits(store, listing, 1 << 30):
        for batch in scan.read_split(store, listing, split, data, wanted, "UTC"):
            values = list(batch.to_pydict().values())
            day = values[-1] if listing.partition_columns else values[2]
            rows += [
                (int(values[0][i]), str(values[1][i]), str(day[i])) for i in range(batch.num_rows)
            ]
    return sorted(rows)


# -- the state machine ------------------------------------------------------------------------
class CommitSchedules(RuleBasedStateMachine):
    """Random schedules against one destination per example; see the module docstring.

    Made for a server by :func:`machine_for` (class attributes ``server``, ``proxy``,
    ``bucket``, ``stats``, ``skipped``).
    """

    server: Any
    proxy: fp.FaultProxy
    bucket: str
    stats: Stats
    skipped: frozenset[str] = frozenset()

    def __init__(self) -> None:
        super().__init__()
        self.stats.schedules += 1
        self.s3 = self.server.client()
        self.prefix = f"explore/{uuid.uuid4().hex[:12]}"
        self.url = f"s3://{self.bucket}/{self.prefix}"
        self.location = parse_s3_url(self.url)
        self.format = "parquet"
        self.partitioned = True
        self.rows: frozenset[Row] = frozenset()
        self.next_id = 0
        self.committed_jobs: set[str] = set()
        #: the jobs ``_SUCCESS`` may name now (None: it may be absent)
        self.success_jobs: set[str | None] = {None}
        self.unfinished: Unfinished | None = None

    # -- the destination ----------------------------------------------------------------------
    @initialize(fmt=st.sampled_from(FORMATS), partitioned=st.booleans())
    def destination(self, fmt: str, partitioned: bool) -> None:
        self.format, self.partitioned = fmt, partitioned

    def list_keys(self, prefix: str) -> list[str]:
        keys: list[str] = []
        for page in self.s3.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=prefix
        ):
            keys += [o["Key"] for o in page.get("Contents", [])]
        return keys

    def visible_keys(self) -> list[str]:
        base = self.prefix + "/"
        return [k for k in self.list_keys(base) if not layout.is_hidden(k[len(base) :])]

    def observed(self) -> list[Row]:
        """Every visible row, read object by object (not through the SDK)."""
        rows: list[Row] = []
        for key in self.visible_keys():
            body = self.s3.get_object(Bucket=self.bucket, Key=key)["Body"].read()
            rows += rows_of_object(key, body, self.format)
        return sorted(rows)

    def pending(self) -> list[dict]:
        uploads = self.s3.list_multipart_uploads(Bucket=self.bucket, Prefix=self.prefix + "/")
        return uploads.get("Uploads", [])

    def marker_job(self) -> str | None:
        key = layout.marker_key(self.location)
        try:
            body = self.s3.get_object(Bucket=self.bucket, Key=key)["Body"].read()
        except self.s3.exceptions.NoSuchKey:
            return None
        return json.loads(body)["jobId"]

    def success(self) -> dict | None:
        try:
            body = self.s3.get_object(Bucket=self.bucket, Key=f"{self.prefix}/_SUCCESS")
        except self.s3.exceptions.NoSuchKey:
            return None
        return json.loads(body["Body"].read())

    # -- the model ----------------------------------------------------------------------------
    def new_rows(self, job: JobSpec) -> frozenset[Row]:
        rows = []
        for day in job.days:
            self.next_id += 1
            rows.append((self.next_id, f"n{self.next_id}", day))
        return frozenset(rows)

    def expect(self, job: JobSpec, rows: frozenset[Row], over: frozenset[Row]) -> frozenset[Row]:
        """The rows after ``job`` commits ``rows`` over ``over`` (conflicts judged apart)."""
        unit = self.unit_of(job, rows)
        kept = frozenset(r for r in over if not unit(r)) if job.mode == "replace" else over
        return kept | rows

    def conflicts(self, job: JobSpec, rows: frozenset[Row], over: frozenset[Row]) -> bool:
        unit = self.unit_of(job, rows)
        return job.mode == "fail" and any(unit(r) for r in over)

    def unit_of(self, job: JobSpec, rows: frozenset[Row]) -> Callable[[Row], bool]:
        """Whether an existing row lies in the unit of conflict the job's rows touch: the
        partitions they write or the whole destination (:data:`WHOLE_DESTINATION`)."""
        if self.partitioned and job.committer not in WHOLE_DESTINATION:
            days = {r[2] for r in rows}
            return lambda r: r[2] in days
        return lambda r: True

    # -- running jobs -------------------------------------------------------------------------
    def write(self, job: JobSpec, rows: frozenset[Row], endpoint: str) -> Any:
        import pandas as pd

        from .. import write_committed

        frame = pd.DataFrame(sorted(rows), columns=["id", "name", "day"])
        return write_committed(
            frame,
            self.url,
            committer=job.committer,  # type: ignore[arg-type]
            partition_by=["day"] if self.partitioned else None,
            conflict_mode=job.mode,  # type: ignore[arg-type]
            format=self.format,  # type: ignore[arg-type]
            progress=False,
            options=self.options(job, endpoint),
        )

    def options(self, job: JobSpec, endpoint: str | None) -> dict[str, Any]:
        options: dict[str, Any] = {
            "tasks": job.tasks,
            "threads": 1,
            "max_records_per_file": 2,
            **RETRIES,
        }
        if job.committer == "file":  # the classic committer's _SUCCESS is empty unless asked
            options["success.json"] = True
        if endpoint:
            options["endpoint"] = endpoint
        return options

    def run_job(self, job: JobSpec, rules: list[fp.Fault] | None = None) -> None:
        """One job through the proxy, its outcome checked against the model."""
        if (
            job.committer in RENAME_COMMITTERS
            and self.unfinished is not None
            and "rename_while_unfinished" in self.skipped
        ):
            return
        rows = self.new_rows(job)
        before = self.observed()
        self.proxy.set_rules(rules or [])
        try:
            outcome = self.attempt(job, rows)
        finally:
            self.proxy.reset()
        self.settle(job, rows, before, outcome)

    def attempt(self, job: JobSpec, rows: frozenset[Row]) -> Any:
        """The job's result, or the error it raised (anything but a typed error propagates:
        an untyped error is a violation in itself)."""
        self.stats.jobs += 1
        try:
            return self.write(job, rows, self.proxy.endpoint)
        except S3CommitError as exc:
            return exc

    def settle(
        self,
        job: JobSpec,
        rows: frozenset[Row],
        before: list[Row],
        outcome: Any,
        judged: tuple[frozenset[Row], ...] = (),
    ) -> None:
        """Check a job's outcome and move the model. ``judged``: the states its conflict
        check may have seen (by default the model's rows now); they differ when another job
        committed between its setup and its commit."""
        conflict = {self.conflicts(job, rows, state) for state in judged or (self.rows,)}
        if not isinstance(outcome, S3CommitError):
            assert self.unfinished is None, (
                f"job {outcome.job_id} committed while job {self.unfinished.job_id}'s commit "
                "was unfinished (exclusive)"
            )
            assert False in conflict, f"{job} committed over data in its unit of conflict"
            self.stats.committed += 1
            self.rows = self.expect(job, rows, self.rows)
            self.committed_jobs.add(outcome.job_id)
            self.success_jobs = {outcome.job_id}
            return
        self.stats.failed += 1
        self.failed(job, rows, before, outcome, True in conflict)

    def failed(
        self,
        job: JobSpec,
        rows: frozenset[Row],
        before: list[Row],
        exc: S3CommitError,
        conflict: bool,
    ) -> None:
        """A failed job: its error's ``visible`` against a listing; nothing left unless the
        error names the command that resolves it."""
        what = f"{type(exc).__name__}({exc.visible=}, {exc.remedy=}): {exc}"
        if exc.visible is None and "error_visible" in self.skipped:
            exc.visible = "nothing" if exc.remedy is None else "new and old"
        assert exc.visible in VISIBLE, f"the error does not say what is visible: {what}"
        seen = self.observed()
        new = set(seen) - set(before)
        if exc.visible == "nothing":
            assert seen == before, f"visible={exc.visible!r} but the rows changed: {what}"
        elif exc.visible == "some":
            assert new and new <= rows and set(before) <= set(seen), f"wrong 'some': {what}"
        else:  # all, or new and old
            assert rows <= set(seen) and set(seen) <= set(before) | rows, f"wrong: {what}"
        if self.unfinished is not None:  # another job's commit holds the destination
            assert isinstance(exc, ConcurrentCommitError) or not new, what
            self.assert_left_nothing(exc.job_id, what)
            return
        if isinstance(exc, ConflictError):
            assert conflict, f"{job} refused for a conflict the model does not see: {what}"
        if exc.remedy is None:
            assert exc.visible == "nothing", f"visible files and no remedy: {what}"
            assert self.marker_job() is None, f"the destination is locked, no remedy: {what}"
            self.assert_left_nothing(exc.job_id, what)
            return
        marker = self.marker_job()
        self.unfinished = Unfinished(
            job_id=exc.job_id or marker or "?",
            old=self.rows,
            new=self.expect(job, rows, self.rows),
            remedy=exc.remedy,
        )
        if marker != self.unfinished.job_id:  # nothing holds the destination: remedy it now
            self.run_remedy(roll_forward=False, cli=False, fault=None)

    def assert_left_nothing(self, job_id: str | None, what: str) -> None:
        """No pending upload, no visible file of the job (abortable, no leaks)."""
        assert job_id, f"the error names no job: {what}"
        leaked = [u["Key"] for u in self.pending() if job_of_key(u["Key"]) == job_id]
        assert not leaked, f"job {job_id} left pending uploads {leaked}: {what}"
        hidden = [
            key
            for prefix in layout.job_hidden_prefixes(self.location, job_id)
            for key in self.list_keys(prefix)
        ]
        assert not hidden, f"job {job_id} left its hidden files {hidden}: {what}"

    # -- rules ------------------------------------------------------------------------------
    @rule(job=job_specs(committers=COMMITTERS + RENAME_COMMITTERS))
    def job(self, job: JobSpec) -> None:
        """A job with no fault injected."""
        self.stats.steps += 1
        self.run_job(job)

    @rule(job=job_specs(tasks=(1,), committers=COMMITTERS + RENAME_COMMITTERS), fault=FAULTS)
    def faulted_job(self, job: JobSpec, fault: FaultSpec) -> None:
        """A job whose requests fault at chosen occurrences (one task: a fixed request order)."""
        self.stats.steps += 1
        self.stats.faults[fault.action] = self.stats.faults.get(fault.action, 0) + 1
        self.run_job(job, fault.rules())

    @precondition(lambda self: self.unfinished is None and "kill_driver" not in self.skipped)
    @rule(
        job=job_specs(tasks=(1,)),
        operation=st.sampled_from(KILL_POINTS),
        occurrence=st.integers(1, 4),
    )
    def kill_driver(self, job: JobSpec, operation: str, occurrence: int) -> None:
        """A driver process SIGKILLed as its job commit sends the chosen request."""
        self.stats.steps += 1
        rows = self.new_rows(job)
        if self.conflicts(job, rows, self.rows):  # it would fail before committing
            job = JobSpec(job.committer, "append", job.days, job.tasks)
        if operation == "CompleteMultipartUpload":
            occurrence = min(occurrence, job.files(self.partitioned))
        else:
            occurrence = 2 + occurrence % 3
        frame = pa.table(
            {
                "id": [r[0] for r in sorted(rows)],
                "name": [r[1] for r in sorted(rows)],
                "day": [r[2] for r in sorted(rows)],
            }
        )
        self.stats.kills += 1
        crash_write(
            frame,
            self.url,
            operation=operation,
            occurrence=occurrence,
            committer=job.committer,
            partition_by=["day"] if self.partitioned else None,
            conflict_mode=job.mode,
            format=self.format,
            options=self.options(job, None),
        )
        marker = self.marker_job()
        assert marker is not None, f"killed at {operation} #{occurrence}, no commit marker"
        self.unfinished = Unfinished(marker, self.rows, self.expect(job, rows, self.rows))

    @precondition(lambda self: self.unfinished is not None)
    @rule(roll_forward=st.booleans(), cli=st.booleans(), fault=st.none() | FAULTS)
    def resolve(self, roll_forward: bool, cli: bool, fault: FaultSpec | None) -> None:
        """``recover`` or ``abort`` (API or CLI), its requests faulting if ``fault``; a failed
        job's remedy is the command its error named, and a failed ``recover`` or ``abort`` is
        run again (both must be safe to rerun after their own failure)."""
        self.stats.steps += 1
        self.run_remedy(roll_forward, cli, fault)

    def run_remedy(self, roll_forward: bool, cli: bool, fault: FaultSpec | None) -> None:
        """Resolve the unfinished commit and move the model to what was chosen."""
        self.stats.recoveries += 1
        unfinished = self.unfinished
        assert unfinished is not None
        if unfinished.remedy is not None:
            roll_forward = unfinished.remedy.split()[1] == "recover"
        self.proxy.set_rules(fault.rules() if fault else [])
        try:
            done, text = self.recover(roll_forward, cli, self.proxy.endpoint)
        finally:
            self.proxy.reset()
        if not done:
            assert fault is not None, f"{'recover' if roll_forward else 'abort'} failed: {text}"
            command = "recover" if roll_forward else "abort"
            unfinished.remedy = f"s3commit {command} {self.url}"
            return
        self.unfinished = None
        if roll_forward:
            self.rows = unfinished.new
            self.committed_jobs.add(unfinished.job_id)
            self.success_jobs = {unfinished.job_id}
        else:
            restorable = "cannot be restored" not in text
            self.rows = unfinished.old if restorable else unfinished.old & unfinished.new
            # abort deletes the job's _SUCCESS if it wrote one, and an earlier job's that names
            # files the replace already deleted
            self.success_jobs = self.success_jobs | {None} if restorable else {None}

    def recover(self, roll_forward: bool, cli: bool, endpoint: str) -> tuple[bool, str]:
        """Run recover or abort: whether it succeeded, and what it reported, as text."""
        from .. import cli as command
        from ..recovery import abort, recover

        if cli:
            out = io.StringIO()
            argv = ["recover" if roll_forward else "abort", self.url, "--endpoint", endpoint]
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
                code = command.main(argv)
            return code == 0, out.getvalue()
        try:
            report = (recover if roll_forward else abort)(
                self.url, {"endpoint": endpoint, **RETRIES}
            )
        except S3CommitError as exc:
            return False, f"{type(exc).__name__}: {exc}"
        return True, "\n".join(report.lines())

    @precondition(
        lambda self: self.unfinished is None and "overlapping_commits" not in self.skipped
    )
    @rule(first=job_specs(), second=job_specs(tasks=(1,)), second_set_up_first=st.booleans())
    def overlapping_commits(self, first: JobSpec, second: JobSpec, second_set_up_first: bool):
        """Two jobs on one destination whose lifetimes overlap, held by the proxy so that the
        overlap is exact: either ``second`` runs entirely while ``first``'s commit holds the
        destination (refused, changes nothing), or ``second`` is set up and writing before
        ``first`` runs entirely, and commits after it."""
        self.stats.steps += 1
        if second_set_up_first:
            self.set_up_before_commit(first, second)
        else:
            self.run_during_commit(first, second)

    def run_during_commit(self, first: JobSpec, second: JobSpec) -> None:
        rows = self.new_rows(first)
        if self.conflicts(first, rows, self.rows):
            first = JobSpec(first.committer, "append", first.days, first.tasks)
        before = self.observed()
        self.proxy.set_rules([fp.hold("CompleteMultipartUpload", occurrences=[1])])
        with self.in_thread(self.attempt, first, rows) as outcome:
            self.wait_for("CompleteMultipartUpload", outcome)
            second_rows = self.new_rows(second)
            self.stats.jobs += 1
            try:
                result = self.write(second, second_rows, self.server.endpoint)
            except ConcurrentCommitError as exc:
                assert exc.visible == "nothing", exc
                assert self.observed() == before, "a refused job changed the destination"
                self.assert_left_nothing(exc.job_id, str(exc))
            else:
                raise AssertionError(
                    f"job {result.job_id} committed while another job's commit held the "
                    "destination (exclusive)"
                )
            self.proxy.release()
        self.proxy.reset()
        self.settle(first, rows, before, outcome[0])

    def set_up_before_commit(self, first: JobSpec, second: JobSpec) -> None:
        late_rows = self.new_rows(second)
        judged = self.rows
        self.proxy.set_rules([fp.hold("CreateMultipartUpload", occurrences=[1])])
        with self.in_thread(self.attempt, second, late_rows) as late:
            self.wait_for("CreateMultipartUpload", late)
            rows = self.new_rows(first)
            before = self.observed()
            self.stats.jobs += 1
            try:
                outcome: Any = self.write(first, rows, self.server.endpoint)
            except S3CommitError as exc:
                outcome = exc
            self.settle(first, rows, before, outcome)
            before = self.observed()
            self.proxy.release()
        self.proxy.reset()
        # the late job checked its partitions before it was held (staging: every one; magic:
        # the first, the others as it opens them, after the other job committed)
        judged = (judged, self.rows) if second.committer == "magic" else (judged,)
        self.settle(second, late_rows, before, late[0], judged)

    @precondition(lambda self: self.unfinished is None and "reader" not in self.skipped)
    @rule(job=job_specs(tasks=(1,)), landed=st.integers(0, 2))
    def read_during_commit(self, job: JobSpec, landed: int) -> None:
        """The SDK's reader while a commit is in flight with ``landed`` files completed: it
        returns the rows before the commit or after it, never a part of it."""
        self.stats.steps += 1
        rows = self.new_rows(job)
        if self.conflicts(job, rows, self.rows):
            job = JobSpec(job.committer, "append", job.days, job.tasks)
        landed = min(landed, job.files(self.partitioned) - 1)
        before = self.observed()
        old, new = sorted(self.rows), sorted(self.expect(job, rows, self.rows))
        self.proxy.set_rules([fp.hold("CompleteMultipartUpload", occurrences=[landed + 1])])
        with self.in_thread(self.attempt, job, rows) as outcome:
            self.wait_for("CompleteMultipartUpload", outcome, landed + 1)
            try:
                read = sdk_rows(self.url, {"endpoint": self.server.endpoint})
            finally:
                self.proxy.release()
        self.proxy.reset()
        assert read in (old, new), (
            f"the reader returned {len(read)} rows while a commit was in flight with {landed} "
            f"of {job.files(self.partitioned)} files completed: neither the {len(old)} rows "
            f"before it nor the {len(new)} after"
        )
        self.settle(job, rows, before, outcome[0])

    @precondition(lambda self: "reader" not in self.skipped)
    @rule()
    def read(self) -> None:
        """The SDK's reader returns the model's rows; with a commit unfinished, the rows
        before it or after it."""
        self.stats.steps += 1
        read = sdk_rows(self.url, {"endpoint": self.server.endpoint})
        unfinished = self.unfinished
        if unfinished is None:
            assert read == sorted(self.rows), f"the reader returned {read}, not the model's rows"
            return
        assert read in (sorted(unfinished.old), sorted(unfinished.new)), (
            f"the reader returned {len(read)} rows of a destination whose commit is "
            f"unfinished: neither the {len(unfinished.old)} before it nor the "
            f"{len(unfinished.new)} after"
        )

    @contextlib.contextmanager
    def in_thread(self, run: Callable[..., Any], *args: Any) -> Iterator[list[Any]]:
        """Run ``run(*args)`` in a thread; the list holds its outcome after the block."""
        outcome: list[Any] = []
        thread = threading.Thread(target=lambda: outcome.append(run(*args)), daemon=True)
        thread.start()
        try:
            yield outcome
        finally:
            self.proxy.release()
            thread.join(120)
            assert not thread.is_alive(), "a job did not end within 120 s"
            assert outcome, "the job's thread raised an untyped error (see the log)"

    def wait_for(self, operation: str, outcome: list[Any], count: int = 1) -> None:
        """Until the proxy saw ``count`` requests of ``operation`` (held), or the job ended."""
        deadline = time.monotonic() + 120
        while self.proxy.counts.get(operation, 0) < count and not outcome:
            assert time.monotonic() < deadline, f"no {operation} #{count} within 120 s"
            time.sleep(0.01)

    # -- invariants -------------------------------------------------------------------------
    @invariant()
    def correct(self) -> None:
        """The properties of "A Zero-Rename Committer", section "Correctness", by listing."""
        seen = self.observed()
        keys = self.visible_keys()
        owners = {job_of_key(k) for k in keys}
        unfinished = self.unfinished
        if unfinished is not None:
            assert set(unfinished.old) & set(unfinished.new) <= set(seen), "old data lost"
            assert set(seen) <= set(unfinished.old) | set(unfinished.new), "unknown rows"
            assert owners <= self.committed_jobs | {unfinished.job_id}, f"strangers: {owners}"
            return
        assert seen == sorted(self.rows), (
            f"the destination shows {len(seen)} rows, the model {len(self.rows)}: "
            f"extra {sorted(set(seen) - self.rows)[:5]}, "
            f"missing {sorted(self.rows - set(seen))[:5]}"
        )
        assert owners <= self.committed_jobs, (
            f"files of uncommitted jobs: {owners - self.committed_jobs}"
        )
        assert self.pending() == [], f"pending uploads: {[u['Key'] for u in self.pending()]}"
        assert self.marker_job() is None, "a commit marker is left with no commit unfinished"
        success = self.success()
        job = success["jobId"] if success else None
        assert job in self.success_jobs, (
            f"_SUCCESS names {job}, expected one of {self.success_jobs}"
        )
        if success:
            named = {f["key"] for f in success["files"]}
            own = {k for k in keys if job_of_key(k) == job}
            assert named == own, f"_SUCCESS of job {job} names {sorted(named)}, its files are {own}"

    def teardown(self) -> None:
        """Leave the bucket as found: roll back what is unfinished, delete, abort."""
        self.proxy.reset()
        if self.unfinished is not None or self.marker_job() is not None:
            with contextlib.suppress(Exception):
                from ..recovery import abort

                abort(self.url, {"endpoint": self.server.endpoint}, visible="delete")
        for upload in self.pending():
            self.s3.abort_multipart_upload(
                Bucket=self.bucket, Key=upload["Key"], UploadId=upload["UploadId"]
            )
        keys = self.list_keys(self.prefix + "/")
        for start in range(0, len(keys), 1000):
            objects = [{"Key": k} for k in keys[start : start + 1000]]
            self.s3.delete_objects(Bucket=self.bucket, Delete={"Objects": objects})


def machine_for(
    server: Any, proxy: fp.FaultProxy, bucket: str, stats: Stats
) -> type[CommitSchedules]:
    """The state machine bound to one S3 server, its fault proxy and bucket."""
    skipped = frozenset(s.strip() for s in os.environ.get(SKIP_ENV, "").split(",") if s.strip())
    unknown = skipped - set(SWITCHABLE)
    if unknown:
        raise ValueError(f"{SKIP_ENV}: unknown rules {sorted(unknown)}; use {SWITCHABLE}")
    attributes = {
        "server": server,
        "proxy": proxy,
        "bucket": bucket,
        "stats": stats,
        "skipped": skipped,
    }
    return type(f"CommitSchedulesOn{server.kind.title()}", (CommitSchedules,), attributes)


def budget(ci_examples: int = 25, steps: int = 8) -> settings:
    """A fixed-seed budget of ``ci_examples`` schedules of up to ``steps`` steps, or
    ``$S3COMMIT_EXPLORE_EXAMPLES`` random ones (with pytest's ``--hypothesis-seed``)."""
    longer = os.environ.get(EXAMPLES_ENV)
    shrink = os.environ.get(SHRINK_ENV, "1") != "0"
    return settings(
        max_examples=int(longer) if longer else ci_examples,
        stateful_step_count=steps,
        derandomize=not longer,
        database=None,
        phases=[p for p in Phase if shrink or p in (Phase.explicit, Phase.generate, Phase.target)],
        deadline=None,
        print_blob=True,
        suppress_health_check=list(HealthCheck),
    )
