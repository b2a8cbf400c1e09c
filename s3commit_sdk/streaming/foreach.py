"""``foreachBatch`` made exactly-once: the function Spark calls with each micro-batch."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..api import WriteResult, write_committed
from .batch import StreamBatch


def exactly_once(
    path: str, stream_id: str, **write_kwargs: Any
) -> Callable[[Any, int], WriteResult]:
    """The function to pass to ``df.writeStream.foreachBatch``: each batch is one
    ``write_committed(batch_df, path, stream=StreamBatch(stream_id, batch_id), ...)``.

    ``foreachBatch`` alone is at-least-once: a batch replayed after a restart is written again.
    Here the replay adds nothing (``result.replayed``). ``stream_id`` must stay the same
    across restarts from the same checkpoint (a name such as the query's); a new checkpoint
    needs a new one. ``write_kwargs`` are ``write_committed``'s (``committer``,
    ``partition_by``, ``format``, ``options``, ...); progress is off unless asked for.
    """
    StreamBatch(stream_id, 0)  # a malformed id is refused now, not at the first batch
    write_kwargs.setdefault("progress", False)

    def write_batch(batch_df: Any, batch_id: int) -> WriteResult:
        stream = StreamBatch(stream_id, int(batch_id))
        return write_committed(batch_df, path, stream=stream, **write_kwargs)

    return write_batch
