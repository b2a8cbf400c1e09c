"""``s3commit streams list / show / expire`` against the real test S3 servers.

The batches are real micro-batch commits (``write_committed(..., stream=StreamBatch(...))``);
what the commands print is checked against what the servers hold, listed with boto3: the data
files each batch wrote and the batch records under ``__s3commit/streams/``.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pyarrow as pa
import pytest
from conftest import BUCKET, list_keys, visible_keys

from s3commit_sdk import write_committed
from s3commit_sdk.cli import main
from s3commit_sdk.streaming import StreamBatch
from s3commit_sdk.textformat import format_bytes

ORDERS = "orders-stream"
CLICKS = "clicks.v2"
DAYS = ["2026-11-01", "2026-11-02", "2026-11-03"]


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def write_batch(url: str, stream: str, batch_id: int, n: int = 12):
    """Batch ``batch_id`` of ``stream``: ``n`` rows over the days ``day`` partitions by."""
    ids = [batch_id * 1000 + i for i in range(n)]
    table = pa.table(
        {"id": pa.array(ids, pa.int64()), "day": [DAYS[i % len(DAYS)] for i in range(n)]}
    )
    return write_committed(
        table, url, partition_by=["day"], stream=StreamBatch(stream, batch_id), progress=False
    )


def records_prefix(dest, stream: str) -> str:
    return f"{dest.dir}__s3commit/streams/{stream}/"


def record_keys(s3, dest, stream: str) -> list[str]:
    return list_keys(s3, records_prefix(dest, stream))


def record_key(dest, stream: str, batch_id: int) -> str:
    return f"{records_prefix(dest, stream)}batch-{batch_id:020d}.json"


def data_files(s3, dest, stream: str, batches: range) -> dict[str, int]:
    """The data files (key -> size) the batches wrote: their names carry the batch's job id."""
    jobs = [StreamBatch(stream, b).job_id for b in batches]
    sizes = {}
    for key in visible_keys(s3, dest.dir):
        if any(job in key for job in jobs):
            sizes[key] = s3.head_object(Bucket=BUCKET, Key=key)["ContentLength"]
    return sizes


def utc(epoch_ms: int) -> str:
    moment = datetime.fromtimestamp(epoch_ms / 1000, tz=timezone.utc)
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def line_of(out: str, first: str) -> list[str]:
    """The whitespace-separated cells of the line whose first cell is ``first``."""
    (line,) = [line for line in out.splitlines() if line.split()[:1] == [first]]
    return line.split()


# -- list --------------------------------------------------------------------------------------
def test_list_two_streams(capsys, s3, dest):
    for batch_id in range(3):
        write_batch(dest.url, ORDERS, batch_id)
    for batch_id in (5, 6):
        write_batch(dest.url, CLICKS, batch_id, n=7)

    code, out, _ = run(capsys, "streams", "list", dest.url, "--json")
    assert code == 0
    listed = {s["stream"]: s for s in json.loads(out)}
    assert sorted(listed) == [CLICKS, ORDERS]

    code, out, err = run(capsys, "streams", "list", dest.url)
    assert code == 0 and err == ""
    assert f"2 stream(s) with batch records under s3://{BUCKET}/{dest.dir}" in out
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["STREAM", "BATCHES", "FIRST..LAST"]
    assert [line.split()[0] for line in lines[1:3]] == [CLICKS, ORDERS]  # sorted by id
    for stream, batches, rows in ((ORDERS, range(3), 36), (CLICKS, range(5, 7), 14)):
        files = data_files(s3, dest, stream, batches)
        summary = listed[stream]
        assert (summary["batches"], summary["rows"]) == (len(batches), rows)
        assert (summary["files"], summary["bytes"]) == (len(files), sum(files.values()))
        cells = line_of(out, stream)
        assert cells[1:5] == [
            str(len(batches)),
            f"{batches[0]}..{batches[-1]}",
            str(rows),
            str(len(files)),
        ]
        assert " ".join(cells[5:7]) == format_bytes(sum(files.values()))
        assert " ".join(cells[7:10]) == utc(summary["last_committed_ms"])
        assert cells[10:] == [
            f"{summary['last_commit_s'] * 1000:.0f}",
            f"{summary['mean_commit_s'] * 1000:.0f}",
        ]
        # the last commit is the record of the last batch, as the store holds it
        body = s3.get_object(Bucket=BUCKET, Key=record_key(dest, stream, batches[-1]))["Body"]
        assert json.loads(body.read())["timestamp"] == summary["last_committed_ms"]


