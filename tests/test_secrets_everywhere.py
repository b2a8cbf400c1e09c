"""Secrets stay out of DEBUG logs on every S3 call the SDK makes, whatever the credentials' source.

Every store's client holds its credentials for as long as it lives (``redaction.hold_secrets``), so
the calls made outside a job's driver steps are redacted too: the listing after a failed job,
``recover`` / ``abort``, the widgets' own calls and the CLI. Each test captures the DEBUG
records of botocore, urllib3 and the SDK (the root logger at DEBUG) while every path runs, then
searches them for the secret key, the session token and the provider's secrets.
"""

from __future__ import annotations

import logging

import pandas as pd
import pyarrow as pa
import pytest
from conftest import BUCKET, differs_on, list_keys, pending_uploads

from s3commit_sdk import recovery, write_committed
from s3commit_sdk.cli import main as cli
from s3commit_sdk.errors import TaskFailedError
from s3commit_sdk.testing.crash import crash_write
from s3commit_sdk.uploads import abort_rule_id
from s3commit_sdk.widgets import PendingUploads, SuccessReport

ACCESS = "AKIAEVERYWHERE000001"
SECRET = "secret-EVERYWHERE-key-do-not-leak-0001"
TOKEN = "token-EVERYWHERE-session-do-not-leak-0001"
PROVIDER_ACCESS = "AKIAPROVIDED00000001"
PROVIDER_SECRET = "secret-PROVIDED-key-do-not-leak-0002"
PROVIDER_TOKEN = "token-PROVIDED-session-do-not-leak-0002"
SECRETS = (SECRET, TOKEN, PROVIDER_SECRET, PROVIDER_TOKEN)


def with_tokens(s3_server) -> bool:
    """moto accepts any session token; RGW refuses one no STS of its own issued."""
    return not differs_on(
        s3_server, "rgw", "an invented session token is refused (no STS behind it): keys only"
    )


@pytest.fixture
def debug_logs(caplog):
    caplog.set_level(logging.DEBUG)  # the root: botocore's and urllib3's records too
    return caplog


def assert_redacted(text: str, s3_server, where: str) -> None:
    """No secret in ``text``, and the signed requests were logged (then redacted)."""
    for secret in SECRETS:
        assert secret not in text, f"a secret leaked into {where}"
    assert "'Authorization': b'***'" in text, f"no signed request was logged in {where}"
    if with_tokens(s3_server):
        assert "x-amz-security-token:***" in text  # botocore's canonical request


