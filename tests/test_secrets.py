"""Credentials never appear in what we write, log or print; staging directories are private."""

from __future__ import annotations

import logging
import os
import stat
import threading
import time

import pandas as pd
import pytest
from conftest import BUCKET, differs_on, list_keys

from s3commit_sdk import InvalidArgumentError, write_committed
from s3commit_sdk.cli import main as cli
from s3commit_sdk.committers import make_committer
from s3commit_sdk.options import resolve_options
from s3commit_sdk.protocol import JobContext, TaskAttemptContext
from s3commit_sdk.redaction import RedactingFilter
from s3commit_sdk.store import S3Settings, S3Store
from s3commit_sdk.testing.faultproxy import delay

pytestmark = pytest.mark.fault

ACCESS = "AKIARECOGNISABLE0001"
SECRET = "s3cr3t-RECOGNISABLE-zz9-do-not-leak"
TOKEN = "token-RECOGNISABLE-session-77"
CREDENTIALS = {"access.key": ACCESS, "secret.key": SECRET, "session.token": TOKEN}


def assert_clean(text: str | bytes, where: str) -> None:
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    for secret in (SECRET, TOKEN):
        assert secret not in text, f"a credential leaked into {where}"


def bodies(s3, prefix: str) -> dict[str, bytes]:
    return {k: s3.get_object(Bucket=BUCKET, Key=k)["Body"].read() for k in list_keys(s3, prefix)}


@pytest.mark.parametrize("committer", ["partitioned", "magic"])
def test_no_credentials_in_outputs_metadata_logs_or_cli(
    committer, proxy, s3, s3_server, dest, caplog, capsys
):
    caplog.set_level(logging.DEBUG, logger="s3commit_sdk")
    s3_server.add_key(ACCESS, SECRET)  # RGW checks signatures; moto accepts any key pair
    credentials = dict(CREDENTIALS)
    if differs_on(s3_server, "rgw", "an invented session token is refused (no STS behind it)"):
        del credentials["session.token"]
    data = pd.DataFrame({"id": range(20), "day": ["a", "b"] * 10})
    options = {**credentials, "endpoint": proxy.endpoint, "magic.cleanup": False, "tasks": 2}
    # hold the first completion so the journal and marker can be read mid-commit
    proxy.set_rules([delay(1500, "CompleteMultipartUpload", occurrences=[1])])
    mid_commit: dict[str, bytes] = {}

    def watch() -> None:
        deadline = time.monotonic() + 30
        while proxy.counts.get("CompleteMultipartUpload", 0) < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        mid_commit.update(bodies(s3, dest.dir + "__s3commit/"))

    watcher = threading.Thread(target=watch)
    watcher.start()
    result = write_committed(
        data, dest.url, committer=committer, partition_by=["day"], options=options
    )
    watcher.join()
    assert any(k.endswith("journal.json") for k in mid_commit)
    assert any(k.endswith("COMMIT_IN_PROGRESS") for k in mid_commit)
    for key, body in {**mid_commit, **bodies(s3, dest.dir)}.items():
        assert_clean(body, key)  # data, _SUCCESS, pendingsets, journal, marker
    assert_clean(repr(result) + repr(result.success) + repr(result.files), "the result")
    resolved = resolve_options(options)
    assert_clean(repr(resolved) + repr(S3Settings.resolve(resolved)), "option reprs")
    assert_clean(caplog.text, "logs")
    for argv in (
        ["success", dest.url],
        ["success", dest.url, "--json"],
        ["uploads", "list", dest.url],
        ["recover", dest.url],
    ):
        assert cli(argv) == 0
        out = capsys.readouterr()
        assert_clean(out.out + out.err, f"`s3commit {' '.join(argv[:2])}`")
    keep = [k for k in list_keys(s3, dest.dir) if "/__magic/" in k]
    if keep:
        s3.delete_objects(Bucket=BUCKET, Delete={"Objects": [{"Key": k} for k in keep]})


