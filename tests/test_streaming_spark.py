"""``df.writeStream.format("s3commit")`` and ``foreachBatch(exactly_once(...))`` on Spark,
killed during a micro-batch's commit and restarted from the same checkpoint.

A child process runs the query (`s3commit_sdk.testing.crash`): a file source read one file per
batch (replayable: the same batch id reads the same file after a restart), three days per
file, so each batch commits three files. The child's S3 requests go through a fault proxy that
holds the chosen request of batch 1 (its second completion, the release after its record); the
test then SIGKILLs the child's whole process group (driver JVM, Python workers) while the
request is held, so it never reaches S3. Spark has not
written batch 1 to its commit log, and replays it on restart with the same rows. Afterwards the
destination holds every source row exactly once, read by pyarrow listing the directory and by
the SDK's reader; nothing is pending and no journal or marker is left.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import BUCKET, delta_storage, list_keys, read_back, rows_of, sdk_table, visible_keys

from s3commit_sdk.streaming import stream_batches
from s3commit_sdk.testing.crash import crash_stream, run_stream
from s3commit_sdk.testing.faultproxy import FaultProxy, slow_down

pytestmark = pytest.mark.spark

DRIVER = Path(__file__).with_name("stream_driver.py")
DAYS = ["2026-11-01", "2026-11-02", "2026-11-03"]
FILES = 3  # batches 0..2


def source_files(folder: Path) -> pa.Table:
    """The source directory: one Parquet file per batch; all its rows."""
    folder.mkdir()
    tables = []
    for n in range(FILES):
        ids = [n * 100 + i for i in range(9)]
        table = pa.table(
            {
                "id": pa.array(ids, pa.int64()),
                "amount": [i * 0.5 for i in ids],
                "day": [DAYS[i % 3] for i in range(9)],
            }
        )
        pq.write_table(table, folder / f"part-{n:03d}.parquet")
        stamp = 1_700_000_000 + n  # Spark's file source takes files in modification order
        os.utime(folder / f"part-{n:03d}.parquet", (stamp, stamp))
        tables.append(table)
    return pa.concat_tables(tables)


def stream_spec(s3_server, dest, tmp_path, **extra) -> dict:
    """The query of these tests: the source under tmp_path, one file per batch, into dest."""
    return {
        "mode": "classic",
        "sink": "datasource",
        "source": str(tmp_path / "source"),
        "checkpoint": str(tmp_path / "checkpoint"),
        "dest": dest.url,
        "endpoint": s3_server.endpoint,
        "env": s3_server.env,
        **extra,
    }


#: kill point: (operation, occurrence among the requests whose path holds key, and only after
#: the n-th PutObject whose path holds after_key) of batch 1; batch 0 made one journal, three
#: completions and one record, and batch 1 the same again
KILL_POINTS = {
    "after 1 of 3 completions": ("CompleteMultipartUpload", 5, "", ("", 1)),
    # the release of batch 1's journal: the first DeleteObjects after its record's PUT
    "after the batch record": ("DeleteObjects", 1, "", ("/streams/", 2)),
}


#: each case starts a JVM twice: a classic session at the two points where Spark's replay meets
#: a commit in flight (files complete, record missing; batch recorded, Spark's commit log not),
#: foreachBatch (which shares the data source's commit) and Connect at one point each.
#: test_streaming_batches kills a Python driver at every step (before and after the journal,
#: after k of n, around the record).
CASES = [
    ("classic", "datasource", "after 1 of 3 completions"),
    ("classic", "datasource", "after the batch record"),
    ("classic", "foreach", "after the batch record"),
    ("connect", "datasource", "after 1 of 3 completions"),
    ("connect", "foreach", "after the batch record"),
]


@pytest.mark.parametrize(("mode", "sink", "point"), CASES)
@pytest.mark.long
def test_killed_mid_batch_then_restarted(s3_server, s3, dest, tmp_path, mode, sink, point):
    rows = source_files(tmp_path / "source")
    threads = {"threads": "1"}  # one completion at a time: "k of n" is exact
    spec = stream_spec(s3_server, dest, tmp_path, mode=mode, sink=sink, options=threads)
    operation, occurrence, key, (after_key, after_count) = KILL_POINTS[point]
    crash_stream(
        spec,
        operation=operation,
        occurrence=occurrence,
        key_contains=key,
        after_key=after_key,
        after_count=after_count,
        after_operation="PutObject",
    )
    stream = "orders" if sink == "foreach" else _query(tmp_path)
    committed = [r.batch_id for r in stream_batches(dest.url, stream)]
    assert committed == ([0, 1] if point == "after the batch record" else [0])

    run_stream(spec)
    assert read_back(s3_server, dest.prefix) == rows_of(rows)
    assert rows_of(sdk_table(dest.url)) == rows_of(rows)
    assert [r.batch_id for r in stream_batches(dest.url, stream)] == list(range(FILES))
    hidden = [k for k in list_keys(s3, dest.dir) if k not in visible_keys(s3, dest.dir)]
    assert [k for k in hidden if k.endswith(("journal.json", "COMMIT_IN_PROGRESS", "alive"))] == []


def _query(work: Path) -> str:
    """The query id Spark keeps in the checkpoint (the data source's stream id)."""
    return json.loads((work / "checkpoint" / "metadata").read_text())["id"]


def test_a_throttling_storm_during_a_csv_stream_changes_nothing(s3_server, s3, dest, tmp_path):
    """Every request of the query's tasks and commits may answer 503 SlowDown (retried by the
    SDK's policy): the stream ends with every row once and nothing pending. In CSV, so one
    Spark run also streams a format other than Parquet (the formats share the sink's commit:
    ORC and JSON in test_streaming_batches, Parquet in the other tests here). On moto (RGW
    runs the same storm through write_committed(stream=...) in test_streaming_batches)."""
    rows = source_files(tmp_path / "source")
    spec = stream_spec(s3_server, dest, tmp_path, format="csv")
    with FaultProxy(s3_server.endpoint, [slow_down(probability=0.2)], seed=11) as proxy:
        run_stream(spec | {"endpoint": proxy.endpoint})
        throttled = sum(e.action == "slowdown" for e in proxy.events)
    assert throttled > 10
    found = sdk_table(dest.url, {"format": "csv"})  # CSV has no header: Spark's names _c0, _c1
    assert rows_of(found.rename_columns(["id", "amount", "day"])) == rows_of(rows)
    assert [r.batch_id for r in stream_batches(dest.url, _query(tmp_path))] == list(range(FILES))


@pytest.mark.parametrize("fmt", ["delta", "iceberg"])
@pytest.mark.long
def test_a_table_stream_killed_after_its_table_commit(s3_server, s3, dest, tmp_path, fmt):
    """Killed after batch 1's table commit and before its record: the restart's replay finds
    the batch in the table (Delta: its app transaction; Iceberg: its job id in a snapshot) and
    commits nothing twice. A killed and restarted query, so ``long``: CI's ``make test`` has
    the same replay in test_streaming_batches' table tests (a Python driver killed)."""
    rows = source_files(tmp_path / "source")
    options = {"threads": "1"}
    if fmt == "iceberg":
        options |= {
            "iceberg.catalog.uri": f"sqlite:///{tmp_path / 'catalog.db'}",
            "iceberg.table": "tests.stream_" + dest.prefix.rsplit("-", 1)[-1],
        }
    spec = stream_spec(s3_server, dest, tmp_path, format=fmt, options=options)
    crash_stream(spec, operation="PutObject", occurrence=2, key_contains="/streams/")
    run_stream(spec)
    if fmt == "delta":
        from deltalake import DeltaTable

        table = DeltaTable(dest.url, storage_options=delta_storage(s3_server))
        assert table.transaction_version(_query(tmp_path)) == FILES - 1
        found, commits = table.to_pyarrow_table(), table.version() + 1
    else:
        from s3commit_sdk.iceberg import open_table

        table = open_table(dest.url, options)
        found, commits = table.scan().to_arrow(), len(table.snapshots())
    assert commits == FILES  # one table commit per batch, batch 1's once
    assert rows_of(found) == rows_of(rows)


def test_a_failed_batch_is_aborted_then_the_restart_commits_it_once(s3_server, s3, dest, tmp_path):
    """A task of batch 1 fails (a UDF raising on one row): Spark aborts the batch, whose
    uploads the abort finds by the batch's job id, and the query stops. Nothing of batch 1 is
    visible or pending. Fixed and restarted, the query commits batch 1 once."""
    rows = source_files(tmp_path / "source")
    flag = tmp_path / "poison"
    flag.touch()
    spec = stream_spec(s3_server, dest, tmp_path, fail_on_id=104, fail_while=str(flag))
    with pytest.raises(RuntimeError, match="row 104 is poisoned"):
        run_stream(spec)
    assert [r.batch_id for r in stream_batches(dest.url, _query(tmp_path))] == [0]
    assert read_back(s3_server, dest.prefix) == rows_of(rows.slice(0, 9))
    assert s3.list_multipart_uploads(Bucket=BUCKET, Prefix=dest.dir).get("Uploads", []) == []

    flag.unlink()
    run_stream(spec)
    assert read_back(s3_server, dest.prefix) == rows_of(rows)
    assert [r.batch_id for r in stream_batches(dest.url, _query(tmp_path))] == list(range(FILES))
