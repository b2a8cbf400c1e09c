"""A write's vocabulary and its options, each option declared once in :data:`REGISTRY`.

The names a write takes (committers, conflict modes, formats, engines) are ``Literal`` types;
the runtime checks read their values with ``typing.get_args``. Every option is one
:class:`OptionSpec`: its names, parser, default, meaning and the committers, formats and engines
that read it. Resolving, refusing an option a write would ignore, the Spark conf defaults,
``_SUCCESS``'s options and the reference table (:func:`reference_table`) all read the registry.

Names mirror Hadoop's ``fs.s3a.committer.*`` keys ("Committing work to S3 with the S3A
Committers") and may be given with or without that prefix; Spark conf keys
``spark.hadoop.fs.s3a.committer.<name>`` set defaults; ``options=`` wins.
"""

from __future__ import annotations

import difflib
import os
import re
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields
from functools import partial
from typing import Any, Literal, get_args

from .credentials import AccessKeys
from .errors import InvalidArgumentError, InvalidOptionError, UnknownOptionError
from .request_options import (
    ENCRYPTION_ALGORITHMS,
    parse_acl,
    parse_checksum_algorithm,
    parse_encryption_algorithm,
    parse_storage_class,
)
from .textformat import format_bytes

# -- the names a write takes ------------------------------------------------------------------
#: the committers that stream output into multipart uploads only job commit completes (s3://)
S3CommitterName = Literal["directory", "partitioned", "magic"]
#: the committers that rename files, on any store with rename
RenameCommitterName = Literal["manifest", "file"]
CommitterName = Literal[S3CommitterName, RenameCommitterName]
ConflictMode = Literal["fail", "append", "replace"]
OutputFormat = Literal["parquet", "orc", "csv", "json", "delta", "iceberg"]
#: where a write's tasks run: this process (pandas / Arrow input) or Spark (classic or Connect)
Engine = Literal["local", "spark"]

S3_COMMITTERS: tuple[S3CommitterName, ...] = get_args(S3CommitterName)
RENAME_COMMITTERS: tuple[RenameCommitterName, ...] = get_args(RenameCommitterName)
COMMITTER_NAMES: tuple[CommitterName, ...] = get_args(CommitterName)
CONFLICT_MODES: tuple[ConflictMode, ...] = get_args(ConflictMode)
OUTPUT_FORMATS: tuple[OutputFormat, ...] = get_args(OutputFormat)
ENGINES: tuple[Engine, ...] = get_args(Engine)
ENGINE_INPUT: dict[Engine, str] = {"local": "pandas / Arrow input", "spark": "a Spark DataFrame"}
#: Spark's save modes, suggested as the conflict mode that does what they do
SAVE_MODES: dict[str, ConflictMode] = {
    "overwrite": "replace",
    "error": "fail",
    "errorifexists": "fail",
}

HADOOP_PREFIX = "fs.s3a.committer."
#: options naming a property of the Iceberg catalog: ``iceberg.catalog.<property>``
ICEBERG_PROPERTY_PREFIX = "iceberg.catalog."
ICEBERG_CATALOG_TYPES = ("sql", "rest", "glue")
SPARK_CONF_PREFIX = "spark.hadoop." + HADOOP_PREFIX


def did_you_mean(
    word: object, names: Iterable[str], aliases: Mapping[str, str] | None = None
) -> str:
    """``" did you mean 'x'?"`` for the name closest to ``word`` (difflib), or ``""``;
    ``aliases`` maps words of another vocabulary to ours (Spark's save modes)."""
    if not isinstance(word, str):
        return ""
    text = word.strip().lower()
    if aliases and text in aliases:
        return f" did you mean {aliases[text]!r}?"
    close = difflib.get_close_matches(text, list(names), n=1)
    return f" did you mean {close[0]!r}?" if close else ""


def check_choice(
    what: str, value: object, choices: tuple[str, ...], aliases: Mapping[str, str] | None = None
) -> Any:
    """``value`` if it is one of ``choices``; else ``InvalidArgumentError`` naming them all and
    the nearest (or the alias that means it)."""
    if isinstance(value, str) and value in choices:
        return value
    raise InvalidArgumentError(
        f"unknown {what} {value!r};{did_you_mean(value, choices, aliases)} use one of "
        f"{', '.join(choices)}"
    )


