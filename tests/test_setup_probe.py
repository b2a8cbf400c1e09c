"""The setup probe of exclusive commit: one delete, and credentials that may not delete named.

Job setup checks once per endpoint and bucket that the store honours ``If-None-Match: *`` by
creating a probe object twice under the destination's hidden directory, then deletes it. With
credentials lacking ``s3:DeleteObject`` every job fails (they need it for their hidden files,
marker and replace mode); before the fix they failed with a bare batch-delete error and left
the probe object behind, saying nothing of either. The missing permission is emulated by the
fault proxy: its ``access_denied`` rule answers ``DeleteObjects`` as S3 answers credentials
without ``s3:DeleteObject`` (an ``AccessDenied`` error for every key).
"""

from __future__ import annotations

import pandas as pd
import pytest
from conftest import BUCKET, list_keys, pending_uploads, read_back

from s3commit_sdk import write_committed
from s3commit_sdk.committers import exclusive
from s3commit_sdk.committers.exclusive import honours_conditional_create
from s3commit_sdk.errors import UNCHANGED_VISIBLE, MissingPermissionError, StoreError
from s3commit_sdk.paths import parse_s3_url
from s3commit_sdk.store import S3Settings
from s3commit_sdk.testing.faultproxy import access_denied


@pytest.fixture
def unprobed(monkeypatch):
    """This process has probed no endpoint yet, so the next job setup probes (it probes once
    per endpoint and bucket, and earlier tests went through the same proxy)."""
    monkeypatch.setattr(exclusive, "_honoured", set())


def frame() -> pd.DataFrame:
    return pd.DataFrame({"id": [1, 2, 3], "day": ["a", "b", "a"]})


def test_the_probe_makes_two_puts_and_one_delete(proxy, s3, dest, unprobed):
    assert honours_conditional_create(S3Settings(proxy.endpoint), parse_s3_url(dest.url))
    assert proxy.counts == {"DeleteObjects": 1, "PutObject": 2}
    assert list_keys(s3, dest.dir) == []


def test_credentials_without_delete_permission_are_named(proxy, s3, s3_server, dest, unprobed):
    proxy.set_rules([access_denied("DeleteObjects")])
    options = {"endpoint": proxy.endpoint, "tasks": 1}
    with pytest.raises(MissingPermissionError) as info:
        write_committed(
            frame(), dest.url, committer="partitioned", partition_by="day", options=options
        )
    error = info.value
    assert isinstance(error, StoreError) and error.code == "AccessDenied"
    assert error.permission == "s3:DeleteObject" and "s3:DeleteObject" in str(error)
    # exactly what is left, by listing: the probe object and nothing else of the job
    left = list_keys(s3, dest.dir)
    assert left == [error.key] and "conditional-put-probe" in error.key
    assert f"s3://{BUCKET}/{error.key}" in str(error)
    assert error.visible == f"{UNCHANGED_VISIBLE}, probe object left: {error.key}"
    assert error.remedy == f"aws s3 rm s3://{BUCKET}/{error.key}"
    assert pending_uploads(s3, dest.dir) == []
    # the remedy, once the permission is granted; then jobs run (and probe again)
    proxy.reset()
    s3.delete_object(Bucket=BUCKET, Key=error.key)
    write_committed(frame(), dest.url, committer="partitioned", partition_by="day", options=options)
    assert len(read_back(s3_server, dest.prefix)) == 3
    assert [k for k in list_keys(s3, dest.dir) if "/__" in k] == []


def test_refused_delete_of_a_probe_that_was_never_created_leaves_nothing(proxy, s3, dest, unprobed):
    """Credentials refused the create (no ``s3:PutObject``): no permission is guessed, and
    no delete is sent for an object that was never made."""
    proxy.set_rules([access_denied("PutObject"), access_denied("DeleteObjects")])
    with pytest.raises(StoreError) as info:
        honours_conditional_create(S3Settings(proxy.endpoint), parse_s3_url(dest.url))
    assert not isinstance(info.value, MissingPermissionError)
    assert proxy.counts == {"PutObject": 1}
    assert list_keys(s3, dest.dir) == []


def test_the_access_denied_rule_answers_as_s3_does(proxy, s3, dest):
    """What the emulation answers: DeleteObjects an AccessDenied error per key (HTTP 200),
    DeleteObject a 403; nothing is deleted."""
    import boto3
    from botocore.exceptions import ClientError

    key = dest.dir + "kept"
    s3.put_object(Bucket=BUCKET, Key=key, Body=b"x")
    proxy.set_rules([access_denied("DeleteObjects"), access_denied("DeleteObject")])
    client = boto3.client("s3", endpoint_url=proxy.endpoint)  # the environment's credentials
    reply = client.delete_objects(Bucket=BUCKET, Delete={"Objects": [{"Key": key}]})
    assert [(e["Key"], e["Code"]) for e in reply["Errors"]] == [(key, "AccessDenied")]
    with pytest.raises(ClientError) as info:
        client.delete_object(Bucket=BUCKET, Key=key)
    assert info.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    assert list_keys(s3, dest.dir) == [key]
    s3.delete_object(Bucket=BUCKET, Key=key)
