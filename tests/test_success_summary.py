"""``s3commit success`` and ``SuccessReport`` summarise a ``_SUCCESS`` document the same way.

A partition is named by its directory, exactly as in the committed keys: Spark's escaping, and
``__HIVE_DEFAULT_PARTITION__`` for a null value (the CLI used to print ``tag=None``, a directory
that does not exist). Sizes read as ``format_bytes`` writes them everywhere.
"""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from conftest import BUCKET, NESTED_PHASES

from s3commit_sdk import PendingSetError, read_result, write_committed
from s3commit_sdk.cli import main
from s3commit_sdk.formats import SUCCESS_FILES_CAP, SUCCESS_NAME, parse_success
from s3commit_sdk.layout import SUCCESS_FILES_NAME
from s3commit_sdk.textformat import format_bytes
from s3commit_sdk.uploads import format_success
from s3commit_sdk.widgets import SuccessReport


def test_cli_and_report_name_partitions_by_their_directories(capsys, dest):
    table = pa.table({"n": [1, 2, 3, 4], "tag": ["a:b", None, "plain", "plain"]})
    result = write_committed(table, dest.url, partition_by=["tag"], progress=False)
    directories = {f.key.removeprefix(dest.dir).rsplit("/", 1)[0] for f in result.files}
    assert directories == {"tag=a%3Ab", "tag=__HIVE_DEFAULT_PARTITION__", "tag=plain"}

    assert main(["success", dest.url]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines() if "=" in line[:5]}
    assert set(rows) == directories
    assert rows["tag=plain"][:2] == ["1", "2"]  # files, rows
    assert f"4 rows, {format_bytes(result.bytes)};" in out

    report = SuccessReport(dest.url)
    assert {p["partition"]: p["rows"] for p in report.partitions} == {
        "tag=a%3Ab": 1,
        "tag=__HIVE_DEFAULT_PARTITION__": 1,
        "tag=plain": 2,
    }


def test_sizes_past_a_tebibyte_and_files_outside_any_partition():
    doc = {"files": [{"partition": {}, "rows": 3, "size": 7}], "bytes": 3 * 1024**4}
    text = format_success(doc)
    assert "3.0 TiB;" in text  # was "3072.0 GiB" before the byte formatters were merged
    assert any(line.split()[:2] == ["(root)", "1"] for line in text.splitlines())


CASES = [
    ("directory", "parquet"),
    ("partitioned", "parquet"),
    ("magic", "parquet"),
    ("partitioned", "delta"),
    ("manifest", "parquet"),
    ("file", "parquet"),
]


@pytest.mark.parametrize(("committer", "fmt"), CASES, ids=[f"{c}-{f}" for c, f in CASES])
def test_success_of_every_committer_round_trips_through_its_type(
    committer, fmt, capsys, s3, dest, tmp_path
):
    """What each committer writes parses into the document its result holds, and back into
    exactly the JSON written; the CLI, ``read_result`` and the report read the same."""
    on_s3 = committer not in ("manifest", "file")
    url = dest.url if on_s3 else f"file://{tmp_path}/out"
    table = pa.table({"n": list(range(6)), "day": ["a", "b", "c"] * 2})
    result = write_committed(
        table,
        url,
        committer=committer,
        partition_by=["day"],
        format=fmt,
        options={"tasks": 2, "success.json": True} if committer == "file" else {"tasks": 2},
        progress=False,
    )
    if on_s3:
        body = s3.get_object(Bucket=BUCKET, Key=dest.dir + "_SUCCESS")["Body"].read()
    else:
        body = (tmp_path / "out" / "_SUCCESS").read_bytes()
    raw = json.loads(body)
    doc = parse_success(body)
    assert doc.to_dict() == raw
    assert doc == result.success and doc.files == result.files
    assert sorted(f.path for f in doc.files) == sorted(f.path for f in result.files)
    assert (doc.rows, doc.bytes, len(doc.files)) == (6, result.bytes, 6)
    assert set(doc.table) == ({"deltaVersion", "deltaRemovedFiles"} if fmt == "delta" else set())
    if on_s3:
        again = read_result(url)
        assert (again.job_id, again.files, again.success) == (result.job_id, result.files, doc)
        assert main(["success", url, "--json"]) == 0
        assert json.loads(capsys.readouterr().out) == raw
    report = SuccessReport(doc)
    assert report.summary["job"] == result.job_id and len(report.files) == 6


def test_hadoops_own_success_is_a_typed_error_naming_what_it_lacks(capsys, s3, dest):
    """A _SUCCESS of Hadoop's S3A committers lacks our fields: the CLI says so and exits 1."""
    hadoop = {"name": SUCCESS_NAME, "committer": "magic", "filenames": [], "success": True}
    s3.put_object(Bucket=BUCKET, Key=dest.dir + "_SUCCESS", Body=json.dumps(hadoop).encode())
    assert main(["success", dest.url]) == 1
    assert "not written by s3commit_sdk" in capsys.readouterr().err
    with pytest.raises(PendingSetError, match="lacks"):
        read_result(dest.url)