# -- values -----------------------------------------------------------------------------------
MIN_PART_SIZE = 5 * 1024 * 1024
MAX_PART_SIZE = 5 * 1024**3
MAX_PARTS = 10_000

_SIZE = re.compile(r"^\s*(\d+)\s*([kmgt]?)i?b?\s*$", re.I)
_INTEGER = re.compile(r"^\s*[+-]?\d+\s*$")
#: botocore's rule for a region name: one DNS label
_REGION = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?$")


def local_dir() -> str:
    """This user's private local directory (staged task output, logs): ``$TMPDIR/s3commit-<uid>``.

    Per user, so that two users of one machine never share (or may read) each other's files.
    """
    owner = os.getuid() if hasattr(os, "getuid") else os.environ.get("USERNAME", "user")
    return os.path.join(tempfile.gettempdir(), f"s3commit-{owner}")


def parse_bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise InvalidOptionError(f"option {name!r} must be true or false, got {value!r}", option=name)


def parse_int(name: str, value: Any, minimum: int) -> int:
    """An int or its decimal text; ``True`` or ``1.5`` are refused rather than truncated."""
    exact = isinstance(value, int) and not isinstance(value, bool)
    if not exact and not (isinstance(value, str) and _INTEGER.match(value)):
        raise InvalidOptionError(f"option {name!r} must be an integer, got {value!r}", option=name)
    number = int(value)
    if number < minimum:
        raise InvalidOptionError(
            f"option {name!r} must be at least {minimum}, got {number}", option=name
        )
    return number


def parse_size(name: str, value: Any) -> int:
    """Bytes, or Hadoop-style sizes such as ``64M``."""
    match = _SIZE.match(str(value))
    if not match:
        raise InvalidOptionError(
            f"option {name!r} must be a size like 67108864 or 64M", option=name
        )
    scale = 1024 ** " kmgt".index(match[2].lower() or " ")
    size = int(match[1]) * scale
    if size < MIN_PART_SIZE:
        raise InvalidOptionError(
            f"option {name!r} is {size} bytes; S3 needs parts of at least 5 MiB (5M)",
            option=name,
        )
    return size


def parse_part_size(name: str, value: Any) -> int:
    """A multipart upload's part size: at most 5 GiB, or S3 refuses every part."""
    size = parse_size(name, value)
    if size > MAX_PART_SIZE:
        raise InvalidOptionError(
            f"option {name!r} is {size} bytes; S3 takes parts of at most 5 GiB (5G)",
            option=name,
        )
    return size


