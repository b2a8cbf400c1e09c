"""Readers never see a commit in progress, nor a failed one (issue 27, item 1).

A ``replace`` job over existing data is caught in the middle of its job commit, live (a
completion held by the fault proxy while the in-process driver waits for it) or for good (the
driver killed at a step of job commit: tests/test_recovery.py's crash points). Meanwhile the
reader behind ``spark.read.format("s3commit")`` reads exactly the rows before the commit, or,
once the commit's replace deletes have begun, exactly the rows after it; never a mix. A held
completion that then fails is rolled back, and the reader reads the old rows. The SDK's reader
runs here without Spark (``scan.list_table`` and ``read_split``, what the data source's tasks
run), once on a classic Spark session and once on Spark Connect (this file is also the Connect
child's script).
"""

from __future__ import annotations

import json
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pytest
from conftest import BUCKET, rows_of, sdk_table, visible_keys, wait_for_request
from crash_driver import data

from s3commit_sdk import CommitError, write_committed
from s3commit_sdk.recovery import recover
from s3commit_sdk.testing.faultproxy import hold, internal_error

pytestmark = pytest.mark.fault

OLD_DAYS, NEW_DAYS = ["d1", "d2"], ["d2", "d3"]
#: where a killed driver leaves the commit (tests/test_recovery.py), and what a reader reads
#: then: before the replace deletes the old rows, after them the new ones
CRASHES = {
    "after-journal": "old",
    "after-2-of-6-completions": "old",
    "before-replace-deletes": "old",
    "before-cleanup": "new",
    "after-success": "new",
}


def as_rows(frames) -> list[tuple]:
    return rows_of(pa.Table.from_pandas(frames, preserve_index=False))


def old_rows() -> list[tuple]:
    return as_rows(data(1, OLD_DAYS))


def new_rows() -> list[tuple]:
    """Day d1 of the old data, d2 replaced, d3 added."""
    old = data(1, OLD_DAYS)
    return sorted([*as_rows(old[old.day == "d1"]), *as_rows(data(2, NEW_DAYS))])


def sdk_rows(url: str, endpoint: str | None = None) -> list[tuple]:
    """Every row through the SDK's reader, as the data source's driver and tasks read them."""
    return rows_of(sdk_table(url, {"endpoint": endpoint} if endpoint else None))


def write_old(dest) -> None:
    write_committed(
        data(1, OLD_DAYS), dest.url, committer="partitioned", partition_by=["day"], progress=False
    )


def replace_through(proxy, dest, committer: str, **options):
    return write_committed(
        data(2, NEW_DAYS),
        dest.url,
        committer=committer,
        partition_by=["day"],
        conflict_mode="replace",
        options={"endpoint": proxy.endpoint, "tasks": 3, "threads": 1, **options},
        progress=False,
    )


# -- a live job commit, one completion held -----------------------------------------------------
@pytest.mark.parametrize("committer", ["partitioned", "magic"])
def test_a_held_completion_is_read_as_before_it_then_after(proxy, s3, dest, committer):
    write_old(dest)
    before = set(visible_keys(s3, dest.dir))
    proxy.set_rules([hold("CompleteMultipartUpload", occurrences=[2])])
    with ThreadPoolExecutor(1) as pool:
        job = pool.submit(replace_through, proxy, dest, committer)
        wait_for_request(proxy, "CompleteMultipartUpload", 2, job)
        # the first completion landed: a plain listing holds one file of the job
        assert len(set(visible_keys(s3, dest.dir)) - before) == 1
        assert sdk_rows(dest.url) == old_rows()
        proxy.release()
        job.result(timeout=120)
    assert sdk_rows(dest.url) == new_rows()


def test_a_held_completion_that_fails_is_never_read(proxy, s3, dest):
    write_old(dest)
    before = set(visible_keys(s3, dest.dir))
    proxy.set_rules(
        [
            hold("CompleteMultipartUpload", occurrences=[2]),
            internal_error("CompleteMultipartUpload", occurrences=[2]),
        ]
    )
    with ThreadPoolExecutor(1) as pool:
        job = pool.submit(replace_through, proxy, dest, "partitioned", **{"retry.max-attempts": 1})
        wait_for_request(proxy, "CompleteMultipartUpload", 2, job)
        assert len(set(visible_keys(s3, dest.dir)) - before) == 1
        assert sdk_rows(dest.url) == old_rows()
        proxy.release()
        with pytest.raises(CommitError, match="rolled back") as info:
            job.result(timeout=120)
    assert info.value.visible == "nothing"
    assert set(visible_keys(s3, dest.dir)) == before  # the listing agrees with the error
    assert sdk_rows(dest.url) == old_rows()


def test_a_commit_made_while_the_reader_lists_is_listed_again(proxy, dest):
    """The reader's listing is held while a whole job commits: the marker and ``_SUCCESS``
    checked around it say a commit happened, and the reader lists again."""
    write_old(dest)
    proxy.set_rules([hold("ListObjectsV2", occurrences=[2])])  # 1: is there a _delta_log/?
    with ThreadPoolExecutor(1) as pool:
        reader = pool.submit(sdk_rows, dest.url, proxy.endpoint)
        wait_for_request(proxy, "ListObjectsV2", 2, reader)
        write_committed(
            data(2, NEW_DAYS),
            dest.url,
            committer="partitioned",
            partition_by=["day"],
            conflict_mode="replace",
            progress=False,
        )
        proxy.release()
        assert reader.result(timeout=120) == new_rows()
    assert proxy.counts["ListObjectsV2"] == 3


