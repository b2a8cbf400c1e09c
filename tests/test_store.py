"""The S3 store layer against a real moto server process (no in-process mocks)."""

from __future__ import annotations

import hashlib
import os
from concurrent.futures import ThreadPoolExecutor

import botocore.config
import pytest
from conftest import BUCKET, differs_on, list_keys, pending_uploads

from s3commit_sdk.errors import StoreError
from s3commit_sdk.options import MIN_PART_SIZE, resolve_options
from s3commit_sdk.store import S3Settings, open_store
from s3commit_sdk.store.s3 import multipart_etag
from s3commit_sdk.testing.sandbox import S3Sandbox


@pytest.fixture
def store(s3_server):
    """A fresh store (fresh counters) built the way the SDK builds it: from options + env."""
    return open_store(None)


def _abort_all(s3, prefix: str) -> None:
    for item in pending_uploads(s3, prefix):
        s3.abort_multipart_upload(Bucket=BUCKET, Key=item["Key"], UploadId=item["UploadId"])


# -- settings -------------------------------------------------------------------------------


def test_settings_resolve_from_environment_and_options(s3_server):
    settings = S3Settings.resolve(resolve_options(None))
    assert settings.endpoint_url == s3_server.endpoint
    assert settings.region == "us-east-1"
    assert settings.access_key == "sandbox"
    explicit = S3Settings.resolve(
        resolve_options({"endpoint": "http://127.0.0.1:1", "region": "eu-west-1"}),
        environ={"AWS_ENDPOINT_URL": "http://ignored", "AWS_REGION": "us-east-1"},
    )
    assert explicit.endpoint_url == "http://127.0.0.1:1"
    assert explicit.region == "eu-west-1"
    s3_specific = S3Settings.resolve(
        resolve_options(None),
        environ={"AWS_ENDPOINT_URL": "http://generic", "AWS_ENDPOINT_URL_S3": "http://s3only"},
    )
    assert s3_specific.endpoint_url == "http://s3only"
    # Credentials never show up in repr (they end up in logs and notebooks).
    assert "sandbox" not in repr(settings)


# -- multipart uploads -------------------------------------------------------------------------


def test_multipart_round_trip_two_parts(store, s3, s3_server, dest):
    key = dest.dir + "data/part-00000.bin"
    first = os.urandom(MIN_PART_SIZE)
    last = os.urandom(123_457)
    upload_id = store.initiate(BUCKET, key)
    try:
        etags = [
            store.upload_part(BUCKET, key, upload_id, 1, first).etag,
            store.upload_part(BUCKET, key, upload_id, 2, last).etag,
        ]
        # Not visible before completion.
        assert store.head(BUCKET, key) is None
        assert [u["Key"] for u in pending_uploads(s3, dest.dir)] == [key]
        etag = store.complete(BUCKET, key, upload_id, etags)
    except BaseException:
        store.abort(BUCKET, key, upload_id)
        raise
    assert etags[0].strip('"') == hashlib.md5(first).hexdigest()
    assert etags[1].strip('"') == hashlib.md5(last).hexdigest()
    if differs_on(s3_server, "rgw", "CompleteMultipartUpload answers an empty <ETag/>"):
        assert etag == ""
        etag = store.head(BUCKET, key).etag
    assert etag.endswith('-2"')
    assert multipart_etag(etags) == etag
    body = s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()
    assert body == first + last
    assert store.get(BUCKET, key) == first + last
    info = store.head(BUCKET, key)
    assert info.size == len(first) + len(last)
    assert info.etag == etag
    assert pending_uploads(s3, dest.dir) == []
    s3.delete_object(Bucket=BUCKET, Key=key)


def test_multipart_etag_is_none_for_non_md5_etags():
    assert multipart_etag(['"abc"']) is None
    assert multipart_etag(['"' + "z" * 32 + '"']) is None
    md5 = hashlib.md5(b"x").hexdigest()
    expected = hashlib.md5(bytes.fromhex(md5)).hexdigest()
    assert multipart_etag([f'"{md5}"']) == f'"{expected}-1"'