def test_staging_directories_are_private(dest, tmp_path):
    job = JobContext.on_s3(dest.url, "directory", {"buffer.dir": str(tmp_path / "buffer")})
    committer = make_committer(job)
    task = TaskAttemptContext(job, partition=0, attempt=0)
    committer.setup_task(task)
    try:
        attempt = committer.attempt_dir(task)
        for path in (attempt, os.path.dirname(attempt)):
            assert stat.S_IMODE(os.stat(path).st_mode) == 0o700, path
    finally:
        committer.abort_task(task)
    assert not os.path.exists(committer.attempt_dir(task))


def test_explicit_keys_never_take_the_session_token_of_the_environment(monkeypatch, s3, dest):
    """Explicit keys with AWS_SESSION_TOKEN of other keys made every request fail (400)."""
    monkeypatch.setenv("AWS_SESSION_TOKEN", TOKEN)
    explicit = {
        "access.key": os.environ["AWS_ACCESS_KEY_ID"],
        "secret.key": os.environ["AWS_SECRET_ACCESS_KEY"],
    }
    store = S3Store(S3Settings.resolve(resolve_options(explicit)))
    sent: list[set[str]] = []
    store.client.meta.events.register(
        "before-send.s3.*", lambda request, **_: sent.append({h.lower() for h in request.headers})
    )
    store.put(BUCKET, dest.dir + "probe", b"x")
    assert sent and not any("x-amz-security-token" in headers for headers in sent)
    result = write_committed(pd.DataFrame({"id": range(5)}), dest.url + "/job", options=explicit)
    assert result.files
    # without explicit keys, the environment's token still goes with the environment's keys
    assert S3Settings.resolve(resolve_options({})).session_token == TOKEN
    with pytest.raises(InvalidArgumentError, match="go together"):
        write_committed(pd.DataFrame({"id": [1]}), dest.url, options={"access.key": ACCESS})
    s3.delete_objects(
        Bucket=BUCKET, Delete={"Objects": [{"Key": k} for k in list_keys(s3, dest.dir)]}
    )


def test_credentials_in_a_destination_or_endpoint_are_refused_unrepeated(s3, s3_server, dest):
    frame = pd.DataFrame({"id": range(3)})
    port = s3_server.endpoint.rsplit(":", 1)[1]
    for url, options in (
        (f"s3://{ACCESS}:{SECRET}@{BUCKET}/{dest.prefix}", {}),
        (f"s3a://{ACCESS}:{SECRET}/x@{BUCKET}/{dest.prefix}", {}),
        (dest.url, {"endpoint": f"http://{ACCESS}:{SECRET}@127.0.0.1:{port}"}),
    ):
        with pytest.raises(InvalidArgumentError, match="credentials") as refused:
            write_committed(frame, url, options=options)
        assert_clean(str(refused.value), "the error")
        assert ACCESS not in str(refused.value)
    assert list_keys(s3, dest.dir) == []


def test_debug_logs_of_a_job_redact_tokens_authorization_and_secrets(caplog, s3_server, s3, dest):
    """botocore logs signed requests at DEBUG; while a job runs, the filter rewrites them."""
    caplog.set_level(logging.DEBUG)  # the root: botocore's and urllib3's records too
    with_token = differs_on(
        s3_server, "moto", "accepts any session token, so requests can carry a made-up one"
    )
    options = {"tasks": 2, **(CREDENTIALS if with_token else {})}
    data = pd.DataFrame({"id": range(20), "day": ["a", "b"] * 10})
    result = write_committed(
        data, dest.url, committer="magic", partition_by=["day"], options=options
    )
    assert result.files
    text = caplog.text
    assert "'Authorization': b'***'" in text  # the header was logged, then redacted
    assert "Credential=" not in text
    if with_token:
        assert "'X-Amz-Security-Token': b'***'" in text
        assert "x-amz-security-token:***" in text  # botocore's canonical request
    assert_clean(text, "DEBUG logs")
    installed = [
        f
        for target in (logging.getLogger("botocore"), *logging.getLogger().handlers)
        for f in target.filters
        if isinstance(f, RedactingFilter)
    ]
    assert installed == []  # only for the duration of the job
    s3.delete_objects(
        Bucket=BUCKET, Delete={"Objects": [{"Key": k} for k in list_keys(s3, dest.dir)]}
    )