def test_phases_are_printed_as_they_nest_and_add_up():
    """The job is setup + tasks + job commit; tasks is writing + task commit; job commit is
    its stages plus the steps timed in no stage: each line adds up, none adds to the job."""
    lines = format_success({"files": [], "durations": NESTED_PHASES}).splitlines()
    head = "phase durations (s): job_setup=0.100 + tasks=12.000 + job_commit=0.500 = 12.600"
    assert head in lines
    assert "  tasks=12.000 = task_write=9.000 + task_commit=3.000" in lines
    assert (
        "  job_commit=0.500 = conflict_resolution=0.050 + complete_uploads=0.200 + "
        "cleanup=0.050 + other steps=0.200"
    ) in lines
    converted = {"prepare_input": 0.3, "job_setup": 0.1, "job_commit": 0.2, "cleanup": 0.1}
    lines = format_success({"durations": converted}).splitlines()
    head = "phase durations (s): prepare_input=0.300 + job_setup=0.100 + job_commit=0.200 = 0.600"
    assert head in lines
    assert "  job_commit=0.200 = cleanup=0.100 + other steps=0.100" in lines


def test_task_durations_are_said_to_be_each_tasks_own_time():
    """1.2 s to 1.9 s per task beside a 12 s tasks phase is no contradiction once said."""
    seconds = {"task_00000": 1.2, "task_00001": 1.9, "task_00002": 1.5, "task_00003": 1.4}
    text = format_success({"durations": {"tasks": 12.0}, "taskDurations": seconds})
    assert (
        "task durations (s): 4 tasks, 1.200 to 1.900 each, 6.000 in all: each task's own time, "
        "from its first row to its task commit; the tasks phase is the wall time of all of them"
    ) in text
    resumed = format_success({"taskDurations": dict.fromkeys(seconds, 0.0)})
    assert "task durations" not in resumed  # s3commit recover records 0 for unseen tasks


def test_a_delta_replace_says_its_transaction_removed_the_files(capsys, dest):
    """Not "replaced 0 objects" beside "1 files removed": a Delta replace deletes no object."""
    kwargs = {"format": "delta", "partition_by": ["day"], "options": {"tasks": 1}}
    table = pa.table({"n": [1, 2], "day": ["a", "b"]})
    write_committed(table, dest.url, progress=False, **kwargs)
    result = write_committed(
        table.slice(0, 1), dest.url, conflict_mode="replace", progress=False, **kwargs
    )
    assert main(["success", dest.url]) == 0
    out = capsys.readouterr().out
    for text in (format_success(result.success), out):
        assert (
            "; replaced 1 files (removed from the table by the Delta transaction of version 1; "
            "no object deleted)"
        ) in text
        assert "replaced 0 objects" not in text


def test_a_large_job_lists_its_first_files_in_success_and_every_file_beside_it(capsys, s3, dest):
    """Past SUCCESS_FILES_CAP files ``_SUCCESS`` stays small: it lists the first ones, counts
    them all and names ``_SUCCESS.files.jsonl``, written before it; every reader gets the whole
    list. A list of another job, or a document naming another object, is a typed error.
    (Verification lists the directory's files in runs of a page, one listing each: 1,000 + 5.)"""
    count = SUCCESS_FILES_CAP + 5
    table = pa.table({"n": list(range(count))})
    options = {"tasks": 2, "max_records_per_file": 1, "validate.output": True}
    result = write_committed(table, dest.url, committer="magic", options=options, progress=False)
    assert len(result.files) == count and result.rows == count
    assert result.success.completion_checks == {"listed": count}

    raw = json.loads(s3.get_object(Bucket=BUCKET, Key=dest.dir + "_SUCCESS")["Body"].read())
    assert (len(raw["files"]), raw["fileCount"]) == (SUCCESS_FILES_CAP, count)
    assert raw["filesManifest"] == SUCCESS_FILES_NAME and len(raw["filenames"]) == 100
    listing = s3.get_object(Bucket=BUCKET, Key=dest.dir + SUCCESS_FILES_NAME)["Body"].read()
    assert json.loads(listing.splitlines()[0])["jobId"] == result.job_id
    assert len(listing.splitlines()) == count + 1

    again = read_result(dest.url)
    assert sorted(again.files, key=lambda f: f.key) == sorted(result.files, key=lambda f: f.key)
    assert (again.rows, again.success.file_total) == (count, count)
    assert main(["success", dest.url]) == 0
    assert f"{count} rows" in capsys.readouterr().out
    assert len(SuccessReport(dest.url).files) == count

    other = listing.replace(result.job_id.encode(), b"0" * len(result.job_id), 1)
    s3.put_object(Bucket=BUCKET, Key=dest.dir + SUCCESS_FILES_NAME, Body=other)
    with pytest.raises(PendingSetError, match="another job committed since"):
        read_result(dest.url)
    raw["filesManifest"] = "../elsewhere.jsonl"
    s3.put_object(Bucket=BUCKET, Key=dest.dir + "_SUCCESS", Body=json.dumps(raw).encode())
    with pytest.raises(PendingSetError, match="malformed filesManifest"):
        read_result(dest.url)
