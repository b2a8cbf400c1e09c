"""Iceberg output: one committed job is one Iceberg snapshot, on moto and on Ceph RGW, with a
SQL catalog in a sqlite file and in a real PostgreSQL server (testing/postgres.py).

Tables are read back with pyiceberg's own catalog, configured here from the server's endpoint
and keys, independently of the SDK. Races are made deterministic: two jobs set up on the same
snapshot and commit one after the other, so the second meets the first's commit exactly as a
real race would.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pandas as pd
import pyarrow.parquet as pq
import pytest
from conftest import BUCKET, list_keys, pending_uploads, visible_keys

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
    InvalidOptionError,
    SchemaMismatchError,
)
from s3commit_sdk.runner import execute_task
from s3commit_sdk.testing.crash import crash_write
from s3commit_sdk.testing.faultproxy import FaultProxy, internal_error
from s3commit_sdk.testing.postgres import PostgresServer

pytest.importorskip("pyiceberg", reason="the iceberg extra (pyiceberg) is not installed")

COMMITTERS = ["directory", "partitioned", "magic"]
DAYS = ["2026-11-20", "2026-11-21", "2026-11-22"]


# -- catalogs -----------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def postgres():
    with PostgresServer() as server:
        yield server


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def catalog_uri(request, tmp_path):
    """The SQL catalog's database: a sqlite file of this test, or the session's PostgreSQL."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'catalog.db'}"
    return request.getfixturevalue("postgres").uri


@pytest.fixture
def sqlite_uri(tmp_path):
    return f"sqlite:///{tmp_path / 'catalog.db'}"


def table_name(dest) -> str:
    return "tests." + dest.prefix.rsplit("/", 1)[-1].replace("-", "_")


def ice(dest, uri: str, **extra) -> dict:
    """The write's options: the catalog and the table."""
    return {"iceberg.catalog.uri": uri, "iceberg.table": table_name(dest), **extra}


def load(s3_server, dest, uri: str):
    """The table through pyiceberg's own SqlCatalog (not the SDK's)."""
    from pyiceberg.catalog.sql import SqlCatalog

    env = s3_server.env
    catalog = SqlCatalog(
        "default",
        uri=uri,
        **{
            "s3.endpoint": s3_server.endpoint,
            "s3.access-key-id": env["AWS_ACCESS_KEY_ID"],
            "s3.secret-access-key": env["AWS_SECRET_ACCESS_KEY"],
            "s3.region": env["AWS_REGION"],
        },
    )
    return catalog.load_table(table_name(dest))


def rows(table, snapshot_id: int | None = None) -> list[tuple]:
    data = table.scan(snapshot_id=snapshot_id).to_arrow()
    return sorted(tuple(r.values()) for r in data.select(sorted(data.column_names)).to_pylist())


def job_of(snapshot) -> str | None:
    return snapshot.summary.additional_properties.get("s3commit.jobId")


def orders(days=DAYS, n: int = 20, version: int = 1) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "id": [i for _ in days for i in range(n)],
            "amount": [i * 1.5 for _ in days for i in range(n)],
            "version": [version] * (n * len(days)),
            "day": [d for d in days for _ in range(n)],
        }
    )


def write(df, dest, uri, **kwargs):
    options = {**ice(dest, uri), **kwargs.pop("options", {})}
    kwargs.setdefault("partition_by", ["day"])
    return write_committed(
        df, dest.url, format="iceberg", options=options, progress=False, **kwargs
    )


def hidden(s3, dest) -> list[str]:
    return list_keys(s3, dest.dir + "__s3commit/")


def data_keys(s3, dest) -> set[str]:
    return {k for k in visible_keys(s3, dest.dir) if k.endswith(".parquet")}


def snapshot_keys(table, snapshot_id: int | None = None) -> set[str]:
    prefix = f"s3://{BUCKET}/"
    return {
        t.file.file_path.removeprefix(prefix)
        for t in table.scan(snapshot_id=snapshot_id).plan_files()
    }


def success(s3, dest) -> dict:
    return json.loads(s3.get_object(Bucket=BUCKET, Key=dest.dir + "_SUCCESS")["Body"].read())