def test_complete_with_a_too_small_first_part_raises_store_error(store, s3, dest):
    key = dest.dir + "small-parts.bin"
    upload_id = store.initiate(BUCKET, key)
    try:
        etags = [
            store.upload_part(BUCKET, key, upload_id, 1, b"a" * 1024).etag,
            store.upload_part(BUCKET, key, upload_id, 2, b"b" * 1024).etag,
        ]
        with pytest.raises(StoreError, match="EntityTooSmall") as info:
            store.complete(BUCKET, key, upload_id, etags)
        assert BUCKET in str(info.value)
    finally:
        assert store.abort(BUCKET, key, upload_id) is True
    assert store.head(BUCKET, key) is None


def test_abort_removes_pending_upload(store, s3, dest):
    key = dest.dir + "aborted.bin"
    upload_id = store.initiate(BUCKET, key)
    store.upload_part(BUCKET, key, upload_id, 1, b"data")
    assert [(u.key, u.upload_id) for u in store.list_pending(BUCKET, dest.dir)] == [
        (key, upload_id)
    ]
    assert store.abort(BUCKET, key, upload_id) is True
    assert pending_uploads(s3, dest.dir) == []
    assert store.list_pending(BUCKET, dest.dir) == []
    assert store.head(BUCKET, key) is None
    # Aborting again, or an upload that never existed, reports False instead of raising.
    assert store.abort(BUCKET, key, upload_id) is False
    assert store.abort(BUCKET, dest.dir + "never.bin", "no-such-upload-id") is False


def test_list_pending_with_trailing_slash_excludes_sibling_prefix(store, s3, dest):
    ds1 = dest.dir + "ds1/"
    ds10 = dest.dir + "ds10/"
    mine = [(ds1 + "a.bin", store.initiate(BUCKET, ds1 + "a.bin"))]
    mine.append((ds1 + "x=1/b.bin", store.initiate(BUCKET, ds1 + "x=1/b.bin")))
    sibling = (ds10 + "c.bin", store.initiate(BUCKET, ds10 + "c.bin"))
    try:
        listed = {(u.key, u.upload_id) for u in store.list_pending(BUCKET, ds1)}
        assert listed == set(mine)
        # Without the slash S3 itself would match the sibling: that is the bug being avoided.
        raw = {u["Key"] for u in pending_uploads(s3, dest.dir + "ds1")}
        assert sibling[0] in raw
        assert {u.key for u in store.list_pending(BUCKET, ds10)} == {sibling[0]}
        everything = {(u.key, u.upload_id) for u in store.list_pending(BUCKET, dest.dir)}
        assert everything == {*mine, sibling}
        with pytest.raises(ValueError, match="/"):
            store.list_pending(BUCKET, dest.dir + "ds1")
    finally:
        for key, upload_id in [*mine, sibling]:
            store.abort(BUCKET, key, upload_id)
    assert store.list_pending(BUCKET, dest.dir) == []


def test_request_counters_count_by_operation(store, s3, dest):
    key = dest.dir + "counted.bin"
    assert store.counters.snapshot() == {}
    upload_id = store.initiate(BUCKET, key)
    try:
        etag = store.upload_part(BUCKET, key, upload_id, 1, b"x" * 100).etag
        store.complete(BUCKET, key, upload_id, [etag])
    except BaseException:
        store.abort(BUCKET, key, upload_id)
        raise
    store.head(BUCKET, key)
    store.head(BUCKET, dest.dir + "missing")
    assert list(store.list_objects(BUCKET, dest.dir)) != []
    store.delete_keys(BUCKET, [key])
    assert store.counters.snapshot() == {
        "CompleteMultipartUpload": 1,
        "CreateMultipartUpload": 1,
        "DeleteObjects": 1,
        "HeadObject": 2,
        "ListObjectsV2": 1,
        "UploadPart": 1,
    }
    # The plain client's requests are not counted by the store.
    s3.list_objects_v2(Bucket=BUCKET, Prefix=dest.dir)
    assert store.counters.snapshot()["ListObjectsV2"] == 1


