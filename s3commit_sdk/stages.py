"""Job commit as named, timed stages.

Hadoop's manifest committer is the model (seed 004, "Job Commit"): job commit is a few small
steps, each timed and logged, so a slow or failed commit says which step it was in. The stage
names are the phase names ``_SUCCESS`` reports (``complete_uploads``, ``rename_files``, ...).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager

log = logging.getLogger("s3commit_sdk.stages")


@contextmanager
def timed_stage(phases: dict[str, float], name: str, job_id: str) -> Iterator[None]:
    """Time the block into ``phases[name]``, also when it fails, and log how it ended."""
    started, outcome = time.monotonic(), "failed"
    try:
        yield
        outcome = "done"
    finally:
        phases[name] = elapsed = time.monotonic() - started
        log.debug("job %s: stage %s %s in %.3f s", job_id, name, outcome, elapsed)