def assert_clean(s3, dest) -> None:
    assert pending_uploads(s3, dest.dir) == []
    assert hidden(s3, dest) == []


def prepared(dest, uri, df, **kwargs):
    """An Iceberg job set up and its task run, not yet committed: (committer, messages)."""
    data = to_arrow(df)
    job = new_job(
        dest.url,
        committer=kwargs.pop("committer", "partitioned"),
        partition_by=kwargs.pop("partition_by", ["day"]),
        conflict_mode=kwargs.pop("conflict_mode", "append"),
        format="iceberg",
        options={**ice(dest, uri), **kwargs.pop("options", {})},
        schema=data.schema,
        conf=None,
    )
    committer = make_committer(job)
    committer.setup_job()
    return committer, [execute_task(job, 0, 0, data.to_batches(), data.schema)]


# -- round trips and snapshots ------------------------------------------------------------------
@pytest.mark.parametrize("committer", COMMITTERS)
def test_each_job_is_one_snapshot_carrying_its_job_id(s3_server, s3, dest, catalog_uri, committer):
    first = write(orders(), dest, catalog_uri, committer=committer, conflict_mode="append")
    second = write(
        orders(n=5, version=2), dest, catalog_uri, committer=committer, conflict_mode="append"
    )
    table = load(s3_server, dest, catalog_uri)
    snapshots = table.snapshots()
    assert [job_of(s) for s in snapshots] == [first.job_id, second.job_id]
    assert [s.summary.operation.value for s in snapshots] == ["append", "append"]
    assert [first.success["icebergSnapshotId"], second.success["icebergSnapshotId"]] == [
        s.snapshot_id for s in snapshots
    ]
    expected = sorted(
        tuple(r[c] for c in ("amount", "day", "id", "version"))
        for df in (orders(), orders(n=5, version=2))
        for r in df.to_dict("records")
    )
    assert rows(table) == expected
    assert snapshot_keys(table) == data_keys(s3, dest)  # every completed file, in the table
    assert table.location() == dest.url
    assert_clean(s3, dest)


def test_files_carry_field_ids_and_the_partition_column(s3_server, s3, dest, sqlite_uri, tmp_path):
    result = write(orders(), dest, sqlite_uri)
    key = result.files[0].key
    path = tmp_path / "f.parquet"
    path.write_bytes(s3.get_object(Bucket=BUCKET, Key=key)["Body"].read())
    schema = pq.read_schema(path)
    assert schema.names == ["id", "amount", "version", "day"]
    ids = [int(f.metadata[b"PARQUET:field_id"]) for f in schema]
    table = load(s3_server, dest, sqlite_uri)
    assert ids == [table.schema().find_field(n).field_id for n in schema.names]


def test_statistics_come_from_the_footers_and_prune(s3_server, s3, dest, sqlite_uri):
    """Bounds and counts are recorded per file (none read back at commit: the task's footer),
    partition values are exact, and a filter on the partition plans one file."""
    with FaultProxy(s3_server.endpoint) as proxy:
        proxy.record_headers("host")  # records every request
        write(orders(), dest, sqlite_uri, options={"endpoint": proxy.endpoint, "tasks": 1})
        assert proxy.requests
        data_reads = [
            r for r in proxy.requests if r.operation == "GetObject" and r.path.endswith(".parquet")
        ]  # (job commit's verification may HEAD them: it reads no byte)
    assert data_reads == []
    table = load(s3_server, dest, sqlite_uri)
    tasks = list(table.scan(row_filter="day = '2026-11-21'").plan_files())
    assert len(tasks) == 1
    data = tasks[0].file
    assert data.record_count == 20 and str(data.partition[0]) == "2026-11-21"
    id_field = table.schema().find_field("id").field_id
    assert data.null_value_counts[id_field] == 0 and data.value_counts[id_field] == 20
    assert int.from_bytes(data.upper_bounds[id_field], "little") == 19


