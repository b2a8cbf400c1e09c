"""The hidden layout under a destination: every name the committers add beside the data.

Why one module: these keys are an on-disk format. A job's tasks, its driver, a later
``s3commit recover`` / ``abort`` and the progress views must agree on them byte for byte, and
readers must skip all of them; spelled once here, they cannot drift apart. Every builder takes
the destination (``S3Location`` or, for the rename committers, ``FsLocation``) and returns a full
key or store path.

::

    <destination>/
      _SUCCESS                              SUCCESS_MARKER: the last job's report (readers skip it)
      _SUCCESS.files.jsonl                  SUCCESS_FILES_NAME: its file list, past 1,000 files
      __s3commit/                           HIDDEN_DIR, hidden_prefix()
        COMMIT_IN_PROGRESS                  marker_key(): exists while a job commit is unfinished
        conditional-put-probe-<uuid>        probe_key(): is If-None-Match honoured (exclusive.py)
        streams/<stream>/batch-<n>.json     batch_record_key(): a committed micro-batch's record
        <job>/                              job_prefix()
          alive                             alive_key(): from job setup until job end
          journal.json                      journal_key(): what the job commit will do
          tasks/<attempt>.pendingset        staging_pendingset_key(): directory, partitioned
      __magic/job-<job>/                    MAGIC_DIR, magic_job_prefix()
        <attempt>/                          magic_attempt_prefix()
        <attempt>/__base/<relpath>          magic_file_key(): a name; the data goes to <relpath>
        <task>.pendingset                   magic_pendingset_key()
      _temporary/                           TEMPORARY, temporary_dir(): rename committers
        <job>/                              classic_job_dir()
          _temporary/<attempt>/             classic_attempt_dir()
          <task>/                           classic_task_dir(): a committed task (v1)
        manifest_<job>/                     manifest_job_root()
          00/tasks/<attempt>/, 00/manifests/  manifest_job_dir()

A job's hidden files live under ``job_hidden_prefixes()`` only, so cleaning one job never
touches another job's metadata. Names starting with ``_`` or ``.`` are hidden (``is_hidden``).
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from .errors import InvalidPathError

if TYPE_CHECKING:
    from .paths import FsLocation, S3Location

#: Our hidden directory under every destination (marker, journals, staging pendingsets).
HIDDEN_DIR = "__s3commit"
SUCCESS_MARKER = "_SUCCESS"
SUCCESS_FILES_NAME = "_SUCCESS.files.jsonl"
MARKER_NAME = "COMMIT_IN_PROGRESS"
JOURNAL_NAME = "journal.json"
STREAMS_DIR = "streams"
ALIVE_NAME = "alive"
#: The magic committer's directory; below ``__base/`` a path is relative to the destination.
MAGIC_DIR = "__magic"
BASE = "__base"
#: The rename committers' directory of job and attempt directories.
TEMPORARY = "_temporary"


def is_hidden(relpath: str) -> bool:
    """Hidden files and directories start with ``_`` or ``.``; every reader skips them."""
    return any(seg[:1] in ("_", ".") for seg in relpath.split("/") if seg)


# -- __s3commit/ ------------------------------------------------------------------------------
def hidden_prefix(location: S3Location) -> str:
    return location.key(HIDDEN_DIR + "/")


def marker_key(location: S3Location) -> str:
    """One per destination: exists exactly while a job commit is unfinished."""
    return hidden_prefix(location) + MARKER_NAME


def probe_key(location: S3Location) -> str:
    """A fresh key for the check that the store honours conditional create."""
    return hidden_prefix(location) + f"conditional-put-probe-{uuid.uuid4()}"


def streams_prefix(location: S3Location, stream: str | None = None) -> str:
    """Where the streams writing into the destination keep their batch records."""
    return hidden_prefix(location) + STREAMS_DIR + "/" + (f"{stream}/" if stream else "")


def batch_record_key(location: S3Location, stream: str, batch_id: int) -> str:
    """A committed micro-batch's record; zero-padded so listing order is batch order."""
    return f"{streams_prefix(location, stream)}batch-{batch_id:020d}.json"