def test_stores_built_alike_share_a_client_and_each_counts_its_own_requests(s3_server, dest):
    """A client costs ~20 ms of CPU to build and every write opens several stores: stores of
    the same settings share one, and from many threads at once each still counts only the
    requests it sent itself."""
    stores = [open_store(None) for _ in range(4)]
    assert len({id(store.client) for store in stores}) == 1
    assert open_store(None, threads=40).client is not stores[0].client  # a larger pool

    def heads(pair: tuple[int, object]) -> None:
        n, store = pair
        for _ in range(n):
            store.head(BUCKET, dest.dir + "missing")

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(heads, enumerate(stores, 1)))
    assert [s.counters.snapshot() for s in stores] == [{"HeadObject": n} for n in (1, 2, 3, 4)]


def test_a_changed_environment_builds_a_new_client(s3_server, monkeypatch, tmp_path):
    """Credentials and proxies that boto3 reads from the environment or the shared files when
    it builds a client: a change to them is never answered by a client built before it."""
    before = open_store(None).client
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "3")
    changed = open_store(None).client
    assert changed is not before
    config = tmp_path / "config"
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    unwritten = open_store(None).client
    config.write_text("[default]\n")
    assert open_store(None).client is not unwritten


# -- objects ----------------------------------------------------------------------------------


def test_head_of_missing_key_is_none(store, s3, dest):
    assert store.head(BUCKET, dest.dir + "missing.parquet") is None
    etag = store.put(BUCKET, dest.dir + "present", b"12345")
    info = store.head(BUCKET, dest.dir + "present")
    assert (info.key, info.size, info.etag) == (dest.dir + "present", 5, etag)
    s3.delete_object(Bucket=BUCKET, Key=dest.dir + "present")


def test_put_if_absent(store, s3, dest):
    key = dest.dir + "__s3commit/journal.json"
    assert store.put_if_absent(BUCKET, key, b"first") is True
    assert store.put_if_absent(BUCKET, key, b"second") is False
    assert store.get(BUCKET, key) == b"first"
    assert store.put_if_absent(BUCKET, dest.dir + "__s3commit/other.json", b"x") is True
    store.delete_keys(BUCKET, list_keys(s3, dest.dir))
    assert list_keys(s3, dest.dir) == []


def _put_many(s3_server, keys: list[str]) -> None:
    client = s3_server.client(config=botocore.config.Config(max_pool_connections=8))
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda k: client.put_object(Bucket=BUCKET, Key=k, Body=b"."), keys))


def test_list_objects_paginates_and_batch_delete_uses_two_requests(store, s3_server, s3, dest):
    keys = [f"{dest.dir}k/{n:05d}" for n in range(1_500)]
    _put_many(s3_server, keys)
    # A sibling prefix that must survive (and must not be listed).
    sibling = dest.prefix + "0/k/00000"
    s3.put_object(Bucket=BUCKET, Key=sibling, Body=b".")
    try:
        listed = list(store.list_objects(BUCKET, dest.dir))
        assert sorted(o.key for o in listed) == keys
        assert all(o.size == 1 for o in listed)
        assert store.counters.snapshot() == {"ListObjectsV2": 2}

        assert store.delete_keys(BUCKET, keys) == 1_500
        assert store.counters.snapshot() == {"ListObjectsV2": 2, "DeleteObjects": 2}
        assert list_keys(s3, dest.dir) == []
        assert list_keys(s3, sibling) == [sibling]
        assert list(store.list_objects(BUCKET, dest.dir)) == []
    finally:
        s3.delete_object(Bucket=BUCKET, Key=sibling)
        leftover = list_keys(s3, dest.dir)
        if leftover:
            store.delete_keys(BUCKET, leftover)


