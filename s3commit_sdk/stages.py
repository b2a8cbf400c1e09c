"""Job commit as named, timed stages over one value.

Hadoop's "Manifest Committer Protocol" is the model (job commit as one small class per stage over
a ``StageConfig``), with pyiceberg's commit-as-value: job commit is a sequence of small steps
that read and extend one value (the S3 committers' :class:`~.committers.commit_run.CommitRun`),
run by :func:`run_stages`. Each step is timed and logged, so a slow or failed commit says
which step it was in; consecutive steps of one *phase* are timed together into the phase names
``_SUCCESS`` reports (``conflict_resolution``, ``complete_uploads``, ...). A step declares what
its failure leaves (``on_failure``): abort, roll back, or keep the journal for recovery. A table
format or a stream adds a step (:func:`add_stage`) instead of overriding one. A Ctrl-C is
held while a commit runs (:mod:`.interrupts`) and raised before the next step, so the policy of
the step it stops says what is left.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import groupby
from typing import Generic, TypeVar

from .interrupts import interruption_point

log = logging.getLogger("s3commit_sdk.stages")

Run = TypeVar("Run")


@dataclass(frozen=True)
class Stage(Generic[Run]):
    """One step of job commit.

    ``phase``: the ``_SUCCESS`` phase it is timed into (None: only into the whole job commit).
    ``on_failure``: called with the error while it propagates; it cleans up what the failure
    left and returns the typed error to raise instead (from the original), or None to re-raise.
    """

    name: str
    action: Callable[[Run], None]
    phase: str | None = None
    on_failure: Callable[[Run, BaseException], BaseException | None] | None = None


def run_stages(run: Run, stages: Sequence[Stage[Run]], phases: dict[str, float], job_id: str):
    """Run ``stages`` in order over ``run``; consecutive stages of a phase are timed as one."""
    for phase, group in groupby(stages, key=lambda stage: stage.phase):
        if phase is None:
            for stage in group:
                _run_one(run, stage, job_id)
            continue
        with timed_stage(phases, phase, job_id):
            for stage in group:
                _run_one(run, stage, job_id)


def _run_one(run: Run, stage: Stage[Run], job_id: str) -> None:
    started, outcome = time.monotonic(), "failed"
    try:
        interruption_point()  # a Ctrl-C held since the last stage stops the commit here
        stage.action(run)
        outcome = "done"
    except BaseException as exc:
        instead = stage.on_failure(run, exc) if stage.on_failure else None
        if instead is not None and instead is not exc:
            raise instead from exc
        raise
    finally:
        elapsed = time.monotonic() - started
        log.debug("job %s: step %s %s in %.3f s", job_id, stage.name, outcome, elapsed)


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


def add_stage(
    stages: Sequence[Stage[Run]],
    stage: Stage[Run],
    *,
    after: str | None = None,
    before: str | None = None,
) -> tuple[Stage[Run], ...]:
    """``stages`` with ``stage`` inserted after (or before) the stage of that name."""
    names = [s.name for s in stages]
    anchor = after or before
    if anchor not in names or (after is None) == (before is None):
        raise ValueError(f"add_stage needs exactly one of after/before naming one of {names}")
    at = names.index(anchor) + (1 if after else 0)
    return (*stages[:at], stage, *stages[at:])


def stages_from(stages: Sequence[Stage[Run]], name: str) -> tuple[Stage[Run], ...]:
    """The stages from the one named ``name`` on: where a resumed commit starts."""
    names = [s.name for s in stages]
    return tuple(stages[names.index(name) :])
