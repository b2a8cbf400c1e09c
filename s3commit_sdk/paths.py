"""Destination URLs, object keys and Hive-style partition directories."""

from __future__ import annotations

import datetime as _dt
import decimal
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

import numpy as np

from .errors import InvalidArgumentError, InvalidPathError
from .layout import SUCCESS_MARKER as SUCCESS_MARKER  # re-exported: the layout owns it
from .layout import is_hidden as is_hidden  # re-exported: the layout owns it
from .sparktext import date_text, java_float_text, timestamp_cast_text

S3_SCHEMES = ("s3", "s3a")
HIVE_DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"
#: S3's limit on the length of a key, in UTF-8 bytes.
MAX_KEY_BYTES = 1024
#: Room a destination leaves below itself for the names we add there (layout.py): a file name
#: and its partition directories, or a hidden key, the deepest of which
#: (``__s3commit/<uuid>/tasks/<attempt>.pendingset``) takes about 80 bytes.
NAME_ROOM = 200

#: S3's bucket naming rules (lowercase letters, digits, '.', '-'); the 3-character minimum is
#: left to the server (a bucket it does not have is a StoreError naming it).
_BUCKET = re.compile(r"^[a-z0-9](?:[a-z0-9.-]{0,61}[a-z0-9])?$")
#: ``host:port`` where the bucket goes, e.g. ``s3://localhost:9000/b``
_PORT = re.compile(r"^[^@:]+:\d+$")

# Spark's ExternalCatalogUtils.charToEscape on a non-Windows host: control characters and
# "#%'*/:=?\{[]^ plus DEL. Spaces are kept (Spark escapes them only on Windows). NUL is ours:
# Spark leaves it in the name (and its write fails); S3 keys cannot carry it, and Spark's
# reader unescapes %00 back to NUL.
_ESCAPED = frozenset([chr(c) for c in range(0x00, 0x20)] + list("\"#%'*/:=?\\\x7f{[]^"))


@dataclass(frozen=True)
class S3Location:
    """An ``s3://bucket/prefix`` destination. ``prefix`` never has leading or trailing ``/``."""

    scheme: str
    bucket: str
    prefix: str

    @property
    def dir_prefix(self) -> str:
        """The key prefix of everything under the destination, always ending in ``/``.

        Listing with the trailing ``/`` keeps ``.../ds1`` from matching ``.../ds10``
        ("A Zero-Rename Committer", "Testing": the listMultipartUploads prefix bug).
        """
        return f"{self.prefix}/" if self.prefix else ""

    def key(self, relpath: str) -> str:
        return self.dir_prefix + relpath

    def url(self, key: str | None = None) -> str:
        return f"{self.scheme}://{self.bucket}/{self.prefix if key is None else key}"

    def relative(self, key: str) -> str:
        if not key.startswith(self.dir_prefix):
            raise InvalidPathError(f"{key!r} does not lie under {self.url()}")
        return key[len(self.dir_prefix) :]


RENAME_SCHEMES = ("file", "memory")


@dataclass(frozen=True)
class FsLocation:
    """A destination on a store with atomic file rename (``file://``, ``memory://``, ...).

    ``root`` is the store's own path of the destination directory, without a trailing ``/``.
    """

    scheme: str
    root: str

    def path(self, relpath: str = "") -> str:
        return f"{self.root}/{relpath}" if relpath else self.root

    def key(self, relpath: str = "") -> str:
        """The store path of ``relpath`` (the name mirrors ``S3Location.key``)."""
        return self.path(relpath.rstrip("/"))

    def url(self, path: str | None = None) -> str:
        return f"{self.scheme}://{self.root if path is None else path}"

    def relative(self, path: str) -> str:
        if not path.startswith(self.root + "/"):
            raise InvalidPathError(f"{path!r} does not lie under {self.url()}")
        return path[len(self.root) + 1 :]


def parse_destination(path: str) -> S3Location | FsLocation:
    """``s3://`` / ``s3a://`` URLs, or ``file://`` and other rename-capable fsspec URLs."""
    scheme = urlsplit(path).scheme if isinstance(path, str) else ""
    if scheme in S3_SCHEMES or scheme not in RENAME_SCHEMES:
        return parse_s3_url(path)
    root = path.split("://", 1)[1].rstrip("/")
    _check_key_text(path)
    if scheme == "file" and not root.startswith("/"):
        raise InvalidPathError(f"{path!r} must be an absolute path: file:///abs/path")
    if scheme == "memory":
        root = "/" + root.lstrip("/")
    if not root.strip("/") or any(seg in (".", "..") for seg in root.split("/")):
        raise InvalidPathError(f"{path!r} needs a directory below the root, without '.' or '..'")
    return FsLocation(scheme, root)


