"""Pending-upload inspection and ``_SUCCESS`` reading, shared by the CLI, widgets and demo."""

from __future__ import annotations

from typing import Any

from .formats import parse_success
from .options import resolve_options
from .paths import SUCCESS_MARKER, parse_s3_url
from .store import PendingUploadInfo, S3Settings, S3Store


def _store(options: dict[str, Any] | None) -> S3Store:
    return S3Store(S3Settings.resolve(resolve_options(options)))


def pending_uploads(path: str, options: dict[str, Any] | None = None) -> list[PendingUploadInfo]:
    """Every pending multipart upload under the directory ``path`` (never its siblings)."""
    location = parse_s3_url(path)
    return _store(options).list_pending(location.bucket, location.dir_prefix)


def read_success(path: str, options: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """The destination's ``_SUCCESS`` document; None for the classic committer's empty file."""
    location = parse_s3_url(path)
    return parse_success(_store(options).get(location.bucket, location.key(SUCCESS_MARKER)))


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def format_success(doc: dict[str, Any] | None) -> str:
    """A plain-text summary of a ``_SUCCESS`` document, one table per concern."""
    if doc is None:
        return "_SUCCESS is a 0-byte file: the classic committer ran; it records nothing else."
    lines = [
        f"committer     {doc['committer']}  (job {doc['jobId']})",
        f"destination   {doc.get('destination', '?')}",
        f"conflict mode {doc.get('conflictMode', '?')}   format {doc.get('format', '?')}",
        f"committed     {len(doc.get('files', []))} files, {doc.get('rows', 0)} rows, "
        f"{_size(doc.get('bytes', 0))}; replaced {doc.get('replacedObjects', 0)} objects",
        "",
        f"{'partition':<40} {'files':>5} {'rows':>10} {'bytes':>12}",
    ]
    per_partition: dict[str, list[int]] = {}
    for entry in doc.get("files", []):
        name = "/".join(f"{k}={v}" for k, v in entry["partition"].items()) or "(root)"
        totals = per_partition.setdefault(name, [0, 0, 0])
        totals[0] += 1
        totals[1] += entry["rows"]
        totals[2] += entry["size"]
    for name, (files, rows, size) in sorted(per_partition.items()):
        lines.append(f"{name:<40} {files:>5} {rows:>10} {size:>12}")
    lines += [
        "",
        "phase durations (s): "
        + ", ".join(f"{k}={v:.3f}" for k, v in doc.get("durations", {}).items()),
    ]
    lines.append("requests: " + ", ".join(f"{k}={v}" for k, v in doc.get("requests", {}).items()))
    return "\n".join(lines)