def part_size_for(length: int, wanted: int) -> int:
    """The part size for a file of ``length`` bytes: ``wanted``, raised (to whole MiB) where
    ``wanted`` would take more than S3's 10,000 parts; refused above 10,000 parts of 5 GiB."""
    if length <= wanted * MAX_PARTS:
        return wanted
    mib = 1024 * 1024
    size = -(-length // (MAX_PARTS * mib)) * mib
    if size > MAX_PART_SIZE:
        raise InvalidArgumentError(
            f"a file of {length} bytes does not fit S3's {MAX_PARTS} parts of at most 5 GiB"
        )
    return size


def check_part_number(key: str, number: int, part_size: int) -> None:
    """Stop a streamed file at S3's part limit (its completion would be refused), naming the
    option that lifts it."""
    if number > MAX_PARTS:
        raise InvalidArgumentError(
            f"{key!r} reached S3's limit of {MAX_PARTS} parts of multipart.size={part_size} "
            f"bytes ({format_bytes(MAX_PARTS * part_size)}): give a larger multipart.size "
            "(up to 5G)"
        )


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$", re.I)
_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(name: str, value: Any) -> float:
    """Seconds, from a number of seconds or a Hadoop-style duration such as ``100ms``, ``5m``."""
    match = None if isinstance(value, bool) else _DURATION.match(str(value))
    if not match:
        raise InvalidOptionError(
            f"option {name!r} must be a duration like 100ms, 2s or 5m", option=name
        )
    return float(match[1]) * _SECONDS[(match[2] or "s").lower()]


def parse_choice(name: str, value: Any, choices: tuple[str, ...]) -> str:
    text = str(value).strip().lower()
    if text not in choices:
        suggestion = did_you_mean(text, choices)
        raise InvalidOptionError(
            f"option {name!r} must be one of {', '.join(choices)}, got {value!r}"
            + (f";{suggestion}" if suggestion else ""),
            option=name,
        )
    return text


def parse_table_name(name: str, value: Any) -> str:
    """An Iceberg table identifier: ``namespace.name`` (the namespace may be nested)."""
    text = str(value).strip()
    if "." not in text or any(not part.strip() for part in text.split(".")):
        raise InvalidOptionError(
            f"option {name!r} is {value!r}: give the table as namespace.name, such as "
            "'analytics.events'",
            option=name,
        )
    return text


def _parse_algorithm(name: str, value: Any) -> int:
    return int(parse_choice(name, value, ("1", "2")))


def parse_text(name: str, value: Any) -> str:
    """A value given as text: a blank one (or None) would be taken as not given, so it is
    refused rather than ignored."""
    text = "" if value is None else str(value)
    if not text.strip():
        raise InvalidOptionError(
            f"option {name!r} is blank ({value!r}): give it a value, or leave the option out",
            option=name,
        )
    return text


def parse_endpoint(name: str, value: Any) -> str:
    """An http(s) URL with a host; ``user:secret@`` in it is refused without being repeated."""
    text = str(value)
    authority = re.split(r"[/?#]", text.split("://", 1)[-1], maxsplit=1)[0]
    if "@" in authority:
        raise InvalidOptionError(
            f"option {name!r} carries credentials before its host (user:secret@): a URL is "
            "shown in logs and messages, so credentials go in the options access.key and "
            "secret.key or in AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY instead",
            option=name,
        )
    scheme = text.split("://", 1)[0].lower() if "://" in text else ""
    if scheme not in ("http", "https") or not authority or " " in text:
        raise InvalidOptionError(
            f"option {name!r} must be an http:// or https:// URL with a host, such as "
            "http://127.0.0.1:9000",
            option=name,
        )
    return text


def parse_region(name: str, value: Any) -> str:
    """A region name such as ``us-east-1``: botocore refuses others deep inside a task."""
    text = str(value)
    if not _REGION.match(text):
        raise InvalidOptionError(
            f"option {name!r} must be a region name such as us-east-1 (letters, digits and "
            f"'-'), got {text!r}",
            option=name,
        )
    return text


# -- the resolved options of one job ----------------------------------------------------------
@dataclass(frozen=True)
class CommitOptions(AccessKeys):
    """Resolved options of one job, with their defaults; every field is one option of
    :data:`REGISTRY`. Secrets never appear in ``repr`` or in ``_SUCCESS``."""

    threads: int = 32
    #: worker processes completing uploads at job commit (1: the driver's threads alone)
    commit_processes: int = 1
    upload_threads: int = 4
    conflict_mode: ConflictMode | None = None
    unique_filenames: bool = True
    abort_pending_uploads: str = "job"
    buffer_dir: str = field(default_factory=local_dir)
    multipart_size: int = 64 * 1024 * 1024
    mark_successful_jobs: bool = True
    max_records_per_file: int = 0
    validate_output: bool = False
    magic_cleanup: bool = True
    algorithm_version: int = 1
    success_json: bool = False
    retry_mode: str = "standard"
    retry_max_attempts: int = 5
    retry_throttle_limit: int = 20
    retry_throttle_interval: float = 0.1
    retry_throttle_max_duration: float = 300.0
    path_style_access: bool = False
    checksums: str = "auto"
    exclusive_commit: str = "required"
    endpoint: str | None = None
    region: str | None = None
    profile: str | None = None
    tasks: int = 0
    task_max_attempts: int = 1
    encryption_algorithm: str | None = None
    encryption_key: str | None = field(default=None, repr=False)
    storage_class: str | None = None
    acl: str | None = None
    requester_pays: bool = False
    checksum_algorithm: str | None = None
    iceberg_catalog_type: str = "sql"
    iceberg_catalog_uri: str | None = field(default=None, repr=False)
    iceberg_table: str | None = None
    #: ``iceberg.catalog.<property>`` options: (property, value) pairs, secrets possibly
    iceberg_catalog: tuple[tuple[str, str], ...] = field(default=(), repr=False)

    def public(self) -> dict[str, Any]:
        """The options as written into ``_SUCCESS``: the registry's secrets left out."""
        hidden = {spec.attribute for spec in REGISTRY if spec.secret}
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name not in hidden}


