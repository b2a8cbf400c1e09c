"""Delta tables the SDK did not keep to itself: a log entry another hand corrupted, and a table
another writer created with its own escaping of partition directories. On moto and Ceph RGW.

A corrupted entry is written with boto3 straight into ``_delta_log/``; the other writer is
delta-rs's own ``write_deltalake``. Tables are read back with deltalake configured here and with
the SDK's reader (``scan``), independently of the write path.
"""

from __future__ import annotations

import pandas as pd
import pyarrow as pa
import pytest
from conftest import BUCKET, delta_storage, list_keys, pending_uploads, visible_keys
from deltalake import DeltaTable, write_deltalake
from test_delta import hidden, orders

from s3commit_sdk import write_committed
from s3commit_sdk.api import new_job
from s3commit_sdk.engines.local import to_arrow
from s3commit_sdk.errors import CommitError, DeltaTableError, S3CommitError
from s3commit_sdk.paths import parse_s3_url
from s3commit_sdk.runner import commit_job, execute_task, setup_job
from s3commit_sdk.scan import list_table, plan_splits, read_split
from s3commit_sdk.store import open_store

TRUNCATED = b'{"commitInfo": {"timestamp": 1}}\n{"add": {"path": "day=x/part-0.parquet", "si'
GARBLED = b"\x00\xff\xfe not json at all \x80\n"


def entry_key(dest, version: int) -> str:
    return f"{dest.dir}_delta_log/{version:020d}.json"


def corrupt(s3, dest, version: int, body: bytes) -> str:
    key = entry_key(dest, version)
    s3.put_object(Bucket=BUCKET, Key=key, Body=body)
    return key


def assert_typed(error: DeltaTableError, dest, key: str) -> None:
    """Names the table, the entry, the cause's first line, never a Rust backtrace."""
    message = str(error)
    assert error.entry == key and repr(key) in message
    assert dest.url in message and error.destination == dest.url
    assert "DeltaError" in message or "DeltaProtocolError" in message or "not JSON" in message
    assert "<unknown>" not in message and "\n" not in message, message
    assert "Restore that entry from a backup" in message


# -- a corrupted log entry -----------------------------------------------------------------------
@pytest.mark.parametrize("body", [TRUNCATED, GARBLED], ids=["truncated", "garbled"])
def test_a_corrupted_log_entry_refuses_the_append_before_any_upload(s3_server, s3, dest, body):
    write_committed(orders(), dest.url, format="delta", partition_by=["day"], progress=False)
    key = corrupt(s3, dest, 1, body)
    before = list_keys(s3, dest.dir)
    with pytest.raises(DeltaTableError) as failed:
        write_committed(
            orders(n=3, version=2),
            dest.url,
            format="delta",
            partition_by=["day"],
            conflict_mode="append",
            progress=False,
        )
    error = failed.value
    assert_typed(error, dest, key)
    assert isinstance(error, CommitError) and isinstance(error, S3CommitError)
    assert error.visible == "nothing" and error.job_id and error.remedy is None
    assert "Nothing of job" in str(error) and "the newest entry" in str(error)
    # what is visible: exactly what was there; nothing pending, no hidden job files
    assert list_keys(s3, dest.dir) == before
    assert pending_uploads(s3, dest.dir) == [] and hidden(s3, dest) == []


@pytest.mark.parametrize("mode", ["append", "replace"])
def test_an_entry_corrupted_while_the_job_ran_rolls_it_back(s3_server, s3, dest, mode):
    """The log is corrupted after job setup read it: delta-rs cannot commit on it (append) and
    job commit cannot check the versions since its read (replace). The entry is not JSON, so
    no commit of this job: the completed files are deleted, nothing is committed."""
    write_committed(orders(), dest.url, format="delta", partition_by=["day"], progress=False)
    before = set(visible_keys(s3, dest.dir))
    written: list[str] = []

    def corrupt_once(event) -> None:  # job commit starts: setup read the table long ago
        if event.phase == "job commit" and not written:
            written.append(corrupt(s3, dest, 1, TRUNCATED))

    with pytest.raises(DeltaTableError) as failed:
        write_committed(
            orders(["2026-11-21"], n=4, version=2),
            dest.url,
            format="delta",
            partition_by=["day"],
            conflict_mode=mode,
            progress=corrupt_once,
            options={"tasks": 1},
        )
    error = failed.value
    assert written and error.entry == written[0]
    assert "rolled back" in str(error) and "<unknown>" not in str(error)
    assert error.visible == "nothing" and error.remedy is None
    assert set(visible_keys(s3, dest.dir)) == before  # the completed files were deleted
    assert pending_uploads(s3, dest.dir) == [] and hidden(s3, dest) == []


