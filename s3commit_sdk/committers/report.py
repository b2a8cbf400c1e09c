"""The ``_SUCCESS`` document every committer writes: one builder, the same fields for all."""

from __future__ import annotations

from typing import Any

from ..formats import success_document
from ..protocol import JobContext


def build_success(
    job: JobContext,
    committer: str,
    files: list[dict[str, Any]],
    partitions: list[str],
    replaced: int,
    phases: dict[str, float],
    requests: dict[str, int],
    uploaded: bool = True,
    task_durations: dict[str, float] | None = None,
    retries: dict[str, int] | None = None,
    completion_checks: dict[str, int] | None = None,
) -> dict[str, Any]:
    """``files`` entries carry key, size, rows, partition, etag and task."""
    total_bytes = sum(f["size"] for f in files)
    metrics = {
        "committer_commits_completed": len(files),
        "committer_bytes_committed": total_bytes,
        "committer_bytes_uploaded": total_bytes if uploaded else 0,
        "committer_jobs_completed": 1,
        "committer_tasks_completed": len({f["task"] for f in files}),
        "objects_deleted": replaced,
        **{f"requests.{op}": n for op, n in requests.items()},
    }
    url = job.location.url()
    return success_document(
        committer=committer,
        job_id=job.job_id,
        job_id_source=job.job_id_source,
        description=f"s3commit_sdk {committer} committer",
        filenames=["/" + f["key"].lstrip("/") for f in files],
        metrics=metrics,
        diagnostics={
            "destination": url,
            "conflict-mode": job.conflict_mode,
            "format": job.format,
            **{k: str(v) for k, v in job.options.public().items()},
        },
        extra={
            "destination": url,
            "conflictMode": job.conflict_mode,
            "format": job.format,
            "partitionBy": list(job.partition_by),
            "files": [{k: v for k, v in f.items() if k != "path"} for f in files],
            "partitions": [p for p in partitions if p],
            "replacedObjects": replaced,
            "rows": sum(f["rows"] for f in files),
            "bytes": total_bytes,
            "bytesUploaded": total_bytes if uploaded else 0,
            "durations": {k: round(v, 6) for k, v in phases.items()},
            "taskDurations": dict(sorted((task_durations or {}).items())),
            "requests": requests,
            "retries": dict(retries or {}),
            "completionChecks": dict(completion_checks or {}),
        },
    )