# -- the registry -----------------------------------------------------------------------------
@dataclass(frozen=True)
class OptionSpec:
    """One option: its name, how its value is read, its meaning, and what reads it.

    Its default is the :class:`CommitOptions` field's; ``shown_default`` is that default as a
    user writes it, where the value alone would not say it (``64M``, "one per core").
    """

    name: str
    attribute: str
    parse: Callable[[str, Any], Any]
    doc: str
    committers: tuple[CommitterName, ...] = COMMITTER_NAMES
    formats: tuple[OutputFormat, ...] = OUTPUT_FORMATS
    engines: tuple[Engine, ...] = ENGINES
    shown_default: str = ""
    #: what to do instead, said when a write refuses the option
    hint: str = ""
    #: a credential: kept out of ``_SUCCESS``
    secret: bool = False
    #: S3A's own key, where the option is not one of ``fs.s3a.committer.*``
    s3a_name: str = ""

    @property
    def hadoop_name(self) -> str:
        return self.s3a_name or HADOOP_PREFIX + self.name

    @property
    def spark_conf_key(self) -> str:
        return "spark.hadoop." + self.hadoop_name

    @property
    def default(self) -> Any:
        return getattr(CommitOptions(), self.attribute)

    def applies_to(self) -> str:
        """Where the option is read, in words (``"every write"`` if everywhere)."""
        where = []
        if self.committers != COMMITTER_NAMES:
            where.append(_names("committer", self.committers))
        if self.formats != OUTPUT_FORMATS:
            where.append(_names("format", self.formats))
        if self.engines != ENGINES:
            where.append(" or ".join(ENGINE_INPUT[engine] for engine in self.engines))
        return ", ".join(where) or "every write"

    def ignored_by(self, committer: str, format: str, engine: Engine) -> str | None:
        """Why a write with this committer, format and engine would ignore the option, or None.

        The S3 committers share their options, as one Hadoop ``fs.s3a.committer.*``
        configuration serves all its S3A committers: one options mapping then serves
        ``directory``, ``partitioned`` and ``magic`` alike (``buffer.dir`` is harmless with
        ``magic``), and an option none of them reads is refused. The rename committers' options
        are each committer's own, as Hadoop's are (``mapreduce.fileoutputcommitter.*`` for the
        FileOutputCommitter, ``mapreduce.manifest.committer.*`` for the manifest committer):
        ``algorithm.version`` with ``manifest`` is refused.
        """
        shared = S3_COMMITTERS if committer in S3_COMMITTERS else (committer,)
        if set(self.committers).isdisjoint(shared):
            readers = _names("committer", self.committers)
            return f"committer {committer!r} would ignore it: leave it out, or use the {readers}"
        if format not in self.formats:
            return f"format {format!r} would ignore it"
        if engine not in self.engines:
            return self.hint or f"a write of {ENGINE_INPUT[engine]} would ignore it"
        return None


def _names(what: str, names: tuple[str, ...]) -> str:
    return f"{what}s {', '.join(names)}" if len(names) > 1 else f"{what} {names[0]}"


def _positive(name: str, value: Any) -> int:
    return parse_int(name, value, 1)


