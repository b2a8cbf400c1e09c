"""Micro-batches committed exactly once through ``write_committed(..., stream=...)``.

The ``foreachBatch`` path, on Arrow input in a child driver (``crash_write``): the driver is
SIGKILLed at each step of a batch's commit (before its journal, after it, after k of n
completions, after its record), then the batch is replayed with the same rows, as Spark does
after a restart. Afterwards the destination holds every row exactly once, read by pyarrow
listing the directory and by the SDK's reader; nothing is left pending, no journal or marker
is left, and the batch's record names it.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from conftest import BUCKET, delta_storage, list_keys, read_back, rows_of, sdk_table, visible_keys

from s3commit_sdk import JournalTrustError, write_committed
from s3commit_sdk.streaming import StreamBatch, expire_batches, list_streams, stream_batches
from s3commit_sdk.testing.crash import crash_write
from s3commit_sdk.testing.faultproxy import FaultProxy, slow_down

STREAM = "orders-stream"
DAYS = ["2026-11-01", "2026-11-02", "2026-11-03"]


def batch_rows(batch_id: int, n: int = 12) -> pa.Table:
    """Batch ``batch_id``'s rows: the same on every replay, ids unique across batches."""
    ids = [batch_id * 1000 + i for i in range(n)]
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "amount": pa.array([i * 1.5 for i in ids]),
            "day": [DAYS[i % len(DAYS)] for i in range(n)],
        }
    )


def expected(*batches: int) -> list[tuple]:
    return rows_of(pa.concat_tables([batch_rows(b) for b in batches]))


def write_batch(dest, batch_id: int, committer: str = "partitioned", **kwargs):
    return write_committed(
        batch_rows(batch_id),
        dest.url,
        committer=committer,
        partition_by=["day"],
        stream=StreamBatch(STREAM, batch_id),
        progress=False,
        **kwargs,
    )


def hidden(s3, dest) -> list[str]:
    return [k for k in list_keys(s3, dest.dir) if k not in visible_keys(s3, dest.dir)]


def assert_exactly_once(s3_server, s3, dest, *batches: int) -> None:
    """Every row of ``batches`` once, by a lister and by the SDK's reader; nothing unfinished."""
    assert read_back(s3_server, dest.prefix) == expected(*batches)
    assert rows_of(sdk_table(dest.url)) == expected(*batches)
    left = hidden(s3, dest)
    assert [k for k in left if k.endswith(("journal.json", "COMMIT_IN_PROGRESS", "alive"))] == []
    assert [r.batch_id for r in stream_batches(dest.url, STREAM)] == list(batches)


def test_a_replayed_batch_adds_nothing(s3_server, s3, dest):
    first = write_batch(dest, 0)
    assert not first.replayed and first.rows == 12
    assert first.success["streamQueryId"] == STREAM and first.success["streamBatchId"] == 0
    keys = visible_keys(s3, dest.dir)

    again = write_batch(dest, 0)
    assert again.replayed
    assert again.job_id == first.job_id == StreamBatch(STREAM, 0).job_id
    assert [f.key for f in again.files] == [f.key for f in first.files]
    assert visible_keys(s3, dest.dir) == keys
    write_batch(dest, 1)
    assert_exactly_once(s3_server, s3, dest, 0, 1)


def deletes_of_one_batch(s3_server, dest, committer: str) -> int:
    """DeleteObjects requests of batch 1's commit, counted on a scratch destination: the last
    one releases the journal and marker, after the batch record."""
    trial = type(dest)(dest.prefix + "-trial")
    write_batch(trial, 0, committer)
    with FaultProxy(s3_server.endpoint, []) as proxy:
        write_batch(trial, 1, committer, options={"endpoint": proxy.endpoint})
        return proxy.counts["DeleteObjects"]