def test_the_data_source_commit_names_the_corrupted_entry(s3_server, s3, dest):
    """Spark's data source sets the job up in one worker and commits in another, which reads
    the table again: a log corrupted in between is refused there, before any completion."""
    write_committed(orders(), dest.url, format="delta", partition_by=["day"], progress=False)
    data = to_arrow(orders(n=3, version=2))
    job = new_job(
        dest.url,
        committer="partitioned",
        partition_by=["day"],
        conflict_mode="append",
        format="delta",
        options=None,
        schema=data.schema,
        conf=None,
    )
    setup_job(job)
    messages = [execute_task(job, 0, 0, data.to_batches(), data.schema)]
    before = set(visible_keys(s3, dest.dir))
    key = corrupt(s3, dest, 1, GARBLED)
    with pytest.raises(DeltaTableError) as failed:
        commit_job(job, messages, {})
    assert_typed(failed.value, dest, key)
    assert failed.value.visible == "nothing"
    assert set(visible_keys(s3, dest.dir)) == before
    assert pending_uploads(s3, dest.dir) == [] and hidden(s3, dest) == []


def test_deleting_the_corrupted_newest_entry_as_the_error_says_mends_the_table(s3_server, s3, dest):
    write_committed(orders(), dest.url, format="delta", partition_by=["day"], progress=False)
    key = corrupt(s3, dest, 1, TRUNCATED)
    kwargs = {"format": "delta", "partition_by": ["day"], "conflict_mode": "append"}
    with pytest.raises(DeltaTableError, match="deleting it, the newest entry, returns the table"):
        write_committed(orders(n=2, version=2), dest.url, progress=False, **kwargs)
    s3.delete_object(Bucket=BUCKET, Key=key)
    result = write_committed(orders(n=2, version=2), dest.url, progress=False, **kwargs)
    assert result.success["deltaVersion"] == 1
    assert (
        len(DeltaTable(dest.url, storage_options=delta_storage(s3_server)).to_pyarrow_table()) == 66
    )


# -- replace over a table another writer created -------------------------------------------------
#: partition values whose directory names need escaping, each writer in its own way
AWKWARD = ["x y", "p%q", "s/t", "e=f"]


def sdk_rows(s3_server, dest) -> list[tuple]:
    """Every row through the SDK's own reader (the one behind ``spark.read``)."""
    store = open_store({"endpoint": s3_server.endpoint}, threads=2)
    listing = list_table(store, parse_s3_url(dest.url), None)
    schema = pa.schema([pa.field("v", pa.int64())])
    wanted = pa.schema([*schema, *(pa.field(c, pa.string()) for c in listing.partition_columns)])
    found = []
    for split in plan_splits(store, listing, 128 * 2**20):
        for batch in read_split(store, listing, split, schema, wanted, "UTC"):
            found += [tuple(r.values()) for r in batch.to_pylist()]
    return sorted(found)


def delta_rows(s3_server, dest) -> list[tuple]:
    data = DeltaTable(dest.url, storage_options=delta_storage(s3_server)).to_pyarrow_table()
    return sorted(tuple(r.values()) for r in data.select(["v", "a", "b"]).to_pylist())


@pytest.mark.parametrize("shape", ["file by file", "by partition filter"])
def test_replace_removes_another_writers_files_whatever_their_escaping(s3_server, s3, dest, shape):
    """delta-rs names the directory of ``x y`` ``a=x%20y``, Spark (and the SDK) ``a=x y``: the
    files to remove are found by the partition values of the table's add actions."""
    first = pd.DataFrame({"v": range(8), "a": AWKWARD * 2, "b": ["1"] * 4 + ["2"] * 4})
    write_deltalake(
        dest.url, first, partition_by=["a", "b"], storage_options=delta_storage(s3_server)
    )
    assert any("a=x%20y/" in k for k in list_keys(s3, dest.dir))  # the other writer's escaping
    if shape == "file by file":  # pairs that no single conjunction of filters names
        pairs = [("x y", "1"), ("p%q", "2"), ("s/t", "1"), ("e=f", "2")]
    else:  # every value of a with b=1: one filter per column names exactly these
        pairs = [(a, "1") for a in AWKWARD]
    replace = pd.DataFrame(
        {
            "v": [100 + i for i in range(len(pairs))],
            "a": [a for a, _ in pairs],
            "b": [b for _, b in pairs],
        }
    )
    result = write_committed(
        replace,
        dest.url,
        format="delta",
        partition_by=["a", "b"],
        conflict_mode="replace",
        options={"tasks": 1},
        progress=False,
    )
    old = {(v, a, b) for v, a, b in zip(first.v, first.a, first.b, strict=True)}
    kept = {row for row in old if (row[1], row[2]) not in pairs}
    new = {(100 + i, a, b) for i, (a, b) in enumerate(pairs)}
    expected = sorted(kept | new)
    assert result.success["deltaRemovedFiles"] == len(pairs)
    assert delta_rows(s3_server, dest) == expected
    assert sdk_rows(s3_server, dest) == expected
    assert pending_uploads(s3, dest.dir) == [] and hidden(s3, dest) == []
