"""``s3commit success`` and ``SuccessReport`` summarise a ``_SUCCESS`` document the same way.

A partition is named by its directory, exactly as in the committed keys: Spark's escaping, and
``__HIVE_DEFAULT_PARTITION__`` for a null value (the CLI used to print ``tag=None``, a directory
that does not exist). Sizes read as ``format_bytes`` writes them everywhere.
"""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from conftest import BUCKET

from s3commit_sdk import PendingSetError, read_result, write_committed
from s3commit_sdk.cli import main
from s3commit_sdk.formats import SUCCESS_NAME, parse_success
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