_RETRY = "attempts per request for"
REGISTRY: tuple[OptionSpec, ...] = (
    OptionSpec(
        "threads",
        "threads",
        _positive,
        "job-commit threads (completions, aborts, renames); also sizes the connection pool",
    ),
    OptionSpec(
        "commit.processes",
        "commit_processes",
        _positive,
        "worker processes completing uploads at job commit, each with `threads` threads, for "
        "jobs of more than 250 files whose driver CPU (one core per process) is the bound",
        committers=S3_COMMITTERS,
    ),
    OptionSpec(
        "upload.threads",
        "upload_threads",
        _positive,
        "parallel part uploads per task (separate from the job-commit `threads`)",
        committers=S3_COMMITTERS,
    ),
    OptionSpec(
        "multipart.size",
        "multipart_size",
        parse_part_size,
        "part size (at least `5M`, at most `5G`: S3's limits). S3 takes at most 10,000 parts "
        "per file: the staging committers raise the part size of a larger file to fit (a file "
        "of 1 TiB goes in parts of 105 MiB); the magic committer, which streams and cannot "
        "know the size, fails the task when a file reaches 10,000 parts (625 GiB at `64M`), "
        "naming the option",
        committers=S3_COMMITTERS,
        shown_default="`64M`",
    ),
    OptionSpec(
        "staging.conflict-mode",
        "conflict_mode",
        partial(parse_choice, choices=CONFLICT_MODES),
        "same as `conflict_mode=`",
        shown_default="`fail`",
    ),
    OptionSpec(
        "staging.unique-filenames",
        "unique_filenames",
        parse_bool,
        "put the job UUID in every file name. `false` gives Spark's plain `part-00000-c000...` "
        "names: a later write's files then replace same-named ones, so it is refused with "
        '`conflict_mode="append"` and with `format="delta"` (whose older versions name the '
        "replaced files); and after a failure neither the job's report nor "
        "`s3commit abort` can tell this job's files and uploads by name (the report says so)",
    ),
    OptionSpec(
        "abort.pending.uploads",
        "abort_pending_uploads",
        partial(parse_choice, choices=("job", "all")),
        "`job`: clean up only this job's uploads; `all`: abort every pending upload under the "
        "destination (unsafe with concurrent writers)",
        committers=S3_COMMITTERS,
    ),
    OptionSpec(
        "buffer.dir",
        "buffer_dir",
        parse_text,
        "local staging directory; needs room for a task's output. Created if missing (mode "
        "0700); one no file can be created in (a file, a read-only or another user's "
        "directory) is refused with `InvalidOptionError` before anything is uploaded",
        committers=("directory", "partitioned"),
        shown_default="`$TMPDIR/s3commit-<uid>`",
    ),
    OptionSpec("marksuccessfuljobs", "mark_successful_jobs", parse_bool, "write `_SUCCESS`"),
    OptionSpec(
        "max_records_per_file",
        "max_records_per_file",
        partial(parse_int, minimum=0),
        "roll to a new file after this many rows (`c000`, `c001`, ...)",
        shown_default="0 (no limit)",
    ),
    OptionSpec(
        "magic.cleanup",
        "magic_cleanup",
        parse_bool,
        "delete the job's `__magic/job-<uuid>/` tree at job end",
        committers=("magic",),
    ),
    OptionSpec(
        "algorithm.version",
        "algorithm_version",
        _parse_algorithm,
        "FileOutputCommitter algorithm: 1 (task output renamed into place at job commit) or 2 "
        "(at task commit)",
        committers=("file",),
    ),
    OptionSpec(
        "success.json",
        "success_json",
        parse_bool,
        "a JSON `_SUCCESS` instead of the 0-byte one",
        committers=("file",),
    ),
    OptionSpec(
        "validate.output",
        "validate_output",
        parse_bool,
        "check every committed file's size (and the S3 committers' multipart ETag: a listing "
        "per directory, or a HEAD); otherwise only files whose completion answer is empty or "
        "unexpected are checked",
        committers=(*S3_COMMITTERS, "manifest"),
    ),
    OptionSpec(
        "retry.max-attempts",
        "retry_max_attempts",
        _positive,
        f"{_RETRY} transient errors (500, 502, 504, `RequestTimeout`, no connection)",
    ),
    OptionSpec(
        "retry.throttle.limit",
        "retry_throttle_limit",
        _positive,
        f"{_RETRY} throttling (`503 SlowDown`, 429) and broken connections (reset, closed, "
        "timed out), after S3A's `fs.s3a.retry.throttle.limit`",
    ),
    OptionSpec(
        "retry.throttle.interval",
        "retry_throttle_interval",
        parse_duration,
        "base of the exponential backoff with full jitter (each pause capped at 20 s); "
        "durations take `ms`, `s`, `m`, `h` (a bare number is seconds)",
        shown_default="`100ms`",
    ),
    OptionSpec(
        "retry.throttle.max-duration",
        "retry_throttle_max_duration",
        parse_duration,
        "no request retries past this much time in all",
        shown_default="`5m`",
    ),
    OptionSpec(
        "retry.mode",
        "retry_mode",
        partial(parse_choice, choices=("standard", "adaptive")),
        "`adaptive` adds botocore's client-side rate limiter",
    ),
    OptionSpec(
        "path.style.access",
        "path_style_access",
        parse_bool,
        "path-style addressing (`endpoint/bucket/key`), which many S3-compatible stores need",
    ),
    OptionSpec(
        "checksums",
        "checksums",
        partial(parse_choice, choices=("auto", "when_supported", "when_required")),
        "request checksums and response validation of boto3 >= 1.36: `when_supported` "
        "(boto3's default), `when_required` (what S3-compatible stores such as Ceph RGW and "
        "older MinIO accept; streamed uploads with a trailing checksum fail there), `auto`: "
        "`when_required` when an `endpoint` is set, boto3's default otherwise",
    ),
    OptionSpec(
        "exclusive.commit",
        "exclusive_commit",
        partial(parse_choice, choices=("required", "unchecked")),
        "`required`: at job setup, check once per endpoint, bucket and process that the store "
        "honours `If-None-Match: *` (a probe object created twice under `__s3commit/`), and "
        "refuse with `StoreError` if not; `unchecked`: skip the check, for stores that ignore "
        "it when you guarantee one writer per destination at a time (two concurrent commits "
        "could then both proceed)",
        committers=S3_COMMITTERS,
    ),
    OptionSpec(
        "endpoint",
        "endpoint",
        parse_endpoint,
        "S3 endpoint, an `http://` or `https://` URL (else `AWS_ENDPOINT_URL_S3`, "
        "`AWS_ENDPOINT_URL`, else AWS)",
        shown_default="from the environment",
    ),
    OptionSpec(
        "region",
        "region",
        parse_region,
        "S3 region, a name such as `us-east-1` (else `AWS_REGION`, `AWS_DEFAULT_REGION`)",
        shown_default="from the environment",
    ),
    OptionSpec(
        "access.key",
        "access_key",
        parse_text,
        "S3 access key, given with `secret.key` (else `AWS_ACCESS_KEY_ID`, a profile, a role)",
        shown_default="from the environment",
        secret=True,
    ),
    OptionSpec(
        "secret.key",
        "secret_key",
        parse_text,
        "S3 secret key, given with `access.key`; never logged or written to `_SUCCESS`",
        shown_default="from the environment",
        secret=True,
    ),
    OptionSpec(
        "session.token",
        "session_token",
        parse_text,
        "session token of temporary credentials (else `AWS_SESSION_TOKEN` where the keys come "
        "from the environment)",
        shown_default="from the environment",
        secret=True,
    ),
    OptionSpec(
        "profile",
        "profile",
        parse_text,
        "AWS profile to take credentials from (else `AWS_PROFILE`)",
        shown_default="from the environment",
    ),
    OptionSpec(
        "tasks",
        "tasks",
        _positive,
        "number of tasks",
        engines=("local",),
        shown_default="one per core",
        hint="with a Spark DataFrame Spark decides the tasks (one per partition: repartition "
        "the DataFrame)",
    ),
    OptionSpec(
        "task.max-attempts",
        "task_max_attempts",
        _positive,
        "attempts per task",
        engines=("local",),
        hint="with a Spark DataFrame Spark decides a task's attempts (spark.task.maxFailures)",
    ),
    OptionSpec(
        "encryption.algorithm",
        "encryption_algorithm",
        parse_encryption_algorithm,
        "server-side encryption of every object the job creates (data, pendingsets, journal, "
        "markers, `_SUCCESS`, Delta log entries): "
        + ", ".join(f"`{name}`" for name in ENCRYPTION_ALGORITHMS)
        + " (S3's or S3A's names); `_SUCCESS` records it",
        s3a_name="fs.s3a.encryption.algorithm",
        shown_default="the bucket's default",
    ),
    OptionSpec(
        "encryption.key",
        "encryption_key",
        parse_text,
        "the KMS key id or ARN (`aws:kms`, `aws:kms:dsse`; else the account's default key), or "
        "the SSE-C key as base64 of 32 bytes, sent with every request on the job's objects, "
        "readers' included, and never logged or written to `_SUCCESS` (its MD5 is)",
        s3a_name="fs.s3a.encryption.key",
        shown_default="none",
        secret=True,
    ),
    OptionSpec(
        "create.storage.class",
        "storage_class",
        parse_storage_class,
        "storage class of every object the job creates, such as `STANDARD_IA` or "
        "`INTELLIGENT_TIERING`; archive classes (`GLACIER`, `DEEP_ARCHIVE`) are refused: "
        "nothing in them can be read back until restored",
        s3a_name="fs.s3a.create.storage.class",
        shown_default="the bucket's default",
    ),
    OptionSpec(
        "acl.default",
        "acl",
        parse_acl,
        "canned ACL of every object the job creates, such as `bucket-owner-full-control` "
        "when writing into another account's bucket",
        s3a_name="fs.s3a.acl.default",
        shown_default="none",
    ),
    OptionSpec(
        "requester.pays.enabled",
        "requester_pays",
        parse_bool,
        "send `x-amz-request-payer: requester` with every request, for buckets whose owner "
        "bills the requester",
        s3a_name="fs.s3a.requester.pays.enabled",
    ),
    OptionSpec(
        "checksum.algorithm",
        "checksum_algorithm",
        parse_checksum_algorithm,
        "end-to-end integrity: every part carries the `CRC32`, `CRC32C` or `SHA256` checksum of "
        "its bytes (`CRC32C` needs the `crc32c` package or `botocore[crt]`, `CRC64NVME` needs "
        "`botocore[crt]`), which the server checks; the completion repeats the part "
        "checksums, verification compares the file's stored checksum (a HEAD) with the one "
        "they make, and `_SUCCESS` records it per file. A store that does not keep the "
        "checksum (Ceph RGW 16) or refuses it is refused at job setup, before any upload",
        s3a_name="fs.s3a.create.checksum.algorithm",
        shown_default="none",
    ),
    OptionSpec(
        "iceberg.catalog.type",
        "iceberg_catalog_type",
        partial(parse_choice, choices=ICEBERG_CATALOG_TYPES),
        "the Iceberg catalog that commits each job's snapshot: `sql` (a sqlite file or a "
        "database such as PostgreSQL, by `iceberg.catalog.uri`), `rest` or `glue`",
        formats=("iceberg",),
    ),
    OptionSpec(
        "iceberg.catalog.uri",
        "iceberg_catalog_uri",
        parse_text,
        "the catalog's URI: a SQLAlchemy URI for `sql` (`sqlite:////path/catalog.db`, "
        "`postgresql+psycopg2://user:password@host/db`), the server's URL for `rest`; kept "
        "out of `_SUCCESS` (the journal records it without its password)",
        formats=("iceberg",),
        shown_default="`sqlite:///<working directory>/s3commit-iceberg.db` for `sql`",
        secret=True,
    ),
    OptionSpec(
        "iceberg.table",
        "iceberg_table",
        parse_table_name,
        "the table in the catalog, `namespace.name`; its location is the destination path",
        formats=("iceberg",),
        shown_default="`default.<the path's last segment>`",
    ),
    OptionSpec(
        ICEBERG_PROPERTY_PREFIX + "<property>",
        "iceberg_catalog",
        lambda name, value: ((name.split(ICEBERG_PROPERTY_PREFIX, 1)[1], parse_text(name, value)),),
        "any other pyiceberg catalog property, such as `iceberg.catalog.warehouse` or "
        "`iceberg.catalog.glue.endpoint`; kept out of `_SUCCESS` (they may hold tokens)",
        formats=("iceberg",),
        shown_default="none",
        secret=True,
    ),
)
OPTION_NAMES = tuple(sorted(spec.name for spec in REGISTRY))
#: every spelling of an option: its name and its Hadoop name
_SPELLINGS = {
    **{spec.name: spec for spec in REGISTRY},
    **{spec.hadoop_name: spec for spec in REGISTRY},
}