def test_partition_values_of_every_kind_read_back(s3_server, s3, dest, sqlite_uri):
    """Dates, integers, booleans and nulls as partition values: recorded typed, read back."""
    import datetime as dt

    frame = pd.DataFrame(
        {
            "v": ["a", "b", "c", "d"],
            "d": [dt.date(2026, 1, 1), dt.date(2026, 1, 2), None, dt.date(2026, 1, 1)],
            "n": [1, 2, 2, None],
            "flag": [True, False, True, True],
        }
    ).astype({"n": "Int64"})
    write(frame, dest, sqlite_uri, partition_by=["d", "n", "flag"])
    table = load(s3_server, dest, sqlite_uri)
    got = table.scan().to_arrow().sort_by("v").to_pydict()
    assert got["d"] == [dt.date(2026, 1, 1), dt.date(2026, 1, 2), None, dt.date(2026, 1, 1)]
    assert got["n"] == [1, 2, 2, None] and got["flag"] == [True, False, True, True]
    assert table.scan(row_filter="d IS NULL").to_arrow().column("v").to_pylist() == ["c"]
    assert len(list(table.scan(row_filter="n = 2").plan_files())) == 2


def test_metadata_files_carry_the_jobs_request_options(s3_server, s3, dest, sqlite_uri):
    """The snapshot's manifests, manifest list and metadata file are written through the
    SDK's store: single PUTs with the job's SSE-KMS key, as its data files are (pyarrow's own
    IO would send chunked multipart uploads, which Ceph RGW 16 refuses)."""
    import boto3

    from s3commit_sdk.testing.rgw import RGW_TEST_KMS_KEY

    if s3_server.kind == "rgw":
        key = RGW_TEST_KMS_KEY
    else:
        kms = boto3.client("kms", endpoint_url=s3_server.endpoint, region_name="us-east-1")
        key = kms.create_key(Description="s3commit iceberg tests")["KeyMetadata"]["KeyId"]
    sse = {"encryption.algorithm": "SSE-KMS", "encryption.key": key}
    write(orders(), dest, sqlite_uri, options=sse)
    write(orders(n=2, version=2), dest, sqlite_uri, options=sse, conflict_mode="append")
    metadata = [k for k in list_keys(s3, dest.dir + "metadata/")]
    assert any(k.endswith(".metadata.json") for k in metadata)
    assert any(k.endswith(".avro") for k in metadata)
    for name in metadata + sorted(data_keys(s3, dest)):
        head = s3.head_object(Bucket=BUCKET, Key=name)
        assert head["ServerSideEncryption"] == "aws:kms", name
        assert head["SSEKMSKeyId"].endswith(key), name
    assert len(rows(load(s3_server, dest, sqlite_uri))) == 66
    assert_clean(s3, dest)


# -- replace and fail ---------------------------------------------------------------------------
@pytest.mark.parametrize("committer", ["partitioned", "magic"])
def test_partition_replace_is_one_overwrite_snapshot(s3_server, s3, dest, catalog_uri, committer):
    first = write(orders(), dest, catalog_uri, committer=committer)
    removed = sum("day=2026-11-21/" in f.key for f in first.files)
    before = load(s3_server, dest, catalog_uri)
    old = before.current_snapshot().snapshot_id
    replaced = write(
        orders(["2026-11-21"], n=5, version=2),
        dest,
        catalog_uri,
        committer=committer,
        conflict_mode="replace",
    )
    table = load(s3_server, dest, catalog_uri)
    snapshots = table.snapshots()
    assert len(snapshots) == 2  # no intermediate "partition empty" snapshot
    assert snapshots[-1].summary.operation.value == "overwrite"
    assert snapshots[-1].summary.additional_properties["deleted-data-files"] == str(removed)
    assert replaced.success["icebergRemovedFiles"] == removed
    per_day = {d: sorted({r[3] for r in rows(table) if r[1] == d}) for d in DAYS}
    assert per_day == {"2026-11-20": [1], "2026-11-21": [2], "2026-11-22": [1]}
    assert len(rows(table)) == 45
    assert len(rows(table, old)) == 60  # time travel: the old files stay in storage
    assert_clean(s3, dest)


def test_replace_without_partitions_replaces_the_table(s3_server, s3, dest, sqlite_uri):
    write(orders(), dest, sqlite_uri, committer="directory", partition_by=None)
    write(
        orders(DAYS[:1], n=3, version=2),
        dest,
        sqlite_uri,
        committer="directory",
        partition_by=None,
        conflict_mode="replace",
    )
    table = load(s3_server, dest, sqlite_uri)
    assert len(rows(table)) == 3 and {r[3] for r in rows(table)} == {2}
    assert table.snapshots()[-1].summary.operation.value == "overwrite"
    assert_clean(s3, dest)