def test_delete_keys_of_nothing_sends_no_request(store):
    assert store.delete_keys(BUCKET, []) == 0
    assert store.counters.snapshot() == {}


# -- errors -----------------------------------------------------------------------------------


def test_check_bucket(store):
    store.check_bucket(BUCKET)  # exists: no error
    with pytest.raises(StoreError, match="no-such-bucket-s3c") as info:
        store.check_bucket("no-such-bucket-s3c")
    assert "does not exist" in str(info.value)


def test_operations_on_missing_bucket_raise_store_error(store):
    with pytest.raises(StoreError, match="no-such-bucket-s3c"):
        store.initiate("no-such-bucket-s3c", "a/b")
    with pytest.raises(StoreError, match="no-such-bucket-s3c"):
        list(store.list_objects("no-such-bucket-s3c", "a/"))
    with pytest.raises(StoreError, match="no-such-bucket-s3c"):
        store.list_pending("no-such-bucket-s3c", "a/")


def test_bad_credentials_raise_store_error_naming_bucket(s3_server):
    """A second moto server that enforces authentication: an unknown access key is refused."""
    with S3Sandbox(
        bucket=None, export=False, extra_env={"INITIAL_NO_AUTH_ACTION_COUNT": "0"}
    ) as secured:
        assert secured.endpoint != s3_server.endpoint
        store = open_store(
            S3Settings(
                endpoint_url=secured.endpoint,
                access_key="nobody",
                secret_key="x",
                region="us-east-1",
            )
        )
        with pytest.raises(StoreError) as info:
            store.check_bucket("locked-bucket")
        message = str(info.value)
        assert "locked-bucket" in message
        assert "access" in message.lower()
        assert "AWS_ACCESS_KEY_ID" in message
        with pytest.raises(StoreError, match="locked-bucket") as info:
            store.initiate("locked-bucket", "a/b")
        assert "AWS_ACCESS_KEY_ID" in str(info.value)
    # The second server is stopped and did not replace the session's endpoint.
    assert secured.process is None
    assert os.environ["AWS_ENDPOINT_URL"] == s3_server.endpoint


@pytest.mark.parametrize(("mode", "sent"), [("when_required", False), ("when_supported", True)])
def test_s3_compatible_options_reach_the_wire(s3_server, s3, dest, mode, sent):
    """``checksums`` decides whether boto3 adds CRC checksums; ``path.style.access`` puts the
    bucket in the path. Both are read off the request that is really sent."""
    from urllib.parse import urlsplit

    options = resolve_options({"checksums": mode, "path.style.access": "true"})
    store = open_store(options)
    requests = []
    store.client.meta.events.register(
        "before-send.s3.PutObject", lambda request, **_: requests.append(request)
    )
    key = dest.dir + "checksums.txt"
    store.put(BUCKET, key, b"hello")
    headers = {name.lower() for name in requests[0].headers}
    checksummed = {"x-amz-sdk-checksum-algorithm", "x-amz-trailer"} & headers or any(
        h.startswith("x-amz-checksum-") for h in headers
    )
    assert bool(checksummed) == sent
    assert urlsplit(requests[0].url).path == f"/{BUCKET}/{key}"
    assert s3.get_object(Bucket=BUCKET, Key=key)["Body"].read() == b"hello"
    s3.delete_object(Bucket=BUCKET, Key=key)


def test_checksums_auto_means_when_required_on_a_custom_endpoint(s3_server):
    custom = open_store(S3Settings(endpoint_url=s3_server.endpoint))
    assert custom.client.meta.config.request_checksum_calculation == "when_required"
    assert custom.client.meta.config.response_checksum_validation == "when_required"
