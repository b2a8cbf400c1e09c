"""A destination holding a backslash is refused before anything is written.

Some S3 servers store '\\' in a key as '/': a job writing there would report files that
listings show under other names, leave its marker behind, and an abort would report deletions
it never made. Every front end parses destinations with ``paths.py`` and so refuses it:
``write_committed`` (every committer), the ``s3commit`` CLI and ``format("s3commit")``.
"""

from __future__ import annotations

import contextlib
import io

import pandas as pd
import pytest
from conftest import BUCKET, list_keys, pending_uploads
from pyspark.errors import PySparkException

from s3commit_sdk import InvalidPathError, register, write_committed
from s3commit_sdk.cli import EXIT_USAGE, main

DESTINATION = f"s3://{BUCKET}/t/back\\slash"


def bucket_state(s3) -> tuple[list[str], list[str], object]:
    """Every key, every pending upload and the lifecycle rules of the test bucket."""
    try:
        rules = s3.get_bucket_lifecycle_configuration(Bucket=BUCKET).get("Rules")
    except s3.exceptions.ClientError as exc:
        rules = exc.response["Error"]["Code"]  # NoSuchLifecycleConfiguration
    return list_keys(s3, ""), [u["Key"] for u in pending_uploads(s3, "")], rules


@pytest.mark.parametrize("committer", ["directory", "partitioned", "magic", "manifest", "file"])
def test_write_committed_refuses_it_and_writes_nothing(s3, committer):
    before = bucket_state(s3)
    frame = pd.DataFrame({"id": [1, 2], "day": ["a", "b"]})
    with pytest.raises(InvalidPathError, match="backslash"):
        write_committed(frame, DESTINATION, committer=committer, partition_by=["day"])
    assert bucket_state(s3) == before


@pytest.mark.parametrize(
    "command",
    [
        ["uploads", "list", DESTINATION],
        ["uploads", "abort", "--force", DESTINATION],
        ["uploads", "expect", DESTINATION, "0"],
        ["success", DESTINATION],
        ["lifecycle", DESTINATION, "--abort-incomplete-days", "3"],
        ["recover", DESTINATION],
        ["abort", DESTINATION],
    ],
    ids=lambda c: " ".join(c[:2]),
)
def test_the_cli_refuses_it_and_writes_nothing(s3, command):
    before = bucket_state(s3)
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert main(command) == EXIT_USAGE
    assert "backslash" in err.getvalue()
    assert bucket_state(s3) == before


def test_the_spark_data_source_refuses_it_and_writes_nothing(spark, s3_server, s3):
    register(spark)
    options = {
        "endpoint": s3_server.endpoint,
        "access.key": s3_server.env["AWS_ACCESS_KEY_ID"],
        "secret.key": s3_server.env["AWS_SECRET_ACCESS_KEY"],
    }
    before = bucket_state(s3)
    with pytest.raises(PySparkException, match="backslash"):
        spark.range(3).write.format("s3commit").mode("append").options(**options).save(DESTINATION)
    with pytest.raises(PySparkException, match="backslash"):
        spark.read.format("s3commit").options(**options).load(DESTINATION).collect()
    assert bucket_state(s3) == before