def parse_s3_url(path: str) -> S3Location:
    """Parse ``s3://bucket/prefix`` (or ``s3a://``) with clear errors for what cannot work."""
    if not isinstance(path, str) or not path.strip():
        raise InvalidPathError(f"destination must be a non-empty s3:// URL, got {path!r}")
    parts = urlsplit(path)
    if parts.scheme in S3_SCHEMES and _PORT.match(parts.netloc):
        raise InvalidPathError(  # not repeated: it may be user:secret with a secret holding '/'
            "the destination names a host and port where the bucket goes: write "
            "s3://bucket/prefix and give the server as the option endpoint (http://host:port)"
        )
    # user:secret@bucket; a secret holding '/' leaves only "user:secret" in the netloc
    if "@" in parts.netloc or (":" in parts.netloc and parts.scheme in S3_SCHEMES):
        raise InvalidPathError(
            "the destination carries credentials before its bucket (user:secret@bucket): a "
            "path is shown in logs and messages, so credentials go in the options access.key "
            "and secret.key or in AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY instead"
        )
    if parts.scheme not in S3_SCHEMES:
        raise InvalidPathError(
            f"unsupported scheme in {path!r}: use s3://bucket/prefix (or s3a://), or "
            f"{', '.join(s + '://' for s in RENAME_SCHEMES)} for the manifest and file committers"
        )
    if not parts.netloc:
        raise InvalidPathError(f"{path!r} has no bucket: write it as s3://bucket/prefix")
    if parts.query or parts.fragment:
        raise InvalidPathError(f"{path!r} must not contain '?' or '#'")
    if not _BUCKET.match(parts.netloc) or ".." in parts.netloc:
        raise InvalidPathError(
            f"{parts.netloc!r} is not a valid S3 bucket name: at most 63 lowercase letters, "
            "digits, '.' and '-', starting and ending with a letter or digit"
        )
    prefix = parts.path.strip("/")
    if "//" in prefix:
        raise InvalidPathError(f"{path!r} contains an empty path segment ('//')")
    if any(seg in (".", "..") for seg in prefix.split("/")):
        raise InvalidPathError(f"{path!r} contains '.' or '..' segments")
    if "\\" in prefix:
        raise InvalidPathError(
            f"{path!r} contains a backslash: some S3 servers store '\\' in a key as '/', so "
            "the job's files would be listed under other names than the ones it committed, "
            "and its cleanup would miss them. Separate directories with '/' and leave '\\' "
            "out of the names"
        )
    _check_key_text(path)
    if len(prefix.encode()) + 1 + NAME_ROOM > MAX_KEY_BYTES:
        raise InvalidPathError(
            f"the prefix of {path!r} is {len(prefix.encode())} bytes long: S3 keys hold at most "
            f"{MAX_KEY_BYTES} bytes and the files below it need {NAME_ROOM}; shorten it"
        )
    return S3Location(parts.scheme, parts.netloc, prefix)


def _check_key_text(path: str) -> None:
    """Refuse what an S3 key cannot carry: NUL and other control characters, lone surrogates,
    U+FFFE and U+FFFF (S3's XML listings cannot hold them)."""
    for ch in path:
        if ch < " " or ch in "\x7f\ufffe\uffff" or "\ud800" <= ch <= "\udfff":
            raise InvalidPathError(
                f"{path!r} contains the character U+{ord(ch):04X}, which S3 keys cannot carry"
            )


def check_key(location: S3Location | FsLocation, relpath: str) -> None:
    """A key S3 can carry, of at most 1024 bytes (UTF-8), else a typed error naming it."""
    if isinstance(location, S3Location):
        key = location.key(relpath)
        _check_key_text(key)
        size = len(key.encode())
        if size > MAX_KEY_BYTES:
            raise InvalidPathError(
                f"the key {key!r} is {size} bytes long; S3 keys hold at most {MAX_KEY_BYTES} "
                "bytes (UTF-8): shorten the destination or the partition values"
            )


def escape_partition_value(text: str) -> str:
    """Escape a partition value for a directory name exactly as Spark does."""
    return "".join(f"%{ord(ch):02X}" if ch in _ESCAPED else ch for ch in text)


def partition_value_text(value: object) -> str | None:
    """Render a partition value the way Spark casts it to a string (None for null).

    A zoned timestamp renders in its own zone (Spark's session time zone). Spark reads the wall
    clock back in that zone, taking the earlier instant where clocks go back; the later instant
    of such an hour would land in the earlier one's directory, so it is refused.
    """
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, _dt.datetime):
        if value.fold and value.utcoffset() != value.replace(fold=0).utcoffset():
            raise InvalidArgumentError(
                f"partition value {value.isoformat()} cannot be told apart from the hour before "
                f"it in time zone {value.tzinfo} (clocks go back): Spark would read it back as "
                "the earlier instant. Set spark.sql.session.timeZone to UTC, or partition by a "
                "string column"
            )
        return timestamp_cast_text(value)
    if isinstance(value, _dt.date):
        return date_text(value)
    if isinstance(value, (float, np.floating)):
        return java_float_text(value)
    if isinstance(value, decimal.Decimal):
        return format(value, "f")  # Spark's cast: BigDecimal.toPlainString, never 0E-10
    return str(value)


def partition_dir(columns: list[str], values: list[object]) -> str:
    """``col=value/...`` with Spark's escaping; null and empty strings become the default."""
    segments = []
    for col, value in zip(columns, values, strict=True):
        text = partition_value_text(value)
        shown = HIVE_DEFAULT_PARTITION if not text else escape_partition_value(text)
        segments.append(f"{escape_partition_value(col)}={shown}")
    return "/".join(segments)