def option_spec(name: object) -> OptionSpec:
    """The option ``name`` spells (with or without ``fs.s3a.committer.``); an unknown name is
    refused naming the nearest. ``iceberg.catalog.<property>`` names a catalog property."""
    if isinstance(name, str) and name in _SPELLINGS:
        return _SPELLINGS[name]
    bare = name.removeprefix(HADOOP_PREFIX) if isinstance(name, str) else ""
    if bare.startswith(ICEBERG_PROPERTY_PREFIX) and bare[len(ICEBERG_PROPERTY_PREFIX) :].strip():
        return _SPELLINGS[ICEBERG_PROPERTY_PREFIX + "<property>"]
    raise UnknownOptionError(
        f"unknown option {name!r};{did_you_mean(name, _SPELLINGS)} known options: "
        f"{', '.join(OPTION_NAMES)}"
    )


def resolve_options(
    options: Mapping[str, Any] | None, defaults: Mapping[str, Any] | None = None
) -> CommitOptions:
    """Validate ``options`` over ``defaults`` (e.g. from Spark conf); unknown names raise."""
    values: dict[str, Any] = {}
    for source in (defaults, options):
        values.update(_parse_source(source))
    if bool(values.get("access_key")) != bool(values.get("secret_key")):
        raise InvalidArgumentError(
            "options 'access.key' and 'secret.key' go together: give both, or neither to use "
            "the credentials of the environment"
        )
    return CommitOptions(**values)


