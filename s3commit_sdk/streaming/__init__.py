"""Exactly-once Structured Streaming: every micro-batch one committed job, idempotent on replay.

Spark replays a micro-batch after a crash with the same batch id and the same rows (a driver
killed after the sink's commit and before Spark's commit log replays it). So each batch is a
job whose id derives from the stream and the batch (:mod:`.batch`), its commit journal is the
batch's intent and a per-batch record its proof (:mod:`.ledger`), and job commit first settles
an earlier attempt of the same batch (:mod:`.commit`): rolled forward if it died mid-commit,
and this attempt's uploads aborted if the batch is already committed.

Imports are lazy: :mod:`..protocol` imports :mod:`.batch`, below the committers.
"""

from __future__ import annotations

from typing import Any

__all__ = ["StreamBatch", "exactly_once", "expire_batches", "list_streams", "stream_batches"]


def __getattr__(name: str) -> Any:
    if name == "StreamBatch":
        from .batch import StreamBatch

        return StreamBatch
    if name == "exactly_once":
        from .foreach import exactly_once

        return exactly_once
    if name in ("list_streams", "stream_batches", "expire_batches"):
        from . import ledger

        return getattr(ledger, name)
    raise AttributeError(name)
