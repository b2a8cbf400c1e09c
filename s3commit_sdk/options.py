"""Committer options: names mirror Hadoop's ``fs.s3a.committer.*`` keys without the prefix.

Spark conf keys ``spark.hadoop.fs.s3a.committer.<name>`` set defaults; ``options=`` wins.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from .credentials import AccessKeys
from .errors import InvalidArgumentError, UnknownOptionError
from .textformat import format_bytes

CONFLICT_MODES = ("fail", "append", "replace")
MIN_PART_SIZE = 5 * 1024 * 1024
MAX_PART_SIZE = 5 * 1024**3
MAX_PARTS = 10_000
SPARK_CONF_PREFIX = "spark.hadoop.fs.s3a.committer."

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
    raise InvalidArgumentError(f"option {name!r} must be true or false, got {value!r}")


def parse_int(name: str, value: Any, minimum: int) -> int:
    """An int or its decimal text; ``True`` or ``1.5`` are refused rather than truncated."""
    exact = isinstance(value, int) and not isinstance(value, bool)
    if not exact and not (isinstance(value, str) and _INTEGER.match(value)):
        raise InvalidArgumentError(f"option {name!r} must be an integer, got {value!r}")
    number = int(value)
    if number < minimum:
        raise InvalidArgumentError(f"option {name!r} must be at least {minimum}, got {number}")
    return number


def parse_size(name: str, value: Any) -> int:
    """Bytes, or Hadoop-style sizes such as ``64M``."""
    match = _SIZE.match(str(value))
    if not match:
        raise InvalidArgumentError(f"option {name!r} must be a size like 67108864 or 64M")
    scale = 1024 ** " kmgt".index(match[2].lower() or " ")
    size = int(match[1]) * scale
    if size < MIN_PART_SIZE:
        raise InvalidArgumentError(
            f"option {name!r} is {size} bytes; S3 needs parts of at least 5 MiB (5M)"
        )
    return size


def parse_part_size(name: str, value: Any) -> int:
    """A multipart upload's part size: at most 5 GiB, or S3 refuses every part."""
    size = parse_size(name, value)
    if size > MAX_PART_SIZE:
        raise InvalidArgumentError(
            f"option {name!r} is {size} bytes; S3 takes parts of at most 5 GiB (5G)"
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
        raise InvalidArgumentError(f"option {name!r} must be a duration like 100ms, 2s or 5m")
    return float(match[1]) * _SECONDS[(match[2] or "s").lower()]


def parse_choice(name: str, value: Any, choices: tuple[str, ...]) -> str:
    text = str(value).strip().lower()
    if text not in choices:
        raise InvalidArgumentError(f"option {name!r} must be one of {', '.join(choices)}")
    return text


def _text(name: str, value: Any) -> str:
    return str(value)


def parse_endpoint(name: str, value: Any) -> str:
    """An http(s) URL with a host; ``user:secret@`` in it is refused without being repeated."""
    text = str(value)
    authority = re.split(r"[/?#]", text.split("://", 1)[-1], maxsplit=1)[0]
    if "@" in authority:
        raise InvalidArgumentError(
            f"option {name!r} carries credentials before its host (user:secret@): a URL is "
            "shown in logs and messages, so credentials go in the options access.key and "
            "secret.key or in AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY instead"
        )
    scheme = text.split("://", 1)[0].lower() if "://" in text else ""
    if scheme not in ("http", "https") or not authority or " " in text:
        raise InvalidArgumentError(
            f"option {name!r} must be an http:// or https:// URL with a host, such as "
            "http://127.0.0.1:9000"
        )
    return text


def parse_region(name: str, value: Any) -> str:
    """A region name such as ``us-east-1``: botocore refuses others deep inside a task."""
    text = str(value)
    if not _REGION.match(text):
        raise InvalidArgumentError(
            f"option {name!r} must be a region name such as us-east-1 (letters, digits and "
            f"'-'), got {text!r}"
        )
    return text


@dataclass(frozen=True)
class CommitOptions(AccessKeys):
    """Resolved options of one job. Secrets never appear in ``repr`` or in ``_SUCCESS``."""

    threads: int = 32
    upload_threads: int = 4
    conflict_mode: str | None = None
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

    def public(self) -> dict[str, Any]:
        """The options as written into ``_SUCCESS``: credentials left out."""
        hidden = {f.name for f in fields(AccessKeys)}
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name not in hidden}