def test_fail_refuses_an_occupied_partition_before_any_upload(s3_server, s3, dest, sqlite_uri):
    write(orders(), dest, sqlite_uri)
    keys = list_keys(s3, dest.dir)
    with pytest.raises(ConflictError, match="day=2026-11-21"):
        write(orders(["2026-11-21"], n=2), dest, sqlite_uri, conflict_mode="fail")
    assert list_keys(s3, dest.dir) == keys
    assert len(load(s3_server, dest, sqlite_uri).snapshots()) == 1
    write(orders(["2026-12-01"], n=2), dest, sqlite_uri, conflict_mode="fail")  # a new one
    assert len(rows(load(s3_server, dest, sqlite_uri))) == 62
    assert_clean(s3, dest)


def test_data_that_does_not_fit_is_refused_before_any_upload(s3_server, s3, dest, sqlite_uri):
    write(orders(), dest, sqlite_uri)
    keys = list_keys(s3, dest.dir)
    wrong = orders().astype({"id": str})
    with pytest.raises(SchemaMismatchError, match="column 'id' is string in the data, long"):
        write(wrong, dest, sqlite_uri, conflict_mode="append")
    with pytest.raises(InvalidArgumentError, match="partition_by=\\['day'\\]"):
        write(orders(), dest, sqlite_uri, partition_by=["version"], conflict_mode="append")
    assert list_keys(s3, dest.dir) == keys
    assert len(load(s3_server, dest, sqlite_uri).snapshots()) == 1


def test_options_are_checked(dest, sqlite_uri):
    with pytest.raises(InvalidOptionError, match=r"namespace\.name"):
        write(orders(), dest, sqlite_uri, options={"iceberg.table": "events"})
    with pytest.raises(InvalidOptionError, match=r"iceberg\.catalog\.type"):
        write(orders(), dest, sqlite_uri, options={"iceberg.catalog.type": "hive"})
    with pytest.raises(InvalidArgumentError, match="S3 committers"):
        write(orders(), dest, sqlite_uri, committer="manifest")
    with pytest.raises(InvalidOptionError, match="format 'parquet' would ignore it"):
        write_committed(orders(), dest.url, options={"iceberg.table": "a.b"}, progress=False)


# -- concurrency --------------------------------------------------------------------------------
def test_appends_from_one_snapshot_both_land(s3_server, s3, dest, catalog_uri):
    write(orders(), dest, catalog_uri)
    first, first_messages = prepared(dest, catalog_uri, orders(n=3, version=2))
    second, second_messages = prepared(dest, catalog_uri, orders(n=4, version=3))
    first.commit_job(first_messages, {})
    second.commit_job(second_messages, {})
    table = load(s3_server, dest, catalog_uri)
    assert [job_of(s) for s in table.snapshots()[1:]] == [first.job.job_id, second.job.job_id]
    assert len(rows(table)) == 60 + 9 + 12
    assert_clean(s3, dest)


def test_first_jobs_racing_to_create_the_table_both_land(s3_server, s3, dest, sqlite_uri):
    first, first_messages = prepared(dest, sqlite_uri, orders(n=3, version=2))
    second, second_messages = prepared(dest, sqlite_uri, orders(n=4, version=3))
    first.commit_job(first_messages, {})
    second.commit_job(second_messages, {})
    table = load(s3_server, dest, sqlite_uri)
    assert len(table.snapshots()) == 2 and len(rows(table)) == 9 + 12
    assert_clean(s3, dest)


@pytest.mark.parametrize("day", ["2026-11-21", "2026-12-01"], ids=["existing", "new"])
def test_replace_racing_a_replace_fails_and_leaves_nothing(s3_server, s3, dest, catalog_uri, day):
    write(orders(), dest, catalog_uri)
    loser, loser_messages = prepared(
        dest, catalog_uri, orders([day], version=2), conflict_mode="replace"
    )
    winner, winner_messages = prepared(
        dest, catalog_uri, orders([day], version=3), conflict_mode="replace"
    )
    winner.commit_job(winner_messages, {})
    with pytest.raises(ConcurrentCommitError, match="rolled back"):
        loser.commit_job(loser_messages, {})
    table = load(s3_server, dest, catalog_uri)
    assert [job_of(s) for s in table.snapshots()][-1] == winner.job.job_id
    assert {r[3] for r in rows(table) if r[1] == day} == {3}
    assert not [k for k in list_keys(s3, dest.dir) if loser.job.job_id in k]
    assert_clean(s3, dest)


