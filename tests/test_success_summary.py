"""``s3commit success`` and ``SuccessReport`` summarise a ``_SUCCESS`` document the same way.

A partition is named by its directory, exactly as in the committed keys: Spark's escaping, and
``__HIVE_DEFAULT_PARTITION__`` for a null value (the CLI used to print ``tag=None``, a directory
that does not exist). Sizes read as ``format_bytes`` writes them everywhere.
"""

from __future__ import annotations

import pyarrow as pa

from s3commit_sdk import write_committed
from s3commit_sdk.cli import main
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
