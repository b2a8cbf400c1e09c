"""A task's batch split by partition values: every row once, in its partition, in input order;
rows already grouped by partition (as Spark sorts them, or data grouped by day) are sliced
out of the batch, not copied."""

from __future__ import annotations

import pyarrow as pa

from s3commit_sdk.writers import split_by_partition


def split(batch: pa.RecordBatch) -> dict[str, list]:
    return {
        directory: rows.column("id").to_pylist()
        for directory, _, _, rows in split_by_partition(batch, ("day",))
    }


def payload_range(array: pa.Array) -> tuple[int, int]:
    """Where the values of a binary array lie in memory."""
    data = array.buffers()[2]
    return data.address, data.address + data.size


def test_unordered_rows_are_grouped_in_input_order():
    batch = pa.record_batch(
        {"id": [0, 1, 2, 3, 4, 5], "day": ["b", "a", None, "b", "a", None]},
    )
    assert split(batch) == {
        "day=a": [1, 4],
        "day=b": [0, 3],
        "day=__HIVE_DEFAULT_PARTITION__": [2, 5],
    }


def test_grouped_rows_are_slices_of_the_batch():
    payload = pa.array([bytes([i]) * 1024 for i in range(6)], pa.binary())
    batch = pa.record_batch({"id": list(range(6)), "day": ["a"] * 3 + ["b"] * 3, "v": payload})
    groups = list(split_by_partition(batch, ("day",)))
    assert [(d, rows.column("id").to_pylist()) for d, _, _, rows in groups] == [
        ("day=a", [0, 1, 2]),
        ("day=b", [3, 4, 5]),
    ]
    start, end = payload_range(payload)
    for _, partition, typed, rows in groups:
        assert rows.schema.names == ["id", "v"]  # the partition column leaves the data
        assert typed == (partition["day"],)
        low, high = payload_range(rows.column("v"))
        assert start <= low and high <= end  # the batch's own bytes: no copy was made
    assert [rows.column("v").to_pylist() for *_, rows in groups] == [
        payload.to_pylist()[:3],
        payload.to_pylist()[3:],
    ]