@pytest.mark.parametrize("appended", ["2026-11-21", "2026-11-22"], ids=["same", "other"])
def test_replace_racing_an_append(s3_server, s3, dest, sqlite_uri, appended):
    """An append landing in a partition while a replace of it runs fails the replace (its
    rows would be dropped otherwise); an append elsewhere does not."""
    write(orders(), dest, sqlite_uri)
    day = "2026-11-21"
    replace, messages = prepared(
        dest, sqlite_uri, orders([day], version=2), conflict_mode="replace"
    )
    write(orders([appended], n=5, version=3), dest, sqlite_uri, conflict_mode="append")
    if appended == day:
        with pytest.raises(ConcurrentCommitError, match="added files"):
            replace.commit_job(messages, {})
        assert not [k for k in list_keys(s3, dest.dir) if replace.job.job_id in k]
        expected = [1] * 20 + [3] * 5
    else:
        replace.commit_job(messages, {})
        expected = [2] * 20
    table = load(s3_server, dest, sqlite_uri)
    assert sorted(r[3] for r in rows(table) if r[1] == day) == expected
    assert sorted(r[3] for r in rows(table) if r[1] == "2026-11-22")[-1] == (
        3 if appended != day else 1
    )
    assert_clean(s3, dest)


CHILD = """
import json, sys, time
import pandas as pd
from s3commit_sdk import write_committed
spec = json.loads(sys.argv[1])
frame = pd.DataFrame(spec["frame"])
while time.time() < spec["start"]:
    time.sleep(0.005)
result = write_committed(frame, spec["dest"], format="iceberg", partition_by=["day"],
                         conflict_mode="append", options=spec["options"], progress=False)
print(json.dumps({"job": result.job_id, "snapshot": result.success["icebergSnapshotId"]}))
"""


def test_two_processes_appending_at_once_both_land(s3_server, s3, dest, catalog_uri):
    write(orders(), dest, catalog_uri)
    start = time.time() + 8  # both past their imports, then off at once
    children = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, json.dumps(spec)],
            env={**__import__("os").environ, **s3_server.env},
            stdout=subprocess.PIPE,
            text=True,
        )
        for spec in (
            {
                "dest": dest.url,
                "start": start,
                "frame": orders(n=5, version=v).to_dict("list"),
                "options": ice(dest, catalog_uri),
            }
            for v in (2, 3)
        )
    ]
    results = [json.loads(child.communicate(timeout=180)[0]) for child in children]
    assert [child.returncode for child in children] == [0, 0]
    table = load(s3_server, dest, catalog_uri)
    assert {job_of(s) for s in table.snapshots()[1:]} == {r["job"] for r in results}
    assert len(rows(table)) == 60 + 15 + 15
    assert_clean(s3, dest)


# -- failures, crashes and recovery -------------------------------------------------------------
def test_a_failed_catalog_commit_deletes_the_completed_files(s3_server, s3, dest, sqlite_uri):
    """The catalog's metadata file cannot be written: the job is rolled back, its completed
    files deleted, the table at its previous snapshot."""
    write(orders(), dest, sqlite_uri)
    with FaultProxy(s3_server.endpoint) as proxy:
        options = {"endpoint": proxy.endpoint, "retry.max-attempts": 1}
        committer, messages = prepared(dest, sqlite_uri, orders(n=3, version=2), options=options)
        # job commit PUTs the journal, then the snapshot's manifest: every PUT after it fails
        proxy.set_rules([internal_error("PutObject", occurrences=range(2, 200))])
        with pytest.raises(CommitError, match="rolled back") as failure:
            committer.commit_job(messages, {})
    assert not isinstance(failure.value, ConcurrentCommitError)
    table = load(s3_server, dest, sqlite_uri)
    assert len(table.snapshots()) == 1
    assert not [k for k in list_keys(s3, dest.dir) if committer.job.job_id in k]
    assert_clean(s3, dest)