def job_prefix(location: S3Location, job_id: str) -> str:
    return f"{hidden_prefix(location)}{job_id}/"


def alive_key(location: S3Location, job_id: str) -> str:
    """Exists from job setup until job end; its deletion precedes the final upload listing."""
    return job_prefix(location, job_id) + ALIVE_NAME


def journal_key(location: S3Location, job_id: str) -> str:
    return job_prefix(location, job_id) + JOURNAL_NAME


def job_of_journal(location: S3Location, key: str) -> str | None:
    """The job whose journal ``key`` is, or None for any other key."""
    prefix = hidden_prefix(location)
    job_id, _, name = key[len(prefix) :].partition("/")
    return job_id if key.startswith(prefix) and name == JOURNAL_NAME else None


def staging_pendingset_key(location: S3Location, job_id: str, attempt_id: str) -> str:
    return f"{job_prefix(location, job_id)}tasks/{attempt_id}.pendingset"


# -- __magic/ ---------------------------------------------------------------------------------
def magic_job_prefix(location: S3Location, job_id: str) -> str:
    """One directory per job, so concurrent jobs never delete each other's metadata."""
    return location.key(f"{MAGIC_DIR}/job-{job_id}/")


def magic_attempt_prefix(location: S3Location, job_id: str, attempt_id: str) -> str:
    return f"{magic_job_prefix(location, job_id)}{attempt_id}/"


def magic_file_key(location: S3Location, job_id: str, attempt_id: str, relpath: str) -> str:
    """Where an attempt writes ``relpath``; :func:`magic_to_final` maps it to its final key."""
    return f"{magic_attempt_prefix(location, job_id, attempt_id)}{BASE}/{relpath}"


def magic_pendingset_key(location: S3Location, job_id: str, task_id: str) -> str:
    return f"{magic_job_prefix(location, job_id)}{task_id}.pendingset"


def magic_to_final(location: S3Location, magic_key: str) -> str:
    """The ``__base`` rule: everything below ``__base/`` is relative to the destination."""
    base = f"/{BASE}/"
    if not magic_key.startswith(location.key(MAGIC_DIR + "/")) or base not in magic_key:
        raise InvalidPathError(f"{magic_key!r} is not a magic path under {location.url()}")
    return location.key(magic_key.split(base, 1)[1])


def is_pendingset(key: str) -> bool:
    """A task's pendingset, of any S3 committer (the uploads one task attempt committed)."""
    return key.endswith(".pendingset")


def job_hidden_prefixes(location: S3Location, job_id: str) -> tuple[str, str]:
    """Every hidden directory of one job: ``__s3commit/<job>/`` and ``__magic/job-<job>/``."""
    return job_prefix(location, job_id), magic_job_prefix(location, job_id)


# -- _temporary/ (rename committers) ----------------------------------------------------------
def temporary_dir(location: S3Location | FsLocation) -> str:
    return location.key(TEMPORARY)


def classic_job_dir(location: S3Location | FsLocation, job_id: str) -> str:
    """``_temporary/<job UUID>`` rather than Hadoop's reused ``_temporary/0``."""
    return location.key(f"{TEMPORARY}/{job_id}")


def classic_attempt_dir(location: S3Location | FsLocation, job_id: str, attempt_id: str) -> str:
    return f"{classic_job_dir(location, job_id)}/{TEMPORARY}/{attempt_id}"


def classic_task_dir(location: S3Location | FsLocation, job_id: str, task_id: str) -> str:
    """A task attempt directory once committed (algorithm 1)."""
    return f"{classic_job_dir(location, job_id)}/{task_id}"


def manifest_job_root(location: S3Location | FsLocation, job_id: str) -> str:
    """What the manifest committer deletes at job end."""
    return location.key(f"{TEMPORARY}/manifest_{job_id}")


def manifest_job_dir(location: S3Location | FsLocation, job_id: str) -> str:
    """The job attempt directory (``00``) holding ``tasks/`` and ``manifests/``."""
    return f"{manifest_job_root(location, job_id)}/00"