def test_list_of_a_destination_without_streams(capsys, dest):
    write_batch(f"{dest.url}/ds10", ORDERS, 0)  # a sibling directory's stream is not ours
    code, out, _ = run(capsys, "streams", "list", f"{dest.url}/ds1")
    assert code == 0
    assert out.strip() == f"0 stream(s) with batch records under s3://{BUCKET}/{dest.dir}ds1/"
    assert json.loads(run(capsys, "streams", "list", f"{dest.url}/ds1", "--json")[1]) == []
    assert len(json.loads(run(capsys, "streams", "list", f"{dest.url}/ds10", "--json")[1])) == 1


# -- show --------------------------------------------------------------------------------------
def test_show_every_kept_batch_and_the_totals(capsys, s3, dest):
    results = [write_batch(dest.url, ORDERS, batch_id) for batch_id in range(3)]
    write_batch(dest.url, CLICKS, 0)  # another stream's batch is not shown

    code, out, err = run(capsys, "streams", "show", dest.url, ORDERS)
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0].split() == [
        *("BATCH", "JOB", "COMMITTED", "ROWS", "FILES", "BYTES", "COMMIT", "MS"),
    ]
    assert len(lines) == 1 + 3 + 1
    for batch_id, result in enumerate(results):
        files = data_files(s3, dest, ORDERS, range(batch_id, batch_id + 1))
        cells = line_of(out, str(batch_id))
        assert cells[1] == result.job_id == StreamBatch(ORDERS, batch_id).job_id
        assert " ".join(cells[2:5]) == utc(result.success["timestamp"])
        assert cells[5:7] == ["12", str(len(files))]
        assert " ".join(cells[7:9]) == format_bytes(sum(files.values()))
    every_file = data_files(s3, dest, ORDERS, range(3))
    assert lines[-1].startswith(
        f"3 batch record(s) of stream '{ORDERS}' under s3://{BUCKET}/{dest.dir}: 36 rows, "
        f"{len(every_file)} files, {format_bytes(sum(every_file.values()))};"
    )

    code, out, _ = run(capsys, "streams", "show", dest.url, ORDERS, "--json")
    assert code == 0
    shown = json.loads(out)
    assert [r["batch_id"] for r in shown] == [0, 1, 2]
    assert [r["job_id"] for r in shown] == [r.job_id for r in results]
    assert {r["stream"] for r in shown} == {ORDERS}
    assert sum(r["bytes"] for r in shown) == sum(every_file.values())


def test_show_of_an_unknown_stream_fails(capsys, s3, dest):
    write_batch(dest.url, ORDERS, 0)
    for argv in (
        ("streams", "show", dest.url, "no-such-stream"),
        ("streams", "show", dest.url, "no-such-stream", "--json"),
    ):
        code, out, err = run(capsys, *argv)
        assert code == 1, argv
        assert out == ""
        assert (
            f"s3commit: error: no batch records of stream 'no-such-stream' under "
            f"s3://{BUCKET}/{dest.dir}" in err
        )
        assert f"s3commit: next: s3commit streams list s3://{BUCKET}/{dest.dir}\n" in err
    code, out, err = run(capsys, "streams", "show", "s3://no-such-bucket-s3commit/x", ORDERS)
    assert code == 1
    assert "bucket 'no-such-bucket-s3commit' does not exist" in err