@pytest.mark.parametrize("committer", ["partitioned", "magic"])
@pytest.mark.parametrize(
    ("point", "operation", "occurrence", "key"),
    [
        ("before the journal", "PutObject", 1, "journal.json"),
        ("after the journal", "CompleteMultipartUpload", 1, ""),
        ("after 2 of 6 completions", "CompleteMultipartUpload", 3, ""),
        ("before the batch record", "PutObject", 1, "/streams/"),
        ("after the batch record", "DeleteObjects", None, ""),
    ],
)
def test_killed_at_each_step_then_replayed(
    s3_server, s3, dest, committer, point, operation, occurrence, key
):
    occurrence = occurrence or deletes_of_one_batch(s3_server, dest, committer)
    write_batch(dest, 0, committer)
    crash_write(
        batch_rows(1),
        dest.url,
        operation=operation,
        occurrence=occurrence,
        key_contains=key,
        committer=committer,
        partition_by=["day"],
        stream=StreamBatch(STREAM, 1),
    )
    left = hidden(s3, dest)
    journal = any(k.endswith("journal.json") for k in left)
    assert journal == (point != "before the journal"), left
    recorded = [r.batch_id for r in stream_batches(dest.url, STREAM)]
    assert recorded == ([0, 1] if point == "after the batch record" else [0])

    replay = write_batch(dest, 1, committer)
    assert replay.rows == 12 == sum(f.rows for f in replay.files)
    assert replay.replayed == (point != "before the journal")
    write_batch(dest, 2, committer)
    assert_exactly_once(s3_server, s3, dest, 0, 1, 2)


def test_a_throttling_storm_changes_nothing(s3_server, s3, dest):
    with FaultProxy(s3_server.endpoint, [slow_down(probability=0.3)], seed=3) as proxy:
        options = {"endpoint": proxy.endpoint}
        for batch_id in range(3):
            write_batch(dest, batch_id, options=options)
        assert write_batch(dest, 2, options=options).replayed
        assert any(e.action == "slowdown" for e in proxy.events)
    assert_exactly_once(s3_server, s3, dest, 0, 1, 2)


def test_a_crafted_record_is_refused_and_commits_nothing(s3_server, s3, dest):
    write_batch(dest, 0)
    records = f"{dest.dir}__s3commit/streams/{STREAM}/"
    batch_0 = s3.get_object(Bucket=BUCKET, Key=f"{records}batch-{0:020d}.json")["Body"].read()
    record = f"{records}batch-{1:020d}.json"
    s3.put_object(Bucket=BUCKET, Key=record, Body=batch_0)  # says batch 0's job
    before = visible_keys(s3, dest.dir)
    with pytest.raises(JournalTrustError, match="not this batch's") as refused:
        write_batch(dest, 1)
    assert "restart the query" in str(refused.value)
    assert visible_keys(s3, dest.dir) == before  # nothing of batch 1 committed or skipped
    s3.delete_object(Bucket=BUCKET, Key=record)
    write_batch(dest, 1)
    assert_exactly_once(s3_server, s3, dest, 0, 1)


def test_streams_are_listed_and_old_records_expire(s3_server, s3, dest):
    for batch_id in range(4):
        write_batch(dest, batch_id)
    (summary,) = list_streams(dest.url)
    assert (summary.stream, summary.batches, summary.rows) == (STREAM, 4, 48)
    assert (summary.first_batch, summary.last_batch) == (0, 3)
    assert expire_batches(dest.url, STREAM, keep=2) == [0, 1]
    assert [r.batch_id for r in stream_batches(dest.url, STREAM)] == [2, 3]
    assert write_batch(dest, 3).replayed  # the kept batch still replays exactly once
    assert read_back(s3_server, dest.prefix) == expected(0, 1, 2, 3)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"committer": "manifest"}, "cannot commit a stream's batches"),
        ({"conflict_mode": "replace"}, "a stream's batches append"),
    ],
)
def test_a_stream_batch_needs_an_s3_committer_appending(s3, dest, kwargs, message):
    with pytest.raises(ValueError, match=message):
        write_committed(
            batch_rows(0), dest.url, stream=StreamBatch(STREAM, 0), progress=False, **kwargs
        )
    assert list_keys(s3, dest.dir) == []


@pytest.mark.parametrize(
    ("query", "batch"), [("", 0), ("a/b", 0), ("ok", -1), ("ok", True), ("ok", "3")]
)
def test_a_malformed_stream_batch_is_refused(query, batch):
    with pytest.raises(ValueError, match=r"stream id|batch id"):
        StreamBatch(query, batch)


def table_options(fmt: str, dest, tmp_path) -> dict:
    if fmt == "delta":
        return {}
    name = "tests." + dest.prefix.rsplit("/", 1)[-1].replace("-", "_").replace(" ", "_")
    return {"iceberg.catalog.uri": f"sqlite:///{tmp_path / 'catalog.db'}", "iceberg.table": name}