APPEND = {"format": "iceberg", "partition_by": ["day"], "conflict_mode": "append"}


def requests_of_append(s3_server, dest, uri, committer: str, operation: str) -> int:
    """How many ``operation`` requests one append of ``orders(n=5)`` makes (one task)."""
    reference = type(dest)(dest.prefix + "-reference")
    write(orders(), reference, uri)
    with FaultProxy(s3_server.endpoint) as proxy:
        write(
            orders(n=5),
            reference,
            uri,
            committer=committer,
            conflict_mode="append",
            options={"tasks": 1, "endpoint": proxy.endpoint},
        )
        return proxy.counts[operation]


def crash_in_append(s3_server, dest, uri, operation, occurrence, committer="partitioned"):
    """Seed one snapshot, then kill a driver appending a second one at its ``occurrence``-th
    ``operation`` request."""
    write(orders(), dest, uri)
    crash_write(
        orders(n=5, version=2),
        dest.url,
        operation=operation,
        occurrence=occurrence,
        committer=committer,
        options={**ice(dest, uri), "tasks": 1},
        **APPEND,
    )


def crash_at_catalog_commit(s3_server, dest, uri, committer="partitioned") -> None:
    """... at the snapshot's first PUT (its manifest; then its manifest list, its metadata
    file and, last, ``_SUCCESS``), after every data file was completed."""
    puts = requests_of_append(s3_server, dest, uri, committer, "PutObject")
    crash_in_append(s3_server, dest, uri, "PutObject", puts - 3, committer)


@pytest.mark.parametrize("committer", ["partitioned", "magic"])
def test_crash_before_the_snapshot_then_recover(s3_server, s3, dest, sqlite_uri, committer):
    crash_at_catalog_commit(s3_server, dest, sqlite_uri, committer)
    assert len(load(s3_server, dest, sqlite_uri).snapshots()) == 1
    (journal,) = [k for k in hidden(s3, dest) if k.endswith("journal.json")]
    job_id = journal.split("/")[-2]
    completed = {k for k in visible_keys(s3, dest.dir) if job_id in k and "metadata/" not in k}
    assert completed and not completed & snapshot_keys(load(s3_server, dest, sqlite_uri))

    report = recovery.recover(dest.url, {"iceberg.catalog.uri": sqlite_uri})
    assert report.job_id == job_id
    table = load(s3_server, dest, sqlite_uri)
    assert [job_of(s) for s in table.snapshots()][-1] == job_id
    assert completed <= snapshot_keys(table)
    assert len(rows(table)) == 60 + 15
    assert success(s3, dest)["icebergSnapshotId"] == table.current_snapshot().snapshot_id
    assert recovery.recover(dest.url, {"iceberg.catalog.uri": sqlite_uri}).job_id is None
    assert_clean(s3, dest)


def test_crash_before_the_snapshot_then_abort(s3_server, s3, dest, sqlite_uri):
    crash_at_catalog_commit(s3_server, dest, sqlite_uri)
    files = snapshot_keys(load(s3_server, dest, sqlite_uri))
    options = {"iceberg.catalog.uri": sqlite_uri}
    plan = recovery.plan_abort(dest.url, options)
    assert plan.job_id and plan.visible and not set(plan.visible) & files
    recovery.abort(dest.url, options)
    table = load(s3_server, dest, sqlite_uri)
    assert len(table.snapshots()) == 1 and snapshot_keys(table) == files
    assert not [k for k in list_keys(s3, dest.dir) if plan.job_id in k]
    assert_clean(s3, dest)


