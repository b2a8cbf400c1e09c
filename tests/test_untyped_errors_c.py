"""Untyped errors and small defects the probe found (issue 27, item 8), each typed or fixed:

- a credentials provider that raises gives a ``CredentialsError`` naming the provider and the
  cause, before anything is uploaded (``visible``: nothing), not botocore's exception;
- ``s3commit`` prints what comes from the store (``_SUCCESS`` fields, keys) with its control
  characters escaped: a crafted ``_SUCCESS`` cannot drive the terminal;
- a Spark task failure's cause is the exception line of the worker's traceback
  (``ValueError: bad row 7``), not its last source line (``raise ValueError(...)``); on Spark
  Connect in test_error_envelope.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest
from conftest import BUCKET, list_keys, pending_uploads

from s3commit_sdk import TaskFailedError, write_committed
from s3commit_sdk.cli import main as cli
from s3commit_sdk.errors import CredentialsError, first_line

#: what a terminal acts on: clear screen, set the window title, CSI (C1), a right-to-left
#: override, a carriage return, and a line break that would forge a line of the report
HOSTILE = "\x1b[2J\x1b]0;owned\x07\x9b31m\u202e\r\nforged line"
RAW_CONTROLS = ("\x1b", "\x07", "\x9b", "\u202e", "\r")


def clean(s3, prefix: str) -> None:
    keys = list_keys(s3, prefix)
    if keys:
        s3.delete_objects(Bucket=BUCKET, Delete={"Objects": [{"Key": k} for k in keys]})


# -- a credentials provider that raises ---------------------------------------------------------
def sealed_vault() -> dict:
    raise ConnectionError("the vault is sealed")


def test_a_provider_that_raises_is_a_typed_error_before_any_upload(s3, dest):
    with pytest.raises(CredentialsError) as failed:
        write_committed(pd.DataFrame({"id": range(5)}), dest.url, credentials_provider=sealed_vault)
    error = failed.value
    assert error.provider == f"{__name__}:sealed_vault"
    assert "sealed_vault raised ConnectionError: the vault is sealed" in str(error)
    assert error.visible == "nothing" and "nothing was uploaded" in str(error)
    assert isinstance(error.__cause__, ConnectionError)
    assert list_keys(s3, dest.dir) == []


# -- s3commit prints no control character from the store --------------------------------------
def test_s3commit_success_escapes_control_characters_from_a_crafted_success(s3, dest, capsys):
    write_committed(
        pd.DataFrame({"id": range(4), "day": ["a", "b"] * 2}), dest.url, partition_by=["day"]
    )
    key = dest.dir + "_SUCCESS"
    doc = json.loads(s3.get_object(Bucket=BUCKET, Key=key)["Body"].read())
    doc["jobId"] += HOSTILE
    doc["hostname"] = HOSTILE
    doc["conflictMode"] = HOSTILE
    doc["durations"] = {f"phase{HOSTILE}": 1.0}
    doc["requests"] = {f"Put{HOSTILE}": 3}
    doc["files"][0]["partition"] = {"day": HOSTILE}
    s3.put_object(Bucket=BUCKET, Key=key, Body=json.dumps(doc).encode())

    assert cli(["success", dest.url]) == 0
    text = capsys.readouterr().out
    assert not any(c in text for c in RAW_CONTROLS), repr(text)
    assert "\\u001b[2J" in text and "\\u009b31m" in text and "\\u202e" in text
    assert not any(line.startswith("forged line") for line in text.splitlines())
    assert "\\u000d\\u000aforged line" in text  # the line break shown, not made

    assert cli(["success", dest.url, "--json"]) == 0
    printed = capsys.readouterr().out
    assert not any(c in printed for c in RAW_CONTROLS)
    assert json.loads(printed)["conflictMode"] == HOSTILE  # escaped, the same JSON value
    clean(s3, dest.dir)


def test_s3commit_uploads_list_escapes_control_characters_in_keys(s3, dest, capsys):
    # controls S3 listings can carry in XML: C1's CSI and a right-to-left override
    key = f"{dest.dir}day=\x9b2J\u202eevil/part-00000.parquet"
    upload = s3.create_multipart_upload(Bucket=BUCKET, Key=key)["UploadId"]
    try:
        assert cli(["uploads", "list", dest.url]) == 0
        printed = capsys.readouterr()
        text = printed.out + printed.err
        assert not any(c in text for c in RAW_CONTROLS), repr(text)
        assert "day=\\u009b2J\\u202eevil/part-00000" in text
    finally:
        s3.abort_multipart_upload(Bucket=BUCKET, Key=key, UploadId=upload)
    assert pending_uploads(s3, dest.dir) == []


# -- a Spark task failure's cause ---------------------------------------------------------------
#: what PySpark shows for a failed Python worker: the source line names an error too
WORKER_FAILURE = """
  An exception was thrown from the Python worker. Please see the stack trace below.
Traceback (most recent call last):
  File "/spark/python/pyspark/worker.py", line 1247, in main
    process()
  File "/work/job.py", line 12, in check
    raise ValueError(f"bad row {x}")
    ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
ValueError: bad row 7
"""


def test_the_cause_of_a_worker_failure_is_its_exception_line():
    assert first_line(RuntimeError(WORKER_FAILURE)) == "ValueError: bad row 7"
    chained = "Traceback (most recent call last):\n  x\nKeyError: 'a'\n\nDuring handling" + (
        WORKER_FAILURE
    )
    assert first_line(RuntimeError(chained)) == "ValueError: bad row 7"  # the last one raised
    java = "An error occurred.\n: org.apache.spark.SparkException: Job aborted\n\tat x"
    assert first_line(RuntimeError(java)) == ": org.apache.spark.SparkException: Job aborted"


def test_a_spark_task_failure_names_the_exception_as_its_cause(spark, s3, dest):
    from pyspark.sql import functions as F

    def check_row(x):  # defined here: pickled by value, the workers cannot import this module
        if x == 7:
            raise ValueError(f"bad row {x}")
        return x

    df = spark.range(0, 20, numPartitions=2).withColumn("id", F.udf(check_row, "long")("id"))
    with pytest.raises(TaskFailedError) as failed:
        write_committed(df, dest.url, progress=False)
    message = str(failed.value)
    assert "Cause: ValueError: bad row 7." in message, message
    assert "raise ValueError" not in message
    assert failed.value.visible == "nothing" and list_keys(s3, dest.dir) == []