# option name -> (dataclass field, parser)
_PARSERS: dict[str, tuple[str, Callable[[str, Any], Any]]] = {
    "threads": ("threads", lambda n, v: parse_int(n, v, 1)),
    "upload.threads": ("upload_threads", lambda n, v: parse_int(n, v, 1)),
    "staging.conflict-mode": (
        "conflict_mode",
        lambda n, v: parse_choice(n, v, CONFLICT_MODES),
    ),
    "staging.unique-filenames": ("unique_filenames", parse_bool),
    "abort.pending.uploads": (
        "abort_pending_uploads",
        lambda n, v: parse_choice(n, v, ("job", "all")),
    ),
    "buffer.dir": ("buffer_dir", _text),
    "multipart.size": ("multipart_size", parse_part_size),
    "marksuccessfuljobs": ("mark_successful_jobs", parse_bool),
    "max_records_per_file": ("max_records_per_file", lambda n, v: parse_int(n, v, 0)),
    "validate.output": ("validate_output", parse_bool),
    "magic.cleanup": ("magic_cleanup", parse_bool),
    "algorithm.version": ("algorithm_version", lambda n, v: int(parse_choice(n, v, ("1", "2")))),
    "success.json": ("success_json", parse_bool),
    "retry.mode": ("retry_mode", lambda n, v: parse_choice(n, v, ("standard", "adaptive"))),
    "retry.max-attempts": ("retry_max_attempts", lambda n, v: parse_int(n, v, 1)),
    "retry.throttle.limit": ("retry_throttle_limit", lambda n, v: parse_int(n, v, 1)),
    "retry.throttle.interval": ("retry_throttle_interval", parse_duration),
    "retry.throttle.max-duration": ("retry_throttle_max_duration", parse_duration),
    "path.style.access": ("path_style_access", parse_bool),
    "checksums": (
        "checksums",
        lambda n, v: parse_choice(n, v, ("auto", "when_supported", "when_required")),
    ),
    "exclusive.commit": (
        "exclusive_commit",
        lambda n, v: parse_choice(n, v, ("required", "unchecked")),
    ),
    "endpoint": ("endpoint", parse_endpoint),
    "region": ("region", parse_region),
    "access.key": ("access_key", _text),
    "secret.key": ("secret_key", _text),
    "session.token": ("session_token", _text),
    "profile": ("profile", _text),
    "tasks": ("tasks", lambda n, v: parse_int(n, v, 1)),
    "task.max-attempts": ("task_max_attempts", lambda n, v: parse_int(n, v, 1)),
}
OPTION_NAMES = tuple(sorted(_PARSERS))


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


def check_combination(options: CommitOptions, *, spark: bool, conflict_mode: str) -> None:
    """Refuse options that this write would silently ignore, or that contradict each other."""
    if spark and (options.tasks or options.task_max_attempts != 1):
        raise InvalidArgumentError(
            "options 'tasks' and 'task.max-attempts' apply to pandas / Arrow input only: with "
            "a Spark DataFrame Spark decides the tasks (one per partition: repartition the "
            "DataFrame) and their attempts (spark.task.maxFailures)"
        )
    if not options.unique_filenames and conflict_mode == "append":
        raise InvalidArgumentError(
            "staging.unique-filenames=false with conflict_mode='append' would overwrite the "
            "files of an earlier write that carry the same names (part-00000-c000...): keep "
            "unique file names to append, or use 'replace' or 'fail'"
        )


def _parse_source(source: Mapping[str, Any] | None) -> dict[str, Any]:
    """One mapping of options by field; two spellings of one option must agree."""
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
        name = raw_name.removeprefix("fs.s3a.committer.") if isinstance(raw_name, str) else ""
        if name not in _PARSERS:
            raise UnknownOptionError(
                f"unknown option {raw_name!r}; known options: {', '.join(OPTION_NAMES)}"
            )
        attr, parser = _PARSERS[name]
        parsed = parser(name, value)
        if attr in values and values[attr] != parsed:
            raise InvalidArgumentError(
                f"options {spelled[attr]!r} and {raw_name!r} are both given, with different "
                "values: they are one option, give it once"
            )
        values[attr], spelled[attr] = parsed, raw_name
    return values


def spark_conf_defaults(conf_items: Mapping[str, str]) -> dict[str, str]:
    """Options from ``spark.hadoop.fs.s3a.committer.*`` keys we know; others are Hadoop's."""
    found = {}
    for key, value in conf_items.items():
        name = key.removeprefix(SPARK_CONF_PREFIX)
        if key.startswith(SPARK_CONF_PREFIX) and name in _PARSERS:
            found[name] = value
    return found