def frame(n: int = 20) -> pd.DataFrame:
    return pd.DataFrame({"id": range(n), "day": ["a", "b"] * (n // 2)})


def failing_input() -> pa.RecordBatchReader:
    schema = pa.schema([("id", pa.int64())])

    def batches():
        yield pa.record_batch({"id": [1, 2, 3]}, schema=schema)
        raise RuntimeError("the input broke")

    return pa.RecordBatchReader.from_batches(schema, batches())


def run_failed_job(url: str, **kwargs) -> None:
    """A job failing in its task: the runner lists what it left, after the job's driver steps."""
    events = []
    with pytest.raises(TaskFailedError, match="the input broke"):
        write_committed(failing_input(), url, progress=events.append, **kwargs)
    failure = events[-1].failure
    assert failure is not None and not failure.unchecked  # the listing was made
    assert failure.pending_uploads == 0


def crashed_commit(url: str, options: dict) -> None:
    """A driver killed before its first completion: a journal for recover / abort."""
    crash_write(frame(), url, operation="CompleteMultipartUpload", options=options)


def start_upload(s3, key: str) -> None:
    """A pending upload with one part, as a dead job leaves one."""
    upload = s3.create_multipart_upload(Bucket=BUCKET, Key=key)["UploadId"]
    s3.upload_part(Bucket=BUCKET, Key=key, UploadId=upload, PartNumber=1, Body=b"x" * 100)


def clean(s3, prefix: str) -> None:
    keys = list_keys(s3, prefix)
    if keys:
        s3.delete_objects(Bucket=BUCKET, Delete={"Objects": [{"Key": k} for k in keys]})


def test_options_keys_stay_out_of_every_api_and_widget_path(s3_server, s3, dest, debug_logs):
    s3_server.add_key(ACCESS, SECRET)  # RGW checks signatures; moto accepts any key pair
    options = {"access.key": ACCESS, "secret.key": SECRET}
    if with_tokens(s3_server):
        options["session.token"] = TOKEN
    done = write_committed(frame(), dest.url + "/done", partition_by=["day"], options=options)
    assert done.files
    run_failed_job(dest.url + "/failed", options=options)
    for name, resolve in (("recover", recovery.recover), ("abort", recovery.abort)):
        url = f"{dest.url}/{name}"
        crashed_commit(url, options)
        assert resolve(url, options).job_id  # it found the journal and acted on it
        assert pending_uploads(s3, f"{dest.dir}{name}/") == []
    start_upload(s3, dest.dir + "widget/part-00000-x.parquet")
    widget = PendingUploads(dest.url + "/widget", options)
    assert len(widget.refresh()) == 1
    widget.select(dest.dir + "widget/part-00000-x.parquet")
    assert [aborted for _, aborted in widget.abort_selected()] == [True]
    assert SuccessReport(dest.url + "/done", options).doc.rows == 20
    assert_redacted(debug_logs.text, s3_server, "the DEBUG logs")
    clean(s3, dest.dir)


def test_environment_keys_stay_out_of_every_cli_command(
    s3_server, s3, dest, debug_logs, capsys, monkeypatch
):
    s3_server.add_key(ACCESS, SECRET)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    if with_tokens(s3_server):
        monkeypatch.setenv("AWS_SESSION_TOKEN", TOKEN)
    write_committed(frame(), dest.url + "/done", partition_by=["day"])
    run_failed_job(dest.url + "/failed")
    for name in ("recover", "abort"):
        crashed_commit(f"{dest.url}/{name}", {})
    start_upload(s3, dest.dir + "cli/part-00000-x.parquet")
    try:
        for argv in (
            ["recover", dest.url + "/recover"],
            ["abort", dest.url + "/abort"],
            ["uploads", "list", dest.url],
            ["uploads", "expect", dest.url, "1"],
            ["uploads", "abort", dest.url + "/cli", "--force"],
            ["success", dest.url + "/done"],
            ["success", dest.url + "/done", "--json"],
            ["lifecycle", dest.url, "--abort-incomplete-days", "1"],
        ):
            assert cli(argv) == 0, argv
            printed = capsys.readouterr()
            for secret in SECRETS:
                assert secret not in printed.out + printed.err
    finally:
        rules = s3.get_bucket_lifecycle_configuration(Bucket=BUCKET).get("Rules", [])
        others = [r for r in rules if r.get("ID") != abort_rule_id(dest.dir)]
        if others:
            s3.put_bucket_lifecycle_configuration(
                Bucket=BUCKET, LifecycleConfiguration={"Rules": others}
            )
        else:
            s3.delete_bucket_lifecycle(Bucket=BUCKET)
    assert pending_uploads(s3, dest.dir) == []
    assert_redacted(debug_logs.text, s3_server, "the DEBUG logs")
    clean(s3, dest.dir)


def test_a_providers_secrets_stay_out_of_jobs_and_the_failure_listing(
    s3_server, s3, dest, debug_logs
):
    s3_server.add_key(PROVIDER_ACCESS, PROVIDER_SECRET)
    keys = {"access_key": PROVIDER_ACCESS, "secret_key": PROVIDER_SECRET}
    if with_tokens(s3_server):
        keys["token"] = PROVIDER_TOKEN

    def provider() -> dict:
        return keys

    done = write_committed(frame(), dest.url + "/done", credentials_provider=provider)
    assert done.rows == 20
    run_failed_job(dest.url + "/failed", credentials_provider=provider)
    assert_redacted(debug_logs.text, s3_server, "the DEBUG logs")
    clean(s3, dest.dir)


def test_a_spark_job_keeps_session_credentials_out_of_the_drivers_logs(
    spark, s3_server, s3, dest, debug_logs
):
    s3_server.add_key(ACCESS, SECRET)
    options = {"access.key": ACCESS, "secret.key": SECRET}
    if with_tokens(s3_server):
        options["session.token"] = TOKEN
    df = spark.range(0, 100, numPartitions=2)
    assert write_committed(df, dest.url, options=options, progress=False).rows == 100
    assert_redacted(debug_logs.text, s3_server, "the driver's DEBUG logs")
    clean(s3, dest.dir)
