"""One door to storage: ``open_store``, and every operation callers need going through the
store's own retries, counters and typed errors: parts of an upload, ranged GETs, lifecycle
rules, deletes confirmed by looking, and listings that stop when the server's paging does not
advance. Against the real S3 servers, with the fault proxy where the server must misbehave."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable

import pytest
from conftest import BUCKET, list_keys

from s3commit_sdk.errors import StoreError, UnknownOptionError
from s3commit_sdk.options import resolve_options
from s3commit_sdk.paths import parse_s3_url
from s3commit_sdk.store import PartInfo, S3Settings, S3Store, open_store
from s3commit_sdk.store.rename import open_rename_store
from s3commit_sdk.store.s3 import CONFIRM_BY_HEAD_LIMIT
from s3commit_sdk.testing.faultproxy import (
    FaultProxy,
    ignore_deletes,
    slow_down,
    stuck_listing,
)


@pytest.fixture
def store(s3_server) -> S3Store:
    return open_store(None)


def via(proxy: FaultProxy) -> S3Store:
    """A store whose requests pass the fault proxy (credentials from the environment)."""
    return open_store(S3Settings(endpoint_url=proxy.endpoint))


def pool_size(store: S3Store) -> int:
    return store.client.meta.config.max_pool_connections


# -- open_store ---------------------------------------------------------------------------------


def test_open_store_takes_settings_resolved_options_or_raw_options(s3_server):
    raw = {"region": "eu-west-1", "retry.max-attempts": "3"}
    settings = S3Settings.resolve(resolve_options(raw))
    stores = [open_store(settings), open_store(resolve_options(raw)), open_store(raw)]
    assert [s.settings for s in stores] == [settings] * 3
    assert stores[0].settings.retry.max_attempts == 3
    assert open_store(None).settings == S3Settings.resolve(resolve_options(None))
    for each in stores:
        each.check_bucket(BUCKET)
    with pytest.raises(UnknownOptionError):
        open_store({"no.such.option": "1"})


def test_threads_size_the_connection_pool(s3_server):
    assert pool_size(open_store(None)) == 10
    assert pool_size(open_store(None, threads=32)) == 36  # the threads plus 4 spare
    assert pool_size(open_store(None, threads=1)) == 10  # never below botocore's default
    location = parse_s3_url(f"s3://{BUCKET}/t/rename")
    renaming = open_rename_store(location, S3Settings.resolve(resolve_options(None)), threads=20)
    assert pool_size(renaming.s3) == 24


# -- parts, ranges, lifecycle -------------------------------------------------------------------


def test_list_parts_of_an_upload_and_none_once_it_is_gone(store, dest):
    key = dest.dir + "parts.bin"
    upload_id = store.initiate(BUCKET, key)
    try:
        etags = [store.upload_part(BUCKET, key, upload_id, n, b"x" * n).etag for n in (1, 2, 3)]
        parts = store.list_parts(BUCKET, key, upload_id)
    finally:
        store.abort(BUCKET, key, upload_id)
    assert parts == [PartInfo(n, n, etag) for n, etag in zip((1, 2, 3), etags, strict=True)]
    assert store.list_parts(BUCKET, key, upload_id) is None
    assert store.counters.snapshot()["ListParts"] == 2


def test_get_range_reads_the_bytes_asked_for(store, s3, dest):
    key = dest.dir + "ranged.bin"
    body = bytes(range(256)) * 4
    store.put(BUCKET, key, body)
    try:
        assert store.get_range(BUCKET, key, 10, 20) == body[10:20]
        assert store.get_range(BUCKET, key, 1000, 1024) == body[1000:]
        assert store.counters.snapshot()["GetObject"] == 2
    finally:
        s3.delete_object(Bucket=BUCKET, Key=key)


def test_lifecycle_rules_are_retried_and_mapped_like_every_request(proxy):
    store = via(proxy)
    proxy.set_rules([slow_down("GetBucketLifecycleConfiguration", occurrences=[1])])
    assert isinstance(store.get_lifecycle_rules(BUCKET), list)
    assert store.counters.retries() == {"throttled": 1}
    assert store.counters.snapshot() == {"GetBucketLifecycleConfiguration": 2}
    with pytest.raises(StoreError, match="no-such-bucket-s3c") as info:
        store.get_lifecycle_rules("no-such-bucket-s3c")
    assert info.value.code == "NoSuchBucket"


# -- confirmed deletes --------------------------------------------------------------------------


@pytest.mark.parametrize("count", [3, CONFIRM_BY_HEAD_LIMIT + 5], ids=["by-head", "by-listing"])
def test_delete_confirmed_returns_the_keys_it_deleted(store, s3, dest, count):
    keys = [f"{dest.dir}d/{n:03d}" for n in range(count)]
    neighbour = f"{dest.dir}d/000x"  # between two of the keys: it must survive the delete
    for key in [*keys[:-1], neighbour]:  # the last key never existed
        s3.put_object(Bucket=BUCKET, Key=key, Body=b".")
    try:
        assert store.delete_confirmed(BUCKET, keys) == keys[:-1]
        assert list_keys(s3, dest.dir) == [neighbour]
        looked = {"HeadObject": 2 * count} if count <= CONFIRM_BY_HEAD_LIMIT else {}
        listed = {} if looked else {"ListObjectsV2": 2}
        assert store.counters.snapshot() == {**looked, **listed, "DeleteObjects": 1}
        assert store.delete_confirmed(BUCKET, keys) == []  # nothing left that it could delete
        assert store.delete_confirmed(BUCKET, []) == []
    finally:
        s3.delete_object(Bucket=BUCKET, Key=neighbour)


@pytest.mark.parametrize("count", [2, CONFIRM_BY_HEAD_LIMIT + 1], ids=["by-head", "by-listing"])
def test_delete_confirmed_names_the_keys_a_server_said_it_deleted_but_kept(proxy, s3, dest, count):
    keys = [f"{dest.dir}kept/{n:03d}" for n in range(count)]
    for key in keys:
        s3.put_object(Bucket=BUCKET, Key=key, Body=b".")
    store = via(proxy)
    proxy.set_rules([ignore_deletes()])
    try:
        with pytest.raises(StoreError, match=re.escape(keys[0])) as info:
            store.delete_confirmed(BUCKET, keys)
        assert info.value.code == "DeleteNotConfirmed"
        assert proxy.counts["DeleteObjects"] == 1
        assert list_keys(s3, dest.dir) == keys
    finally:
        proxy.reset()
        s3.delete_objects(Bucket=BUCKET, Delete={"Objects": [{"Key": k} for k in keys]})


# -- listings that do not advance ---------------------------------------------------------------


def finishing(action: Callable[[], object], seconds: float = 60.0) -> BaseException | None:
    """What ``action`` raised (None if it returned); fails the test if it still runs after
    ``seconds``: a listing that never ends."""
    raised: list[BaseException] = []

    def run() -> None:
        try:
            action()
        except BaseException as exc:  # handed to the test
            raised.append(exc)

    worker = threading.Thread(target=run, name="s3commit-stuck-listing", daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"still listing after {seconds} s: the listing loops"
    return raised[0] if raised else None


@pytest.mark.parametrize(
    ("operation", "marker"),
    [
        ("ListObjectsV2", "s3commit-stuck"),
        ("ListObjectsV2", ""),
        ("ListMultipartUploads", "s3commit-stuck"),
        ("ListMultipartUploads", ""),
        ("ListParts", "7"),
        ("ListParts", ""),
    ],
    ids=lambda v: v or "no-marker",
)
def test_a_truncated_listing_that_does_not_advance_raises(proxy, dest, operation, marker):
    store = via(proxy)
    key = dest.dir + "listed.bin"
    upload_id = store.initiate(BUCKET, key)  # something to list, on every listing
    listings = {
        "ListObjectsV2": lambda: list(store.list_objects(BUCKET, dest.dir)),
        "ListMultipartUploads": lambda: store.list_pending(BUCKET, dest.dir),
        "ListParts": lambda: store.list_parts(BUCKET, key, upload_id),
    }
    proxy.set_rules([stuck_listing(operation, marker=marker)])
    try:
        error = finishing(listings[operation])
    finally:
        proxy.reset()
        store.abort(BUCKET, key, upload_id)
    assert isinstance(error, StoreError) and error.code == "ListingStuck", error
    assert BUCKET in str(error) and dest.dir in str(error)
    # the same marker comes back on the second page; no marker at all stops at the first
    assert store.counters.snapshot()[operation] == (2 if marker else 1)
