"""Credentials that last as long as the job (issue 25, item 5).

Neither server enforces the expiry of temporary credentials (moto checks none; the keys of Ceph
RGW's users never expire), so the fault proxy emulates what AWS enforces: once a key has
expired, every request signed with it gets ``400 ExpiredToken`` (``expire_keys``). A
credentials provider whose credentials expire is called again before they do; fixed keys that
expire fail the job with an error naming the stage, what is visible and the command that
finishes (or cleans up) the job with fresh credentials; credentials from the chain are resolved
by every store where it runs.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import textwrap
import threading
import uuid
from datetime import datetime, timedelta, timezone

import boto3
import pandas as pd
import pytest
from conftest import BUCKET, list_keys, pending_uploads, visible_keys

from s3commit_sdk import write_committed
from s3commit_sdk.cli import main
from s3commit_sdk.errors import ExpiredCredentialsError
from s3commit_sdk.options import resolve_options
from s3commit_sdk.store import S3Settings, open_store
from s3commit_sdk.testing.faultproxy import expire_keys

FIXED_ACCESS = "AKIAEXPIRING00000001"
FIXED_SECRET = "secret-EXPIRING-fixed-key-00000000001"
FIXED_TOKEN = "token-EXPIRING-fixed-session-0000001"
_SIGNED_BY = re.compile(r"Credential=([^/]+)/")


@pytest.fixture(scope="module")
def key_pool(s3_server):
    """Key pairs the server knows, made on demand: moto takes any; RGW registers each."""

    def make(n: int) -> list[tuple[str, str, str | None]]:
        made = []
        for _ in range(n):
            tag = uuid.uuid4().hex[:12].upper()
            access, secret = f"AKIAPOOL{tag}", f"secret-pool-{tag}-{uuid.uuid4().hex}"
            s3_server.add_key(access, secret)
            token = f"token-pool-{tag}-{uuid.uuid4().hex}" if s3_server.kind == "moto" else None
            made.append((access, secret, token))
        return made

    return make


class ExpiringKeys:
    """A credentials provider whose credentials last 15 minutes (AssumeRole's shortest): inside
    botocore's refresh window from the start, so every request asks for fresh ones first. On
    moto they come from its STS ``AssumeRole``; on RGW (no STS here) from registered keys."""

    def __init__(self, s3_server, key_pool) -> None:
        self.kind, self.endpoint, self.key_pool = s3_server.kind, s3_server.endpoint, key_pool
        self.handed: list[tuple[str, str, str | None]] = []
        self._lock = threading.Lock()

    def __call__(self) -> dict:
        expiry = datetime.now(timezone.utc) + timedelta(seconds=900)
        if self.kind == "moto":  # straight to moto: the proxy sees only S3 requests
            sts = boto3.client("sts", endpoint_url=self.endpoint, region_name="us-east-1")
            got = sts.assume_role(
                RoleArn="arn:aws:iam::123456789012:role/s3commit-writer",
                RoleSessionName="s3commit-expiry",
                DurationSeconds=900,
            )["Credentials"]
            keys = (got["AccessKeyId"], got["SecretAccessKey"], got["SessionToken"])
            expiry = got["Expiration"]  # a datetime
        else:
            (keys,) = self.key_pool(1)
            expiry = expiry.isoformat()  # ISO 8601 text
        with self._lock:
            self.handed.append(keys)
        return {
            "access_key": keys[0],
            "secret_key": keys[1],
            "token": keys[2],
            "expiry_time": expiry,
        }


def frame(n: int = 40) -> pd.DataFrame:
    return pd.DataFrame({"id": range(n), "day": ["a", "b"] * (n // 2)})


def signing_keys(proxy) -> list[str]:
    return [
        m[1] for r in proxy.requests if (m := _SIGNED_BY.search(r.headers.get("authorization", "")))
    ]


def fixed_keys(s3_server) -> dict[str, str]:
    """Fixed temporary keys as options (RGW refuses a token no STS of its own issued)."""
    s3_server.add_key(FIXED_ACCESS, FIXED_SECRET)
    keys = {"access.key": FIXED_ACCESS, "secret.key": FIXED_SECRET}
    return keys | ({"session.token": FIXED_TOKEN} if s3_server.kind == "moto" else {})


def test_a_providers_credentials_are_refreshed_before_they_expire(
    s3_server, s3, proxy, dest, key_pool, caplog
):
    """The keys a store started with expire (the proxy refuses them, as AWS would once their
    15 minutes are up): the provider was called again before, so no request is refused."""
    caplog.set_level(logging.DEBUG)
    provider = ExpiringKeys(s3_server, key_pool)
    settings = S3Settings.resolve(resolve_options({"endpoint": proxy.endpoint}), provider=provider)
    store = open_store(settings)
    started_with = [keys[0] for keys in provider.handed]
    proxy.set_rules([expire_keys(access) for access in started_with])  # expired from now on
    proxy.record_headers("authorization")
    for n in range(3):
        store.put(BUCKET, f"{dest.dir}probe-{n}", b"x")
    # a refreshed secret is redacted wherever it is logged, not only in request headers
    refreshed_secret = provider.handed[-1][1]
    logging.getLogger("s3commit_sdk.test").debug("the refreshed secret: %s", refreshed_secret)
    result = write_committed(
        frame(),
        dest.url + "/job",
        options={"endpoint": proxy.endpoint, "tasks": 2},
        credentials_provider=provider,
        progress=False,
    )
    assert result.rows == 40
    assert proxy.events == []  # no request was signed with a key past its expiry
    used = signing_keys(proxy)
    assert used and not set(used) & set(started_with)
    assert len(set(used)) >= 3  # the probes' refreshed keys, then the job's
    secrets = [s for _, secret, token in provider.handed for s in (secret, token) if s]
    assert not [s for s in secrets if s in caplog.text]
    assert "the refreshed secret: ***" in caplog.text
    del store
    s3.delete_objects(
        Bucket=BUCKET, Delete={"Objects": [{"Key": k} for k in list_keys(s3, dest.dir)]}
    )


def test_fixed_keys_that_expire_during_the_tasks_fail_the_job_saying_so(s3_server, s3, proxy, dest):
    """Fixed keys cannot be refreshed: the error says so, and what to run with fresh ones."""
    options = {**fixed_keys(s3_server), "endpoint": proxy.endpoint, "tasks": 2}
    # the first upload is started, then the keys expire: the tasks fail, and so does the abort
    proxy.set_rules([expire_keys(FIXED_ACCESS, after=1, operation="CreateMultipartUpload")])
    with pytest.raises(ExpiredCredentialsError) as failed:
        write_committed(frame(), dest.url, options=options, progress=False)
    error = failed.value
    assert (error.stage, error.visible) == ("tasks", "nothing")
    assert "expired during its tasks" in str(error)
    assert visible_keys(s3, dest.dir) == []  # the listing: nothing of the job is visible
    left = [u["Key"] for u in pending_uploads(s3, dest.dir)]
    assert len(left) == 1 and error.job_id in left[0]
    assert error.remedy == f"s3commit uploads abort {dest.url} --job {error.job_id}"
    # with fresh credentials (this process's own) the remedy removes what the job left
    command = error.remedy.split()[1:]
    assert main([*command, "--force", "--endpoint", proxy.endpoint]) == 0
    assert pending_uploads(s3, dest.dir) == []
    s3.delete_objects(
        Bucket=BUCKET, Delete={"Objects": [{"Key": k} for k in list_keys(s3, dest.dir)]}
    )


def test_fixed_keys_that_expire_before_job_commit_are_finished_by_recover(
    s3_server, s3, proxy, dest
):
    """Once job commit has begun completing, its journal names every upload: ``s3commit
    recover`` with fresh credentials finishes the job the expired keys could not."""
    options = {**fixed_keys(s3_server), "endpoint": proxy.endpoint, "tasks": 2}
    # the tasks are done; the keys expire as job commit completes its first upload
    proxy.set_rules([expire_keys(FIXED_ACCESS, operation="CompleteMultipartUpload")])
    with pytest.raises(ExpiredCredentialsError) as failed:
        write_committed(frame(), dest.url, options=options, progress=False)
    error = failed.value
    assert error.stage == "job commit"
    assert error.remedy == f"s3commit recover {dest.url}"
    assert "expired during its job commit" in str(error)
    # unchecked (the expired keys could not list), and the listing shows nothing visible
    assert error.visible is None and "unchecked" in str(error)
    assert visible_keys(s3, dest.dir) == []
    assert len(pending_uploads(s3, dest.dir)) == 2  # one file per task, named in the journal
    # with fresh credentials (this process's own) recover finishes the job
    assert main(["recover", dest.url, "--endpoint", proxy.endpoint]) == 0
    assert pending_uploads(s3, dest.dir) == []
    files = [k for k in visible_keys(s3, dest.dir) if k.endswith(".parquet")]
    assert len(files) == 2
    assert dest.dir + "_SUCCESS" in list_keys(s3, dest.dir)
    s3.delete_objects(
        Bucket=BUCKET, Delete={"Objects": [{"Key": k} for k in list_keys(s3, dest.dir)]}
    )


CREDENTIAL_PROCESS = """
import datetime, json, sys
pool, calls = json.load(open(sys.argv[1])), sys.argv[2]
with open(calls, "a") as log:
    log.write("call\\n")
n = sum(1 for _ in open(calls))
access, secret, token = pool[n % len(pool)]
expiry = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=900)
answer = {"Version": 1, "AccessKeyId": access, "SecretAccessKey": secret}
answer |= {"SessionToken": token} if token else {}
print(json.dumps(answer | {"Expiration": expiry.isoformat()}))
"""


def test_credentials_from_the_chain_are_resolved_and_refreshed_where_each_store_runs(
    s3_server, s3, proxy, dest, key_pool, tmp_path, monkeypatch, caplog
):
    """A driver whose credentials come from its chain (here a profile's ``credential_process``,
    as an instance profile or container role would) ships none: every store, the tasks'
    included, resolves its own, and botocore refreshes them (15 minutes long: every request)."""
    caplog.set_level(logging.DEBUG)
    pool = key_pool(3)
    (tmp_path / "pool.json").write_text(json.dumps(pool))
    (tmp_path / "process.py").write_text(textwrap.dedent(CREDENTIAL_PROCESS))
    calls = tmp_path / "calls"
    config = tmp_path / "config"
    process = f"{sys.executable} {tmp_path / 'process.py'} {tmp_path / 'pool.json'} {calls}"
    config.write_text(f"[default]\ncredential_process = {process}\n")
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    options = {"endpoint": proxy.endpoint, "tasks": 2}
    shipped = S3Settings.resolve(resolve_options(options))
    assert (shipped.access_key, shipped.session_token, shipped.profile) == (None, None, None)
    proxy.record_headers("authorization")
    result = write_committed(frame(), dest.url, options=options, progress=False)
    assert result.rows == 40
    stores = 3  # the driver's and each task's, at least
    assert len(calls.read_text().splitlines()) > stores  # resolved per store, then refreshed
    assert len(set(signing_keys(proxy))) >= 2
    assert not [s for _, secret, token in pool for s in (secret, token) if s and s in caplog.text]
    s3.delete_objects(
        Bucket=BUCKET, Delete={"Objects": [{"Key": k} for k in list_keys(s3, dest.dir)]}
    )
