"""The ``_SUCCESS`` document every committer writes: one builder, the same fields for all."""

from __future__ import annotations

import socket
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

from ..formats import (
    SUCCESS_FILENAMES_CAP,
    SUCCESS_FILES_CAP,
    CommittedFile,
    SuccessDocument,
    iostatistics,
)
from ..layout import SUCCESS_FILES_NAME, SUCCESS_MARKER
from ..protocol import JobContext
from ..sparktypes import spark_json_schema


def build_success(
    job: JobContext,
    committer: str,
    files: list[CommittedFile],
    partitions: list[str],
    replaced: int,
    phases: dict[str, float],
    requests: dict[str, int],
    uploaded: bool = True,
    task_durations: dict[str, float] | None = None,
    retries: dict[str, int] | None = None,
    completion_checks: dict[str, int] | None = None,
    table_fields: Mapping[str, Any] | None = None,
) -> SuccessDocument:
    """``uploaded``: the files' bytes went up in this job (the S3 committers), not renamed.
    ``table_fields``: what a table format adds to the document (Delta's version); a stream
    batch adds its stream and batch ids."""
    total_bytes = sum(f.size for f in files)
    uploaded_bytes = total_bytes if uploaded else 0
    metrics = {
        "committer_commits_completed": len(files),
        "committer_bytes_committed": total_bytes,
        "committer_bytes_uploaded": uploaded_bytes,
        "committer_jobs_completed": 1,
        "committer_tasks_completed": len({f.task for f in files}),
        "objects_deleted": replaced,
        **{f"requests.{op}": n for op, n in requests.items()},
    }
    url = job.location.url()
    now = datetime.now(timezone.utc)
    return SuccessDocument(
        timestamp=int(now.timestamp() * 1000),
        date=now.strftime("%a %b %d %H:%M:%S UTC %Y"),  # Hadoop's Date.toString in UTC
        hostname=socket.gethostname(),
        committer=committer,
        description=f"s3commit_sdk {committer} committer",
        job_id=job.job_id,
        job_id_source=job.job_id_source,
        filenames=["/" + f.key.lstrip("/") for f in files[:SUCCESS_FILENAMES_CAP]],
        metrics=metrics,
        diagnostics={
            "destination": url,
            "conflict-mode": job.conflict_mode,
            "format": job.format,
            **{k: str(v) for k, v in job.options.public().items()},
        },
        iostatistics=iostatistics(metrics),
        destination=url,
        conflict_mode=job.conflict_mode,
        format=job.format,
        partition_by=list(job.partition_by),
        files=list(files[:SUCCESS_FILES_CAP]),
        file_count=len(files),
        files_manifest=SUCCESS_FILES_NAME if len(files) > SUCCESS_FILES_CAP else None,
        partitions=[p for p in partitions if p],
        replaced_objects=replaced,
        rows=sum(f.rows for f in files),
        bytes=total_bytes,
        bytes_uploaded=uploaded_bytes,
        durations={k: round(v, 6) for k, v in phases.items()},
        task_durations=dict(sorted((task_durations or {}).items())),
        requests=dict(requests),
        retries=dict(retries or {}),
        completion_checks=dict(completion_checks or {}),
        table={**(table_fields or {}), **(job.stream.fields() if job.stream else {})},
        schema=None if job.data_schema is None else spark_json_schema(job.data_schema),
        request_options=job.settings.requests.recorded(),
    )


def success_objects(
    success: SuccessDocument, files: list[CommittedFile]
) -> list[tuple[str, bytes | bytearray, str]]:
    """What marking success writes beside the data, in order: the full file list when
    ``_SUCCESS`` lists only the first entries (as Hadoop's ``filenames`` stops at 100), then
    ``_SUCCESS`` itself, last, so a reader finding it finds its list. (name, body, type)."""
    document = (SUCCESS_MARKER, success.to_json().encode(), "application/json")
    if success.files_manifest is None:
        return [document]
    listing = success.files_manifest_body(files)
    return [(SUCCESS_FILES_NAME, listing, "application/x-ndjson"), document]