def test_a_malformed_stream_id_is_a_usage_error(capsys, s3, dest):
    write_batch(dest.url, ORDERS, 0)
    before = list_keys(s3, dest.dir)
    for argv in (
        ("streams", "show", dest.url, "a/b"),
        ("streams", "show", dest.url, ""),
        ("streams", "expire", dest.url, "../x", "--keep", "1"),
    ):
        code, _, err = run(capsys, *argv)
        assert code == 2, argv
        assert "stream id" in err
    assert list_keys(s3, dest.dir) == before


# -- expire ------------------------------------------------------------------------------------
def test_expire_keeps_the_newest_records_and_every_data_file(capsys, s3, dest):
    for batch_id in range(4):
        write_batch(dest.url, ORDERS, batch_id)
    write_batch(dest.url, CLICKS, 0)
    data = visible_keys(s3, dest.dir)
    clicks = record_keys(s3, dest, CLICKS)

    code, out, err = run(capsys, "streams", "expire", dest.url, ORDERS, "--keep", "2")
    assert code == 0 and err == ""
    assert f"deleted the records of batch(es) 0..1 of stream '{ORDERS}'" in out
    assert "keeping the newest 2" in out
    assert "the data files are untouched" in out
    assert record_keys(s3, dest, ORDERS) == [record_key(dest, ORDERS, b) for b in (2, 3)]
    assert visible_keys(s3, dest.dir) == data
    assert record_keys(s3, dest, CLICKS) == clicks

    code, out, _ = run(capsys, "streams", "show", dest.url, ORDERS)
    assert code == 0
    assert [line.split()[0] for line in out.splitlines()[1:-1]] == ["2", "3"]
    assert out.splitlines()[-1].startswith(f"2 batch record(s) of stream '{ORDERS}'")
    listed = json.loads(run(capsys, "streams", "list", dest.url, "--json")[1])
    orders = next(s for s in listed if s["stream"] == ORDERS)
    assert (orders["batches"], orders["first_batch"], orders["last_batch"]) == (2, 2, 3)

    # again, and with the default --keep (100): nothing more to expire
    for argv in (("--keep", "2"), ()):
        code, out, _ = run(capsys, "streams", "expire", dest.url, ORDERS, *argv)
        assert code == 0
        assert f"nothing to expire: stream '{ORDERS}' has 2 batch record(s)" in out
    assert record_keys(s3, dest, ORDERS) == [record_key(dest, ORDERS, b) for b in (2, 3)]

    code, out, _ = run(capsys, "streams", "expire", dest.url, ORDERS, "--keep", "1")
    assert code == 0
    assert "deleted the records of batch(es) 2 of stream" in out
    assert record_keys(s3, dest, ORDERS) == [record_key(dest, ORDERS, 3)]
    assert visible_keys(s3, dest.dir) == data


@pytest.mark.parametrize("keep", ["0", "-1", "two"])
def test_expire_refuses_to_keep_no_record(capsys, s3, dest, keep):
    for batch_id in range(3):
        write_batch(dest.url, ORDERS, batch_id)
    before = list_keys(s3, dest.dir)
    assert len(record_keys(s3, dest, ORDERS)) == 3

    code, out, err = run(capsys, "streams", "expire", dest.url, ORDERS, "--keep", keep)
    assert code == 2
    assert "--keep" in err
    assert "deleted" not in out
    assert list_keys(s3, dest.dir) == before


def test_expire_of_an_unknown_stream_fails_and_deletes_nothing(capsys, s3, dest):
    write_batch(dest.url, ORDERS, 0)
    before = list_keys(s3, dest.dir)
    code, out, err = run(capsys, "streams", "expire", dest.url, "no-such-stream", "--keep", "1")
    assert code == 1
    assert "no batch records of stream 'no-such-stream'" in err
    assert "deleted" not in out
    assert list_keys(s3, dest.dir) == before