def test_a_recovered_commit_that_had_landed_adds_nothing(s3_server, s3, dest, sqlite_uri):
    """The driver died after the catalog commit, at its last request (``_SUCCESS``): abort
    refuses (the snapshot is the table's), recover finds the snapshot by job id and only
    cleans up."""
    puts = requests_of_append(s3_server, dest, sqlite_uri, "partitioned", "PutObject")
    crash_in_append(s3_server, dest, sqlite_uri, "PutObject", puts)  # its _SUCCESS
    table = load(s3_server, dest, sqlite_uri)
    assert len(table.snapshots()) == 2
    job_id = job_of(table.snapshots()[-1])
    options = {"iceberg.catalog.uri": sqlite_uri}
    with pytest.raises(CommitError, match="already committed as snapshot"):
        recovery.abort(dest.url, options)
    report = recovery.recover(dest.url, options)
    assert report.job_id == job_id
    table = load(s3_server, dest, sqlite_uri)
    assert len(table.snapshots()) == 2 and len(rows(table)) == 75
    assert success(s3, dest)["icebergSnapshotId"] == table.current_snapshot().snapshot_id
    assert_clean(s3, dest)


# -- reports ------------------------------------------------------------------------------------
def test_success_report_and_cli_show_the_snapshot(s3_server, s3, dest, sqlite_uri, capsys):
    from s3commit_sdk.widgets import SuccessReport

    write(orders(), dest, sqlite_uri, options={"tasks": 1})
    result = write(orders(DAYS[:1]), dest, sqlite_uri, conflict_mode="replace")
    snapshot = result.success["icebergSnapshotId"]
    assert snapshot == load(s3_server, dest, sqlite_uri).current_snapshot().snapshot_id
    doc = success(s3, dest)
    assert doc["icebergTable"] == table_name(dest) and "sqlite" in doc["icebergCatalog"]
    report = SuccessReport(dest.url)
    assert report.summary["iceberg_snapshot_id"] == snapshot
    assert f"{snapshot} (1 files removed)" in report.html
    assert cli(["success", dest.url]) == 0
    out = capsys.readouterr().out
    assert f"Iceberg table {table_name(dest)}, snapshot {snapshot}, 1 files removed" in out


def test_catalog_password_stays_out_of_journal_and_success(s3_server, s3, dest, postgres):
    """A PostgreSQL catalog's URI holds a password: neither the journal (in S3) nor _SUCCESS
    records it; the table's properties hold no credential either."""
    committer, messages = prepared(dest, postgres.uri, orders(n=2))
    journal_texts = []
    original = committer.store.put

    def spying_put(bucket, key, body, *args, **kwargs):
        if key.endswith("journal.json"):
            journal_texts.append(body if isinstance(body, str) else bytes(body).decode())
        return original(bucket, key, body, *args, **kwargs)

    committer.store.put = spying_put
    committer.commit_job(messages, {})
    password = postgres.password
    assert journal_texts and all(password not in text for text in journal_texts)
    assert password not in json.dumps(success(s3, dest))
    table = load(s3_server, dest, postgres.uri)
    secret = s3_server.env["AWS_SECRET_ACCESS_KEY"]
    assert not [v for v in table.properties.values() if password in v or secret in v]
    assert_clean(s3, dest)


# -- reading ------------------------------------------------------------------------------------
def test_the_sdk_reader_reads_a_snapshot(s3_server, dest, sqlite_uri):
    from s3commit_sdk.iceberg.read import IcebergRead
    from s3commit_sdk.options import resolve_options
    from s3commit_sdk.paths import parse_s3_url
    from s3commit_sdk.scan import list_table
    from s3commit_sdk.store import open_store

    first = write(orders(), dest, sqlite_uri, options={"tasks": 1})
    write(orders(["2026-11-21"], n=5, version=2), dest, sqlite_uri, conflict_mode="replace")
    options = resolve_options(ice(dest, sqlite_uri))
    store = open_store(None)
    location = parse_s3_url(dest.url)
    now = list_table(store, location, "iceberg", iceberg=IcebergRead(options))
    table = load(s3_server, dest, sqlite_uri)
    assert {f.key for f in now.files} == snapshot_keys(table)
    assert now.schema.names == ["id", "amount", "version", "day"]
    old = IcebergRead(options, snapshot_id=first.success["icebergSnapshotId"])
    then = list_table(store, location, "iceberg", iceberg=old)
    assert {f.key for f in then.files} == {f.key for f in first.files}
    assert {f.key for f in then.files} != {f.key for f in now.files}
    with pytest.raises(InvalidArgumentError, match="has no snapshot 42"):
        list_table(store, location, "iceberg", iceberg=IcebergRead(options, snapshot_id=42))


