"""Delta Lake output: one committed job is one Delta transaction, on moto and on Ceph RGW.

Tables are read back with deltalake (delta-rs) configured here from the server's endpoint and
keys, independently of the SDK. Races are made deterministic where they can be: two jobs set up
on the same table version and commit one after the other, so the second finds its version
taken (the log's conditional PUT) exactly as a real race would.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import subprocess
import sys
import textwrap
import time
from urllib.parse import unquote

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import BUCKET, delta_storage, list_keys, pending_uploads, visible_keys
from deltalake import DeltaTable

from s3commit_sdk import recovery, write_committed
from s3commit_sdk.api import new_job
from s3commit_sdk.cli import main as cli
from s3commit_sdk.committers import make_committer
from s3commit_sdk.engines.local import to_arrow
from s3commit_sdk.errors import (
    CommitError,
    ConcurrentCommitError,
    ConflictError,
    InvalidArgumentError,
    TaskFailedError,
)
from s3commit_sdk.runner import execute_task
from s3commit_sdk.testing.crash import crash_write
from s3commit_sdk.testing.faultproxy import FaultProxy, internal_error
from s3commit_sdk.widgets import SuccessReport

COMMITTERS = ["directory", "partitioned", "magic"]
DAYS = ["2026-11-20", "2026-11-21", "2026-11-22"]


# -- helpers ------------------------------------------------------------------------------------
def table(s3_server, dest, version: int | None = None) -> DeltaTable:
    return DeltaTable(dest.url, version=version, storage_options=delta_storage(s3_server))


def active(s3_server, dest, version: int | None = None) -> set[str]:
    """Keys of the files the table holds at ``version``."""
    actions = pa.table(table(s3_server, dest, version).get_add_actions(flatten=True))
    return {dest.dir + unquote(path) for path in actions.column("path").to_pylist()}


def log_entry(s3, dest, version: int) -> list[dict]:
    key = f"{dest.dir}_delta_log/{version:020d}.json"
    body = s3.get_object(Bucket=BUCKET, Key=key)["Body"].read().decode()
    return [json.loads(line) for line in body.splitlines()]


def rows(s3_server, dest, version: int | None = None) -> list[tuple]:
    data = table(s3_server, dest, version).to_pyarrow_table()
    return sorted(tuple(r.values()) for r in data.select(sorted(data.column_names)).to_pylist())


def orders(days=DAYS, n: int = 20, version: int = 1) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "id": [i for _ in days for i in range(n)],
            "amount": [i * 1.5 for _ in days for i in range(n)],
            "version": [version] * (n * len(days)),
            "day": [d for d in days for _ in range(n)],
        }
    )


def hidden(s3, dest) -> list[str]:
    return list_keys(s3, dest.dir + "__s3commit/")


def success(s3, dest) -> dict:
    return json.loads(s3.get_object(Bucket=BUCKET, Key=dest.dir + "_SUCCESS")["Body"].read())


def assert_clean(s3, dest) -> None:
    """Nothing pending, no hidden job metadata left behind."""
    assert pending_uploads(s3, dest.dir) == []
    assert hidden(s3, dest) == []


def prepared(url: str, df, *, options=None, **kwargs):
    """A Delta job set up and its tasks run, not yet committed: (committer, messages)."""
    data = to_arrow(df)
    job = new_job(
        url,
        committer=kwargs.pop("committer", "partitioned"),
        partition_by=kwargs.pop("partition_by", ["day"]),
        conflict_mode=kwargs.pop("conflict_mode", "append"),
        format="delta",
        options=options,
        schema=data.schema,
        conf=None,
    )
    committer = make_committer(job)
    committer.setup_job()
    return committer, [execute_task(job, 0, 0, data.to_batches(), data.schema)]


# -- round trips and versions -------------------------------------------------------------------
@pytest.mark.parametrize("committer", COMMITTERS)
def test_round_trip_one_job_one_version(s3_server, s3, dest, committer):
    first = write_committed(
        orders(),
        dest.url,
        format="delta",
        committer=committer,
        partition_by=["day"],
        progress=False,
    )
    assert first.success["deltaVersion"] == 0
    expected = sorted((r.amount, r.day, r.id, r.version) for r in orders().itertuples(index=False))
    assert rows(s3_server, dest) == expected
    # pyarrow reads it through the table's dataset, which holds exactly the job's files
    assert table(s3_server, dest).to_pyarrow_dataset().count_rows() == 60
    assert active(s3_server, dest) == {f.key for f in first.files}

    second = write_committed(
        orders(n=5, version=2),
        dest.url,
        format="delta",
        committer=committer,
        partition_by=["day"],
        conflict_mode="append",
        progress=False,
    )
    history = table(s3_server, dest).history()
    assert [h["version"] for h in history] == [1, 0]
    assert [h["s3commit.jobId"] for h in history] == [second.job_id, first.job_id]
    assert success(s3, dest)["deltaVersion"] == 1 == second.success["deltaVersion"]
    assert len(rows(s3_server, dest)) == 75
    assert table(s3_server, dest).transaction_version(f"s3commit-job:{second.job_id}") == 1
    assert_clean(s3, dest)


def test_spark_input(spark, s3_server, s3, dest):
    frame = spark.createDataFrame(orders()).repartition(3)
    result = write_committed(frame, dest.url, format="delta", partition_by=["day"], progress=False)
    assert result.success["deltaVersion"] == 0
    assert table(s3_server, dest).metadata().partition_columns == ["day"]
    assert len(rows(s3_server, dest)) == 60
    assert active(s3_server, dest) == {f.key for f in result.files}
    assert_clean(s3, dest)


def test_statistics_come_from_the_footer(s3_server, s3, dest):
    stamp = dt.datetime(2026, 11, 21, 10, 0, 0, 123456, tzinfo=dt.timezone.utc)
    frame = pa.table(
        {
            "n": pa.array([3, None, -7], pa.int64()),
            "s": ["b", None, "a"],
            "d": pa.array([dt.date(2026, 1, 2), dt.date(2025, 12, 31), None]),
            "t": pa.array(
                [stamp, stamp + dt.timedelta(seconds=1), None], pa.timestamp("us", "UTC")
            ),
            "x": [1.5, float("nan"), None],
            "st": [{"a": 1}, None, {"a": 5}],
        }
    )
    write_committed(frame, dest.url, format="delta", options={"tasks": 1}, progress=False)
    (add,) = [a["add"] for a in log_entry(s3, dest, 0) if "add" in a]
    stats = json.loads(add["stats"])
    assert stats["numRecords"] == 3
    assert stats["minValues"] == {
        "n": -7,
        "s": "a",
        "d": "2025-12-31",
        "t": "2026-11-21T10:00:00.123Z",
        "st": {"a": 1},
    }
    # the maximum timestamp rounds up: 10:00:01.123456 is not <= 10:00:01.123
    assert stats["maxValues"] == {
        "n": 3,
        "s": "b",
        "d": "2026-01-02",
        "t": "2026-11-21T10:00:01.124Z",
        "st": {"a": 5},
    }
    # floats get no bounds (NaN), but their nulls are counted
    assert stats["nullCount"] == {"n": 1, "s": 1, "d": 1, "t": 1, "x": 1, "st": {"a": 1}}
    assert table(s3_server, dest).to_pyarrow_table(filters=[("n", "<", 0)]).num_rows == 1


# -- replace and fail ---------------------------------------------------------------------------
@pytest.mark.parametrize("committer", ["partitioned", "magic"])
def test_partition_replace_removes_exactly_that_partition(s3_server, s3, dest, committer):
    kwargs = {"format": "delta", "committer": committer, "partition_by": ["day"]}
    write_committed(orders(), dest.url, progress=False, **kwargs)
    before = active(s3_server, dest)
    old_day = {k for k in before if "day=2026-11-21/" in k}
    result = write_committed(
        orders(["2026-11-21"], n=7, version=2),
        dest.url,
        conflict_mode="replace",
        progress=False,
        **kwargs,
    )
    after = active(s3_server, dest)
    new = {f.key for f in result.files}
    assert after == (before - old_day) | new
    entry = log_entry(s3, dest, 1)
    assert {dest.dir + unquote(a["remove"]["path"]) for a in entry if "remove" in a} == old_day
    assert result.success["deltaRemovedFiles"] == len(old_day)
    assert result.success["replacedObjects"] == 0  # nothing deleted: time travel keeps them
    assert set(visible_keys(s3, dest.dir)) >= old_day
    day = [r for r in rows(s3_server, dest) if r[1] == "2026-11-21"]
    assert len(day) == 7 and {r[3] for r in day} == {2}
    # time travel to the previous version returns the old rows of that day
    previous = [r for r in rows(s3_server, dest, version=0) if r[1] == "2026-11-21"]
    assert len(previous) == 20 and {r[3] for r in previous} == {1}
    assert_clean(s3, dest)


def test_replace_of_partitions_no_filter_can_name(s3_server, s3, dest):
    """Two partition columns whose written pairs are no cross product: removed file by file,
    including a value that needs escaping and a null."""
    frame = pd.DataFrame(
        {
            "v": range(8),
            "k": ["a:b c%é", "a:b c%é", None, None] * 2,
            "j": ["1", "2", "1", "2"] * 2,
        }
    )
    kwargs = {"format": "delta", "partition_by": ["k", "j"], "options": {"tasks": 1}}
    write_committed(frame, dest.url, progress=False, **kwargs)
    before = active(s3_server, dest)
    replace = pd.DataFrame({"v": [100, 200], "k": ["a:b c%é", None], "j": ["1", "2"]})
    result = write_committed(replace, dest.url, conflict_mode="replace", progress=False, **kwargs)
    replaced = ("k=a%3Ab c%25é/j=1/", "k=__HIVE_DEFAULT_PARTITION__/j=2/")
    kept = {k for k in before if not k.startswith(tuple(dest.dir + r for r in replaced))}
    assert len(kept) == 2
    assert active(s3_server, dest) == kept | {f.key for f in result.files}
    assert sorted(table(s3_server, dest).to_pandas()["v"]) == [1, 2, 5, 6, 100, 200]
    assert_clean(s3, dest)


@pytest.mark.parametrize("committer", ["directory", "partitioned"])
def test_replace_without_partitions_replaces_the_table(s3_server, s3, dest, committer):
    kwargs = {"format": "delta", "committer": committer, "progress": False}
    write_committed(orders().drop(columns="day"), dest.url, **kwargs)
    write_committed(
        orders(n=2, version=2).drop(columns="day"), dest.url, **kwargs, conflict_mode="replace"
    )
    assert {r[2] for r in rows(s3_server, dest)} == {2} and len(rows(s3_server, dest)) == 6
    assert table(s3_server, dest).history()[0]["operationParameters"]["mode"] == "Overwrite"


def test_fail_refuses_existing_data_before_any_upload(s3_server, s3, dest):
    kwargs = {"format": "delta", "partition_by": ["day"], "progress": False}
    write_committed(orders(DAYS[:2]), dest.url, **kwargs)
    # the directory committer replaces the whole table: day 21's files stay, holding no data
    write_committed(
        orders(DAYS[:1]), dest.url, committer="directory", conflict_mode="replace", **kwargs
    )
    files = visible_keys(s3, dest.dir)
    with pytest.raises(ConflictError, match="already holds data"):
        write_committed(
            orders(["2026-11-20"]),
            dest.url,
            format="delta",
            committer="directory",
            partition_by=["day"],
            conflict_mode="fail",
            progress=False,
        )
    with pytest.raises(ConflictError, match="partition day=2026-11-20"):
        write_committed(
            orders(["2026-11-20"]),
            dest.url,
            format="delta",
            partition_by=["day"],
            conflict_mode="fail",
            progress=False,
        )
    assert visible_keys(s3, dest.dir) == files and table(s3_server, dest).version() == 1
    assert pending_uploads(s3, dest.dir) == []
    assert [k for k in files if "day=2026-11-21/" in k]  # removed by version 1, still stored
    write_committed(orders(DAYS[1:2]), dest.url, conflict_mode="fail", **kwargs)
    assert table(s3_server, dest).version() == 2
    assert_clean(s3, dest)


def test_data_that_does_not_fit_is_refused_before_any_upload(s3_server, s3, dest):
    write_committed(orders(), dest.url, format="delta", partition_by=["day"], progress=False)
    files = list_keys(s3, dest.dir)
    cases = [
        ({"df": orders().assign(id=orders()["id"].astype(str))}, "column 'id'"),
        ({"df": orders(), "partition_by": []}, "partitioned by \\['day'\\]"),
        ({"df": orders().rename(columns={"amount": "an amount"})}, "column mapping"),
        (
            {"df": orders().assign(t=pd.Timestamp("2026-01-01", tz="UTC")), "partition_by": ["t"]},
            "timestamp column",
        ),
        ({"df": orders(), "committer": "manifest"}, "S3 committers"),
    ]
    for case, message in cases:
        kwargs = {"partition_by": ["day"], "committer": "partitioned", **case}
        with pytest.raises(InvalidArgumentError, match=message):
            write_committed(kwargs.pop("df"), dest.url, format="delta", progress=False, **kwargs)
        assert list_keys(s3, dest.dir) == files
    assert pending_uploads(s3, dest.dir) == []


def test_failing_task_adds_no_version(s3_server, s3, dest):
    write_committed(orders(), dest.url, format="delta", partition_by=["day"], progress=False)
    files = list_keys(s3, dest.dir)
    data = to_arrow(orders(version=2))

    def batches():
        yield from data.to_batches(max_chunksize=10)[:2]
        raise RuntimeError("the source failed mid-task")

    reader = pa.RecordBatchReader.from_batches(data.schema, batches())
    with pytest.raises(TaskFailedError, match="source failed"):
        write_committed(
            reader,
            dest.url,
            format="delta",
            partition_by=["day"],
            conflict_mode="append",
            progress=False,
        )
    assert table(s3_server, dest).version() == 0
    assert list_keys(s3, dest.dir) == files
    assert_clean(s3, dest)


# -- concurrency --------------------------------------------------------------------------------
def test_appends_from_one_version_both_land(s3_server, s3, dest):
    """The second commit finds its version taken (If-None-Match on the log) and lands after."""
    write_committed(orders(), dest.url, format="delta", partition_by=["day"], progress=False)
    first, first_messages = prepared(dest.url, orders(n=3, version=2))
    second, second_messages = prepared(dest.url, orders(n=4, version=3))
    first.commit_job(first_messages, {})
    second.commit_job(second_messages, {})
    assert (first.delta.version, second.delta.version) == (1, 2)
    assert {h["s3commit.jobId"] for h in table(s3_server, dest).history()[:2]} == {
        first.job.job_id,
        second.job.job_id,
    }
    assert len(rows(s3_server, dest)) == 60 + 9 + 12
    assert_clean(s3, dest)


@pytest.mark.parametrize("day", ["2026-11-21", "2026-12-01"], ids=["existing", "new"])
def test_replace_racing_a_replace_fails_and_leaves_nothing(s3_server, s3, dest, day):
    write_committed(orders(), dest.url, format="delta", partition_by=["day"], progress=False)
    loser, loser_messages = prepared(dest.url, orders([day], version=2), conflict_mode="replace")
    winner, winner_messages = prepared(dest.url, orders([day], version=3), conflict_mode="replace")
    winner.commit_job(winner_messages, {})
    with pytest.raises(ConcurrentCommitError, match="rolled back"):
        loser.commit_job(loser_messages, {})
    assert table(s3_server, dest).version() == 1
    assert {r[3] for r in rows(s3_server, dest) if r[1] == day} == {3}
    assert not [k for k in list_keys(s3, dest.dir) if loser.job.job_id in k]
    assert_clean(s3, dest)


def versions_per_day(s3_server, dest) -> dict[str, list[int]]:
    return {d: sorted(r[3] for r in rows(s3_server, dest) if r[1] == d) for d in DAYS}


@pytest.mark.parametrize("appended", ["2026-11-21", "2026-11-22"], ids=["same", "other"])
def test_replace_racing_an_append(s3_server, s3, dest, appended):
    """An append that lands in a partition while a replace of it runs fails the replace (its
    files would survive the replace otherwise); an append elsewhere does not."""
    write_committed(orders(), dest.url, format="delta", partition_by=["day"], progress=False)
    day = "2026-11-21"
    replace, messages = prepared(dest.url, orders([day], version=2), conflict_mode="replace")
    write_committed(
        orders([appended], n=5, version=3),
        dest.url,
        format="delta",
        partition_by=["day"],
        conflict_mode="append",
        progress=False,
    )
    if appended == day:
        with pytest.raises(ConcurrentCommitError, match=f"day={day}"):
            replace.commit_job(messages, {})
        assert table(s3_server, dest).version() == 1
        assert versions_per_day(s3_server, dest)[day] == [1] * 20 + [3] * 5
        assert not [k for k in list_keys(s3, dest.dir) if replace.job.job_id in k]
    else:
        replace.commit_job(messages, {})
        assert table(s3_server, dest).version() == 2
        assert versions_per_day(s3_server, dest)[day] == [2] * 20
        assert versions_per_day(s3_server, dest)[appended] == [1] * 20 + [3] * 5
    assert_clean(s3, dest)


CHILD = textwrap.dedent(
    """
    import json, sys, time
    import pandas as pd
    from s3commit_sdk import write_committed
    spec = json.loads(sys.argv[1])
    frame = pd.DataFrame(spec["frame"])
    while time.time() < spec["start"]:
        time.sleep(0.005)
    result = write_committed(frame, spec["dest"], format="delta", partition_by=["day"],
                             conflict_mode="append", progress=False)
    print(json.dumps({"job": result.job_id, "version": result.success["deltaVersion"]}))
    """
)


def test_two_processes_appending_at_once_both_land(s3_server, s3, dest):
    write_committed(orders(), dest.url, format="delta", partition_by=["day"], progress=False)
    start = time.time() + 8  # both past their imports, then off at once
    children = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, json.dumps(spec)],
            env={**os.environ, **s3_server.env},
            stdout=subprocess.PIPE,
            text=True,
        )
        for spec in (
            {"dest": dest.url, "start": start, "frame": orders(n=5, version=v).to_dict("list")}
            for v in (2, 3)
        )
    ]
    results = [json.loads(child.communicate(timeout=120)[0]) for child in children]
    assert [child.returncode for child in children] == [0, 0]
    assert sorted(r["version"] for r in results) == [1, 2]
    history = table(s3_server, dest).history()
    assert {h.get("s3commit.jobId") for h in history[:2]} == {r["job"] for r in results}
    assert len(rows(s3_server, dest)) == 60 + 15 + 15
    assert_clean(s3, dest)


# -- failures, crashes and recovery -------------------------------------------------------------
def test_store_error_on_the_log_rolls_back(s3_server, s3, dest):
    write_committed(orders(), dest.url, format="delta", partition_by=["day"], progress=False)
    with FaultProxy(s3_server.endpoint) as proxy:
        options = {"endpoint": proxy.endpoint, "retry.max-attempts": 1}
        committer, messages = prepared(dest.url, orders(n=3, version=2), options=options)
        # job commit PUTs the journal, then the log entry: every PUT after the journal fails
        proxy.set_rules([internal_error("PutObject", occurrences=range(2, 50))])
        with pytest.raises(CommitError, match="rolled back") as failure:
            committer.commit_job(messages, {})
    assert not isinstance(failure.value, ConcurrentCommitError)
    assert table(s3_server, dest).version() == 0
    assert not [k for k in list_keys(s3, dest.dir) if committer.job.job_id in k]
    assert_clean(s3, dest)


_PUTS: dict[tuple[str, str], int] = {}

WRITE = dict(format="delta", partition_by=["day"], conflict_mode="append", options={"tasks": 1})


def put_requests(s3_server, dest, committer: str) -> int:
    """PutObject requests of one child driver's Delta append (same steps as crash_write's)."""
    cached = _PUTS.get((s3_server.kind, committer))
    if cached is not None:
        return cached
    reference = f"{dest.url}-reference"
    write_committed(orders(), reference, format="delta", partition_by=["day"], progress=False)
    with FaultProxy(s3_server.endpoint) as proxy:
        kwargs = {
            **WRITE,
            "committer": committer,
            "options": {**WRITE["options"], "endpoint": proxy.endpoint},
        }
        code = (
            "import json, sys, pandas as pd\nfrom s3commit_sdk import write_committed\n"
            "spec = json.loads(sys.argv[1])\n"
            "write_committed(pd.DataFrame(spec['frame']), spec['dest'], progress=False, "
            "**spec['kwargs'])"
        )
        spec = {"dest": reference, "frame": orders(n=5).to_dict("list"), "kwargs": kwargs}
        subprocess.run([sys.executable, "-c", code, json.dumps(spec)], check=True, timeout=120)
        count = proxy.counts["PutObject"]
    _PUTS[(s3_server.kind, committer)] = count
    return count


def crash_at(s3_server, dest, committer: str, from_end: int) -> None:
    """Seed version 0, then kill a driver appending version 1 at its ``from_end``-th last PUT.

    The last PUT is ``_SUCCESS``, the one before it the Delta log entry.
    """
    write_committed(orders(), dest.url, format="delta", partition_by=["day"], progress=False)
    total = put_requests(s3_server, dest, committer)
    crash_write(
        orders(n=5, version=2),
        dest.url,
        operation="PutObject",
        occurrence=total - from_end + 1,
        committer=committer,
        **WRITE,
    )


@pytest.mark.parametrize("committer", ["partitioned", "magic"])
def test_crash_before_the_log_entry_then_recover(s3_server, s3, dest, committer):
    crash_at(s3_server, dest, committer, from_end=2)
    assert table(s3_server, dest).version() == 0
    (journal,) = [k for k in hidden(s3, dest) if k.endswith("journal.json")]
    job_id = journal.split("/")[-2]
    completed = {k for k in visible_keys(s3, dest.dir) if job_id in k}
    assert completed and not completed & active(s3_server, dest)  # complete, yet invisible

    report = recovery.recover(dest.url)
    assert report.job_id == job_id
    assert table(s3_server, dest).version() == 1
    assert completed <= active(s3_server, dest)
    assert len(rows(s3_server, dest)) == 60 + 15
    assert success(s3, dest)["deltaVersion"] == 1 and success(s3, dest)["jobId"] == job_id
    assert recovery.recover(dest.url).job_id is None
    assert_clean(s3, dest)


def test_crash_before_the_log_entry_then_abort(s3_server, s3, dest):
    crash_at(s3_server, dest, "partitioned", from_end=2)
    files = active(s3_server, dest)
    plan = recovery.plan_abort(dest.url)
    assert plan.job_id and plan.visible  # the completed files, named by the journal
    assert not set(plan.visible) & files
    recovery.abort(dest.url)
    assert table(s3_server, dest).version() == 0 and active(s3_server, dest) == files
    assert not [k for k in list_keys(s3, dest.dir) if plan.job_id in k]
    assert_clean(s3, dest)


def test_crash_after_the_log_entry_is_never_committed_twice(s3_server, s3, dest):
    """The retried commit (recover) finds the job's transaction and adds nothing."""
    crash_at(s3_server, dest, "partitioned", from_end=1)
    assert table(s3_server, dest).version() == 1
    files = active(s3_server, dest)
    with pytest.raises(CommitError, match="already committed as version 1"):
        recovery.abort(dest.url)
    assert active(s3_server, dest) == files  # abort changed nothing
    report = recovery.recover(dest.url)
    assert report.job_id is not None
    assert table(s3_server, dest).version() == 1 and active(s3_server, dest) == files
    assert len(rows(s3_server, dest)) == 60 + 15
    assert success(s3, dest)["deltaVersion"] == 1
    assert_clean(s3, dest)


