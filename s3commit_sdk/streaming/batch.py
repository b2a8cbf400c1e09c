"""One micro-batch of one stream: the job it is, and what its journal and records carry."""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidArgumentError

#: job ids of stream batches are UUIDs in this namespace (uuid5 of "<stream>/<batch>")
_NAMESPACE = uuid.UUID("7d0b1c52-3f55-5a8e-9a8e-5c0f3b2a4e61")
#: a stream id is a path segment of the destination's hidden directory
_STREAM_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
#: the keys a stream batch adds to its journal's extraData and to its _SUCCESS document
QUERY_KEY = "streamQueryId"
BATCH_KEY = "streamBatchId"


def is_stream_id(text: object) -> bool:
    return isinstance(text, str) and _STREAM_ID.fullmatch(text) is not None


@dataclass(frozen=True)
class StreamBatch:
    """Micro-batch ``batch_id`` of the stream ``query_id``.

    ``query_id`` must stay the same across restarts of the query: Spark's query id (kept in its
    checkpoint; the data source reads it from the task's local properties) or a name of your
    choosing for ``foreachBatch``. ``batch_id`` is Spark's, the same on a replay.
    """

    query_id: str
    batch_id: int

    def __post_init__(self) -> None:
        if not is_stream_id(self.query_id):
            raise InvalidArgumentError(
                f"stream id {self.query_id!r}: give 1 to 128 letters, digits, '.', '_' or '-' "
                "(Spark's query id, or a name that stays the same across restarts)"
            )
        if isinstance(self.batch_id, bool) or not isinstance(self.batch_id, int):
            raise InvalidArgumentError(f"batch id {self.batch_id!r}: give Spark's batch id")
        if self.batch_id < 0:
            raise InvalidArgumentError(f"batch id {self.batch_id}: Spark's batch ids are >= 0")

    @property
    def job_id(self) -> str:
        """The batch's job id: the same for every attempt, so a replay finds the journal,
        uploads and table commits of an earlier attempt by it."""
        return str(uuid.uuid5(_NAMESPACE, f"{self.query_id}/{self.batch_id}"))

    def fields(self) -> dict[str, Any]:
        """What the batch adds to its journal and its ``_SUCCESS`` document."""
        return {QUERY_KEY: self.query_id, BATCH_KEY: self.batch_id}

    @classmethod
    def from_fields(cls, fields: dict[str, Any]) -> StreamBatch | None:
        """The batch a journal or ``_SUCCESS`` names, or None for a batch job's."""
        if QUERY_KEY not in fields:
            return None
        return cls(fields[QUERY_KEY], fields.get(BATCH_KEY))  # type: ignore[arg-type]