def check_combination(
    options: CommitOptions,
    given: Mapping[str, Any] | None,
    *,
    committer: str,
    format: str,
    engine: Engine,
    conflict_mode: str,
) -> None:
    """Refuse the options given to this write (``given``, already resolved into ``options``)
    that it would ignore, or that contradict each other.

    Defaults from Spark conf are not refused: they serve every write of the session, and each
    write takes those that apply to it.
    """
    refused = {}
    for name in given or {}:
        spec = option_spec(name)
        reason = spec.ignored_by(committer, format, engine)
        if reason:
            refused[name] = f"option {name!r} applies to {spec.applies_to()} only: {reason}"
    if refused:
        raise InvalidOptionError("; ".join(refused.values()), option=", ".join(refused))
    if not options.unique_filenames and conflict_mode == "append":
        raise InvalidOptionError(
            "staging.unique-filenames=false with conflict_mode='append' would overwrite the "
            "files of an earlier write that carry the same names (part-00000-c000...): keep "
            "unique file names to append, or use 'replace' or 'fail'",
            option="staging.unique-filenames",
        )
    if not options.unique_filenames and format in ("delta", "iceberg"):
        raise InvalidOptionError(
            f"staging.unique-filenames=false with format={format!r} would overwrite the files "
            "older versions of the table still name (part-00000-c000...), breaking time "
            "travel: keep unique file names for a table",
            option="staging.unique-filenames",
        )