# -- reports ------------------------------------------------------------------------------------
def test_success_report_and_cli_show_the_version(s3_server, s3, dest, capsys):
    kwargs = {"format": "delta", "partition_by": ["day"], "options": {"tasks": 1}}
    write_committed(orders(), dest.url, progress=False, **kwargs)
    write_committed(orders(DAYS[:1]), dest.url, conflict_mode="replace", progress=False, **kwargs)
    report = SuccessReport(dest.url)
    assert report.summary["delta_version"] == 1
    assert "Delta table version" in report.html and "1 (1 files removed)" in report.html
    assert cli(["success", dest.url]) == 0
    assert "Delta table   version 1, 1 files removed" in capsys.readouterr().out


def test_time_travel_keeps_every_version(s3_server, dest):
    for version in (1, 2, 3):
        write_committed(
            orders(["2026-11-20"], n=version, version=version),
            dest.url,
            format="delta",
            partition_by=["day"],
            conflict_mode="replace",
            progress=False,
        )
    for version in (0, 1, 2):
        found = rows(s3_server, dest, version=version)
        assert len(found) == version + 1 and {r[3] for r in found} == {version + 1}
    assert math.isclose(sum(r[0] for r in rows(s3_server, dest)), 0 + 1.5 + 3.0)


def test_written_parquet_is_plain_parquet(s3_server, s3, dest, tmp_path):
    result = write_committed(
        orders(), dest.url, format="delta", partition_by=["day"], progress=False
    )
    key = result.files[0].key
    assert key.endswith(".snappy.parquet")
    path = tmp_path / "f.parquet"
    path.write_bytes(s3.get_object(Bucket=BUCKET, Key=key)["Body"].read())
    assert pq.read_table(path).column_names == ["id", "amount", "version"]


