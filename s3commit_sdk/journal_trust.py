"""Recovery trusts nothing it did not write: a commit journal, and the pendingsets a resumed
commit loads, are checked before ``s3commit recover``, ``s3commit abort`` or the resumed job
commit send any request that changes the store.

Anyone who can write under ``__s3commit/`` can write a journal; loaded as it is, it could turn
recovery against other jobs (complete their uploads, delete their markers, pendingsets and
committed files, or a table's log). So a journal of job ``J`` is acted on only if every key it
names is one of ``J``'s own names (DESIGN section 4, "Job-scoped cleanup": the job UUID in every
file name, ``part-<task>-<J>-c<n><ext>`` or ``<dir>/part-<task>-<J>.c<n><ext>``, for the
directory, partitioned and magic committers and their Delta variants alike; nothing hidden), its
upload ids are uploads of those keys, its part ETags are MD5s (so the multipart ETag of each
file can be checked), what ``replace`` deletes are visible data objects of the destination, and
the job still holds its marker: the destination's commit marker, or for a table format that
takes none (Delta) the job's alive marker or its transaction in the table's log. Anything else
is a :class:`~.errors.JournalTrustError` naming the document, the field and the fault.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from . import layout
from .errors import UNCHANGED_VISIBLE, InvalidPathError, JournalTrustError, PendingSetError
from .formats import JOURNAL_VERSION, Journal, PendingSet, PendingUpload, read_pendingset
from .options import CONFLICT_MODES, OUTPUT_FORMATS, S3_COMMITTERS
from .paths import S3Location, escape_partition_value, parse_s3_url
from .store import PendingUploadInfo, S3Store
from .uploads import JOB_UUID, job_of_key

if TYPE_CHECKING:
    from .committers.commit_run import CommitRun

#: A part's ETag as S3 answers an UploadPart: the part's MD5, quoted (some servers leave the
#: quotes off).
PART_ETAG = re.compile(r'"[0-9a-f]{32}"|[0-9a-f]{32}', re.I)
#: An upload id: opaque, but one printable token.
UPLOAD_ID = re.compile(r"[!-~]{1,1024}")
#: Formats whose job commit takes no destination marker (``S3Committer.locks_destination``).
TABLE_FORMATS = ("delta", "iceberg")


class _Refusal:
    """Raises the typed error for one document."""

    def __init__(self, location: S3Location, key: str, remedy: str | None) -> None:
        self.location, self.key, self.remedy = location, key, remedy

    def __call__(self, field: str, problem: str) -> JournalTrustError:
        url = self.location.url()
        return JournalTrustError(
            f"refusing the commit metadata {self.location.url(self.key)}: {field} {problem}. "
            "It was not written by this job's commit as it stands, so it is not acted on. "
            "Nothing was changed.",
            journal_key=self.key,
            field=field,
            problem=problem,
            destination=url,
            visible=UNCHANGED_VISIBLE,
            remedy=self.remedy,
        )


def check_journal(
    journal: Journal, key: str, location: S3Location, job_id: str, remedy: str | None = None
) -> None:
    """Everything a journal can be judged on without a request (see the module's docstring)."""
    refuse = _Refusal(location, key, remedy)
    if not isinstance(job_id, str) or not JOB_UUID.fullmatch(job_id):
        raise refuse("jobId", f"{job_id!r} is not a job UUID: no key can be tied to it")
    if journal.version != JOURNAL_VERSION:
        raise refuse("version", f"{journal.version!r} is not a journal version this SDK wrote")
    if journal.jobId != job_id:
        raise refuse("jobId", f"names job {journal.jobId!r}, not {job_id!r} (its marker's)")
    if journal.bucket != location.bucket:
        raise refuse("bucket", f"{journal.bucket!r} is not the destination's bucket")
    if not _same_destination(journal.destination, location):
        raise refuse("destination", f"{journal.destination!r} is not {location.url()}")
    for field, value, allowed in (
        ("committer", journal.committer, S3_COMMITTERS),
        ("format", journal.format, OUTPUT_FORMATS),
        ("conflictMode", journal.conflictMode, CONFLICT_MODES),
    ):
        if value not in allowed:
            raise refuse(field, f"{value!r} is none of {', '.join(allowed)}")
    if not isinstance(journal.markSuccess, bool):
        raise refuse("markSuccess", f"{journal.markSuccess!r} is not true or false")
    partition_by = journal.partitionBy
    if not isinstance(partition_by, list) or not all(
        isinstance(c, str) and c for c in partition_by
    ):
        raise refuse("partitionBy", f"{partition_by!r} is not a list of column names")
    if not isinstance(journal.commits, list):
        raise refuse("commits", "is not a list")
    _check_commits(journal.commits, location, job_id, refuse, partition_by)
    _check_replaced(journal, location, refuse)


def check_pendingset(
    pendingset: PendingSet, key: str, location: S3Location, job_id: str, remedy: str | None = None
) -> None:
    """A saved pendingset: the job's, and every upload it names one of the job's own."""
    refuse = _Refusal(location, key, remedy)
    if pendingset.jobId != job_id:
        raise refuse("jobId", f"names job {pendingset.jobId!r}, not {job_id!r}")
    if not isinstance(pendingset.commits, list):
        raise refuse("commits", "is not a list")
    _check_commits(pendingset.commits, location, job_id, refuse, None)


def check_uploads(
    journal: Journal,
    key: str,
    location: S3Location,
    pending: Iterable[PendingUploadInfo],
    remedy: str | None = None,
) -> None:
    """Every upload id the journal names that is still pending is an upload of its key: a
    completion or an abort sent with it can reach no other key (moto completes an upload id
    sent with any key)."""
    refuse = _Refusal(location, key, remedy)
    pending_at = {u.upload_id: u.key for u in pending}
    for i, commit in enumerate(journal.commits):
        found = pending_at.get(commit.uploadId)
        if found is not None and found != commit.destinationKey:
            raise refuse(
                f"commits[{i}].uploadId",
                f"{commit.uploadId!r} is the pending upload of {found!r}, not of "
                f"{commit.destinationKey!r}",
            )


def check_marker(
    store: S3Store, location: S3Location, journal: Journal, key: str, remedy: str | None = None
) -> None:
    """The job still holds its marker.

    A journal behind the destination's commit marker was found through it (``recovery.py``);
    a table format's job takes none, so its journal needs the job's alive marker (job setup
    writes it, only cleanup after the table commit deletes it) or its transaction in the log.
    """
    if journal.format not in TABLE_FORMATS:
        return
    if store.head(location.bucket, layout.alive_key(location, journal.jobId)) is not None:
        return
    if table_commit_of(store, location, journal) is not None:
        return
    raise _Refusal(location, key, remedy)(
        "format",
        f"{journal.format!r}: job {journal.jobId} holds no marker (its alive marker "
        f"{layout.alive_key(location, journal.jobId)!r} is gone and the table's log holds no "
        "transaction of it), so no running or committed job stands behind this journal",
    )


def table_commit_of(
    store: S3Store, location: S3Location, journal: Journal, options: Any = None
) -> str | None:
    """Where the journal's job landed in its table (``"version 3 of the Delta table at
    s3://..."``), or None. The table format's package is imported only here; ``options``
    (resolved) may name the Iceberg catalog's URI where the journal's lacks its password."""
    if journal.format == "iceberg":
        from .iceberg.table import IcebergLog

        found = IcebergLog.from_journal(journal, location, store.settings, options).committed(
            journal.jobId
        )
        return None if found is None else found.describe()
    from .delta.table import READ_VERSION_KEY, DeltaLog

    log = DeltaLog(location, store.settings, store)
    done = log.committed(journal.jobId, journal.extraData.get(READ_VERSION_KEY))
    if done is None:
        return None
    return f"version {done.version} of the Delta table at {location.url()}"


def check_resumed(run: CommitRun) -> None:
    """The first stage of a resumed commit (``s3_stages.resumed``): the journal, its marker,
    its upload ids, and every pendingset the job saved, checked before any change."""
    journal, committer = run.resumed_from, run.committer
    assert journal is not None
    location, store, job_id = run.location, run.store, run.job.job_id
    key, remedy = committer.journal_key, f"s3commit abort {location.url()}"
    check_journal(journal, key, location, job_id, remedy)
    if committer.locks_destination and committer.marker_job() != job_id:
        raise _Refusal(location, key, remedy)(
            "jobId",
            f"{job_id}: the destination's commit marker "
            f"{layout.marker_key(location)!r} does not name this job",
        )
    check_marker(store, location, journal, key, remedy)
    # listed and read once: the stages after this one use the same (at 100,000 files each
    # listing of the pending uploads is 100 pages)
    run.listed_pending = store.list_pending(location.bucket, location.dir_prefix)
    check_uploads(journal, key, location, run.listed_pending)
    keys = [
        info.key
        for info in store.list_objects(location.bucket, committer.metadata_prefix)
        if layout.is_pendingset(info.key)
    ]
    with ThreadPoolExecutor(run.job.options.threads, "s3commit-load") as pool:
        bodies = pool.map(lambda key: store.get(location.bucket, key), keys)
        run.saved_pendingsets = {}
        for saved_key, body in zip(keys, bodies, strict=True):
            saved = read_pendingset(body)
            if saved is None:
                continue  # unreadable: nothing of it is ever used
            check_pendingset(saved, saved_key, location, job_id, remedy)
            run.saved_pendingsets[saved_key] = saved


def commit_is_the_jobs(commit: PendingUpload, location: S3Location, job_id: str) -> bool:
    """One upload of a saved pendingset is the job's own (for cleanup, which skips others)."""
    try:
        _check_commit(commit, "commit", location, job_id, _Refusal(location, "", None), None)
    except JournalTrustError:
        return False
    return True


# -- the checks --------------------------------------------------------------------------------
def _check_commits(
    commits: list[PendingUpload],
    location: S3Location,
    job_id: str,
    refuse: _Refusal,
    partition_by: list[str] | None,
) -> None:
    keys: set[str] = set()
    upload_ids: set[str] = set()
    for i, commit in enumerate(commits):
        where = f"commits[{i}]"
        _check_commit(commit, where, location, job_id, refuse, partition_by)
        if commit.destinationKey in keys:
            raise refuse(f"{where}.destinationKey", "is named by two uploads")
        if commit.uploadId in upload_ids:
            raise refuse(f"{where}.uploadId", "is named by two uploads")
        keys.add(commit.destinationKey)
        upload_ids.add(commit.uploadId)


def _check_commit(
    commit: PendingUpload,
    where: str,
    location: S3Location,
    job_id: str,
    refuse: _Refusal,
    partition_by: list[str] | None,
) -> None:
    if not isinstance(commit, PendingUpload):
        raise refuse(where, "is not an upload")
    try:
        commit.validate(job_id, location.bucket, location.dir_prefix)
    except PendingSetError as exc:
        raise refuse(where, str(exc)) from None
    key = commit.destinationKey
    relpath = location.relative(key)
    if layout.is_hidden(relpath):
        raise refuse(f"{where}.destinationKey", f"{key!r} is a hidden key, not a data file")
    if job_of_key(key) != job_id.lower():
        raise refuse(
            f"{where}.destinationKey",
            f"{key!r} does not carry job {job_id}'s UUID where its file names put it "
            "(part-<task>-<job UUID>...)",
        )
    if partition_by is not None:
        directories = relpath.split("/")[:-1]
        expected = [escape_partition_value(c) + "=" for c in partition_by]
        if len(directories) != len(expected) or not all(
            d.startswith(e) for d, e in zip(directories, expected, strict=False)
        ):
            raise refuse(
                f"{where}.destinationKey",
                f"{key!r} does not lie in partition directories of {partition_by}",
            )
    if not isinstance(commit.uploadId, str) or not UPLOAD_ID.fullmatch(commit.uploadId):
        raise refuse(f"{where}.uploadId", f"{commit.uploadId!r:.80} is not an upload id")
    bad = [e for e in commit.etags if not PART_ETAG.fullmatch(e)]
    if bad:
        raise refuse(
            f"{where}.etags",
            f"holds {bad[0]!r:.80}, not a part's MD5 ETag: the file could not be checked",
        )


def _check_replaced(journal: Journal, location: S3Location, refuse: _Refusal) -> None:
    replaced = journal.replaced
    if not isinstance(replaced, list):
        raise refuse("replaced", "is not a list")
    if replaced and journal.conflictMode != "replace":
        raise refuse("replaced", f"is not empty, but conflictMode is {journal.conflictMode!r}")
    if replaced and journal.format in TABLE_FORMATS:
        raise refuse("replaced", f"is not empty: a {journal.format} job deletes no object")
    for i, key in enumerate(replaced):
        where = f"replaced[{i}]"
        if not isinstance(key, str) or not key.startswith(location.dir_prefix):
            raise refuse(
                where, f"{key!r:.200} does not lie under the destination {location.dir_prefix!r}"
            )
        relpath = key[len(location.dir_prefix) :]
        if not relpath or ".." in relpath.split("/") or relpath.endswith("/"):
            raise refuse(where, f"{key!r} is not a data object of the destination")
        if layout.is_hidden(relpath):
            raise refuse(
                where,
                f"{key!r} is a hidden key (commit metadata, a table's log, _SUCCESS), not a "
                "data object replace may delete",
            )


def _same_destination(url: object, location: S3Location) -> bool:
    if not isinstance(url, str):
        return False
    try:
        named = parse_s3_url(url)
    except InvalidPathError:
        return False
    return (named.bucket, named.prefix) == (location.bucket, location.prefix)