def test_an_unreadable_journal_under_the_marker_is_a_typed_error(s3, dest):
    """A marker whose journal cannot be read leaves the reader nothing to read a whole job by:
    it says so and names the commands, rather than reading a mix."""
    write_old(dest)
    job = str(uuid.uuid4())
    marker = {"jobId": job, "journal": f"{dest.dir}__s3commit/{job}/journal.json"}
    s3.put_object(Bucket=BUCKET, Key=marker["journal"], Body=b"{not json")
    s3.put_object(
        Bucket=BUCKET, Key=dest.dir + "__s3commit/COMMIT_IN_PROGRESS", Body=json.dumps(marker)
    )
    with pytest.raises(CommitError, match="journal is unreadable") as info:
        sdk_rows(dest.url)
    assert info.value.job_id == job and info.value.remedy == f"s3commit recover {dest.url}"
    s3.put_object(Bucket=BUCKET, Key=dest.dir + "__s3commit/COMMIT_IN_PROGRESS", Body=b"junk")
    assert sdk_rows(dest.url) == old_rows()  # a marker of no job names nothing to leave out


# -- a commit left unfinished by a killed driver -------------------------------------------------
@pytest.fixture
def crashed_at(request, proxy, s3, dest):
    """Old data, then a replacing job whose driver was killed at ``request.param``."""
    from test_recovery import CRASH_POINTS, crash, spec

    write_old(dest)
    job = spec(dest.url, "partitioned", 2, NEW_DAYS, proxy.endpoint)
    crash(proxy, job, *CRASH_POINTS[request.param])
    assert s3.list_objects_v2(Bucket=BUCKET, Prefix=dest.dir + "__s3commit/COMMIT_IN_PROGRESS")[
        "KeyCount"
    ]
    return request.param


@pytest.mark.parametrize("crashed_at", list(CRASHES), indirect=True)
def test_an_unfinished_commit_is_read_whole(crashed_at, dest):
    expected = old_rows() if CRASHES[crashed_at] == "old" else new_rows()
    assert sdk_rows(dest.url) == expected
    recover(dest.url)  # rolled forward: the reader reads the job's rows, nothing pending is left
    assert sdk_rows(dest.url) == new_rows()


def test_delta_readers_read_the_log_during_a_held_completion(proxy, dest):
    pytest.importorskip("deltalake")
    frame = data(1, OLD_DAYS)
    write_committed(frame, dest.url, format="delta", partition_by=["day"], progress=False)
    proxy.set_rules([hold("CompleteMultipartUpload", occurrences=[2])])
    with ThreadPoolExecutor(1) as pool:
        job = pool.submit(
            write_committed,
            data(2, NEW_DAYS),
            dest.url,
            format="delta",
            partition_by=["day"],
            conflict_mode="replace",
            options={"endpoint": proxy.endpoint, "tasks": 3, "threads": 1},
            progress=False,
        )
        wait_for_request(proxy, "CompleteMultipartUpload", 2, job)
        assert sdk_rows(dest.url) == old_rows()  # the log's version 0, whatever is listed
        proxy.release()
        job.result(timeout=120)
    assert sdk_rows(dest.url) == new_rows()


# -- through Spark ---------------------------------------------------------------------------------
@pytest.mark.parametrize("crashed_at", ["after-2-of-6-completions"], indirect=True)
def test_spark_reads_an_unfinished_commit_as_before_it(crashed_at, spark, s3_server, dest):
    from test_datasource import Native

    from s3commit_sdk import register

    register(spark)
    table = Native(spark, s3_server).load(dest.url)
    assert rows_of(pa.Table.from_pylist([r.asDict() for r in table.collect()])) == old_rows()
    recover(dest.url)


@pytest.mark.cluster
@pytest.mark.parametrize("crashed_at", ["after-2-of-6-completions"], indirect=True)
def test_spark_connect_reads_an_unfinished_commit_as_before_it(
    crashed_at, s3_server, dest, tmp_path
):
    from conftest import run_connect_child

    spec = {"url": dest.url, "out": str(tmp_path / f"out-{uuid.uuid4().hex[:6]}.json")}
    rows = run_connect_child(Path(__file__), spec, s3_server, tmp_path, timeout=600)
    assert sorted(tuple(r) for r in rows["rows"]) == old_rows()
    recover(dest.url)


def connect_main(spec: dict) -> dict:
    """The Connect child: every row of ``spec["url"]`` through ``spark.read``."""
    from s3commit_sdk.testing.sandbox import local_spark

    spark = local_spark("local[2]", connect=True)
    table = spark.read.format("s3commit").load(spec["url"])
    rows = rows_of(pa.Table.from_pylist([r.asDict() for r in table.collect()]))
    spark.stop()
    return {"rows": rows}


if __name__ == "__main__":
    from connect_scenarios import run_as_child

    run_as_child(connect_main)