# -- reading through the s3commit data source --------------------------------------------------
def test_the_s3commit_reader_reads_a_version_of_the_table(spark, s3_server, dest):
    """The current snapshot (never the files a replace removed), ``versionAsOf`` for an older
    one, and the table's own column types (a string day stays a string)."""
    from test_datasource import Native

    from s3commit_sdk import register

    write_committed(orders(), dest.url, format="delta", partition_by=["day"], progress=False)
    replaced = orders(["2026-11-21"], n=5, version=2)
    write_committed(
        replaced, dest.url, format="delta", partition_by=["day"], conflict_mode="replace"
    )
    register(spark)
    native = Native(spark, s3_server)

    def read(**options) -> tuple[list[tuple], dict[str, str]]:
        df = native.load(dest.url, **options)
        data = pa.Table.from_pylist([r.asDict() for r in df.collect()])
        got = sorted(tuple(r.values()) for r in data.select(sorted(data.column_names)).to_pylist())
        return got, dict(df.dtypes)

    current, types = read()
    assert current == rows(s3_server, dest) and len(current) == 20 + 5 + 20
    assert types == {"id": "bigint", "amount": "double", "version": "bigint", "day": "string"}
    assert read(versionAsOf="0")[0] == rows(s3_server, dest, version=0)
    with pytest.raises(Exception, match="versionAsOf='latest'"):
        read(versionAsOf="latest")
    with pytest.raises(Exception, match="cannot read version 7 of the Delta table"):
        read(versionAsOf="7")