# -- AWS Glue -------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def glue():
    """moto's Glue, a service of its own beside the S3 server under test (RGW has none)."""
    from s3commit_sdk.testing.sandbox import S3Sandbox

    with S3Sandbox(bucket="glue-unused", export=False) as server:
        yield server


def test_the_glue_catalog(s3_server, s3, dest, glue):
    """iceberg.catalog.type=glue: each job one snapshot, Glue's table pointing at its
    metadata, the replace one overwrite; Glue's parameters hold no credential."""
    import boto3

    name = table_name(dest)
    options = {
        "iceberg.catalog.type": "glue",
        "iceberg.catalog.glue.endpoint": glue.endpoint,
        "iceberg.table": name,
    }
    kwargs = {"format": "iceberg", "partition_by": ["day"], "progress": False}
    first = write_committed(orders(), dest.url, options=options, **kwargs)
    second = write_committed(
        orders(DAYS[:1], n=3, version=2),
        dest.url,
        conflict_mode="replace",
        options=options,
        **kwargs,
    )
    assert second.success["icebergCatalog"] == "glue"
    client = boto3.client("glue", endpoint_url=glue.endpoint, region_name="us-east-1")
    namespace, table = name.split(".")
    parameters = client.get_table(DatabaseName=namespace, Name=table)["Table"]["Parameters"]
    assert parameters["table_type"] == "ICEBERG"
    assert parameters["metadata_location"].startswith(dest.url + "/metadata/")
    secret = s3_server.env["AWS_SECRET_ACCESS_KEY"]
    assert not [v for v in parameters.values() if secret in v]

    from s3commit_sdk.iceberg import open_table

    opened = open_table(dest.url, options)
    snapshots = [s.snapshot_id for s in opened.snapshots()]
    assert snapshots == [first.success["icebergSnapshotId"], second.success["icebergSnapshotId"]]
    assert opened.scan().to_arrow().num_rows == 40 + 3
    assert_clean(s3, dest)


# -- Spark (classic) ----------------------------------------------------------------------------
def test_spark_input(spark, s3_server, s3, dest, catalog_uri):
    frame = spark.createDataFrame(orders()).repartition(3)
    result = write_committed(
        frame,
        dest.url,
        format="iceberg",
        partition_by=["day"],
        options=ice(dest, catalog_uri),
        progress=False,
    )
    table = load(s3_server, dest, catalog_uri)
    assert job_of(table.current_snapshot()) == result.job_id
    assert len(rows(table)) == 60 and snapshot_keys(table) == data_keys(s3, dest)
    assert_clean(s3, dest)


def test_the_data_source_writes_and_reads_snapshots(spark, s3_server, s3, dest, sqlite_uri):
    """df.write.format("s3commit") with format iceberg (committed in Spark's Python worker),
    then spark.read of the current snapshot, of an older one by snapshotId and by
    asOfTimestamp; a replace keeps the other partitions."""
    from test_datasource import Native

    from s3commit_sdk import read_result, register

    register(spark)
    native = Native(spark, s3_server)
    options = {"format": "iceberg", **ice(dest, sqlite_uri)}
    native.save(spark.createDataFrame(orders()), dest.url, "append", partition_by="day", **options)
    first = read_result(dest.url).success["icebergSnapshotId"]
    day = spark.createDataFrame(orders(["2026-11-21"], n=5, version=2))
    native.save(day, dest.url, "overwrite", partition_by="day", **options)
    table = load(s3_server, dest, sqlite_uri)
    assert [s.summary.operation.value for s in table.snapshots()] == ["append", "overwrite"]

    def read(**more: str) -> list[tuple]:
        df = native.load(dest.url, **{**options, **more})
        return sorted(tuple(r[c] for c in ("amount", "day", "id", "version")) for r in df.collect())

    assert read() == rows(table) and len(read()) == 45
    assert read(snapshotId=str(first)) == rows(table, first)
    first_ms = table.snapshot_by_id(first).timestamp_ms
    assert read(asOfTimestamp=str(first_ms)) == rows(table, first)
    with pytest.raises(Exception, match="no snapshot 7"):
        read(snapshotId="7")
    assert_clean(s3, dest)