def table_state(s3_server, dest, fmt: str, options: dict) -> tuple[list[tuple], int]:
    """The table's rows and how many commits it holds, read by deltalake / pyiceberg."""
    if fmt == "delta":
        from deltalake import DeltaTable

        table = DeltaTable(dest.url, storage_options=delta_storage(s3_server))
        assert table.transaction_version(STREAM) == 2  # the batch's app transaction
        return rows_of(table.to_pyarrow_table()), table.version() + 1
    from s3commit_sdk.iceberg import open_table

    table = open_table(dest.url, options)
    return rows_of(table.scan().to_arrow()), len(table.snapshots())


@pytest.mark.parametrize("fmt", ["delta", "iceberg"])
@pytest.mark.parametrize(
    ("point", "operation", "key"),
    [
        ("after the journal", "CompleteMultipartUpload", ""),
        ("before the batch record", "PutObject", "/streams/"),
    ],
)
def test_a_table_holds_each_batch_once(s3_server, s3, dest, tmp_path, fmt, point, operation, key):
    """Delta: the batch's files and its app transaction (stream, batch) in one version;
    Iceberg: one snapshot carrying the batch's job id. Killed before or after that commit,
    the replay commits it once."""
    options = table_options(fmt, dest, tmp_path)
    write_batch(dest, 0, format=fmt, options=options)
    crash_write(
        batch_rows(1),
        dest.url,
        operation=operation,
        occurrence=1,
        key_contains=key,
        committer="partitioned",
        partition_by=["day"],
        format=fmt,
        options=options,
        stream=StreamBatch(STREAM, 1),
    )
    assert write_batch(dest, 1, format=fmt, options=options).replayed
    write_batch(dest, 2, format=fmt, options=options)
    assert table_state(s3_server, dest, fmt, options) == (expected(0, 1, 2), 3)
    assert [r.batch_id for r in stream_batches(dest.url, STREAM)] == [0, 1, 2]


@pytest.mark.parametrize("fmt", ["orc", "csv", "json"])
def test_every_file_format_commits_a_batch_once(s3_server, s3, dest, fmt):
    write_batch(dest, 0, format=fmt)
    write_batch(dest, 1, format=fmt)
    assert write_batch(dest, 1, format=fmt).replayed
    found = sdk_table_as(dest.url, fmt)  # CSV has no header: Spark's names _c0, _c1
    assert rows_of(found.rename_columns(["id", "amount", "day"])) == expected(0, 1)
    assert len(visible_keys(s3, dest.dir)) == 2 * 6  # two batches of 6 files: none twice


def sdk_table_as(url: str, fmt: str):
    from s3commit_sdk import read_table

    return read_table(url, format=fmt)


def test_a_second_attempt_committing_at_once_is_refused_by_its_intent(s3, dest):
    """The batch's journal is created only if absent: an attempt that finds another attempt's
    journal at its own create (two drivers on one checkpoint) is refused before completing
    anything; its own retried create passes."""
    from s3commit_sdk.api import stream_job_fields
    from s3commit_sdk.committers import make_committer
    from s3commit_sdk.committers.commit_run import CommitRun
    from s3commit_sdk.errors import ConcurrentCommitError
    from s3commit_sdk.protocol import JobContext
    from s3commit_sdk.streaming.commit import write_intent

    job = JobContext.on_s3(dest.url, "partitioned", **stream_job_fields(StreamBatch(STREAM, 4)))
    run = CommitRun(make_committer(job), [], {})
    key = run.committer.journal_key
    write_intent(run, b'{"ours": 1}')
    write_intent(run, b'{"ours": 1}')  # a retried create: its own bytes are there
    s3.put_object(Bucket=BUCKET, Key=key, Body=b'{"theirs": 1}')
    with pytest.raises(ConcurrentCommitError, match="second query running on the same") as e:
        write_intent(run, b'{"ours": 1}')
    assert e.value.visible == "nothing"
    assert s3.get_object(Bucket=BUCKET, Key=key)["Body"].read() == b'{"theirs": 1}'
    s3.delete_object(Bucket=BUCKET, Key=key)