def _parse_source(source: Mapping[str, Any] | None) -> dict[str, Any]:
    """One mapping of options by attribute; two spellings of one option must agree."""
    if source is None:
        return {}
    if not isinstance(source, Mapping):
        raise InvalidArgumentError(
            f"options must be a mapping of option names to values, such as a dict, not "
            f"{type(source).__name__}"
        )
    values: dict[str, Any] = {}
    spelled: dict[str, str] = {}
    for raw_name, value in source.items():
        spec = option_spec(raw_name)
        parsed = spec.parse(raw_name, value)  # its errors name the option as it was given
        if spec.attribute == "iceberg_catalog":  # one option per catalog property
            parsed = tuple(sorted({**dict(values.get(spec.attribute, ())), **dict(parsed)}.items()))
            values[spec.attribute], spelled[spec.attribute] = parsed, raw_name
            continue
        if spec.attribute in values and values[spec.attribute] != parsed:
            raise InvalidArgumentError(
                f"options {spelled[spec.attribute]!r} and {raw_name!r} are both given, with "
                "different values: they are one option, give it once"
            )
        values[spec.attribute], spelled[spec.attribute] = parsed, raw_name
    return values


def spark_conf_defaults(conf_items: Mapping[str, str]) -> dict[str, str]:
    """Options from ``spark.hadoop.fs.s3a.committer.*`` keys we know; others are Hadoop's."""
    keys = {spec.spark_conf_key: spec.name for spec in REGISTRY}
    return {keys[key]: value for key, value in conf_items.items() if key in keys}


def reference_table() -> str:
    """Every option as a Markdown table (the docs' options page): name, Hadoop-style name, where
    it applies, default, meaning."""
    rows = [
        "| option | Hadoop-style name | applies to | default | meaning |",
        "| --- | --- | --- | --- | --- |",
    ]
    for spec in REGISTRY:
        cells = (
            f"`{spec.name}`",
            f"`{spec.hadoop_name}`",
            spec.applies_to(),
            spec.shown_default or _shown(spec.default),
            f"{spec.doc}; {spec.hint}" if spec.hint else spec.doc,
        )
        rows.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return "\n".join(rows) + "\n"


def _shown(value: Any) -> str:
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    return f"`{value}`" if isinstance(value, str) else str(value)
