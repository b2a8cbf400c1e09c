"""The fault-injecting proxy: real sockets between botocore and the moto server.

Each test chooses its faults; botocore's own retries (standard mode) must ride out transient
ones, and persistent ones must surface as ``StoreError``.
"""

from __future__ import annotations

import os
import time

import boto3
import botocore.config
import botocore.exceptions
import pandas as pd
import pytest
from conftest import BUCKET, differs_on, list_keys, pending_uploads, read_back, visible_keys

from s3commit_sdk import StoreError, write_committed
from s3commit_sdk.store import S3Settings, S3Store, open_store
from s3commit_sdk.store.file_range import FileRange
from s3commit_sdk.store.s3 import RetryPolicy
from s3commit_sdk.testing.faultproxy import (
    DELAY,
    INTERNAL_ERROR,
    RESET,
    SLOW_DOWN,
    FaultEvent,
    FaultProxy,
    bandwidth,
    delay,
    internal_error,
    reset,
    s3_operation,
    slow_down,
)
from s3commit_sdk.uploads import JOB_UUID

pytestmark = pytest.mark.fault

MIB = 1024 * 1024


def store_via(proxy: FaultProxy, max_attempts: int = 5, throttle_limit: int = 20) -> S3Store:
    """The SDK's store pointed at the proxy (credentials from the sandbox environment)."""
    return open_store(settings_for(proxy.endpoint, max_attempts, throttle_limit))


def settings_for(endpoint: str, max_attempts: int = 5, throttle_limit: int = 20) -> S3Settings:
    policy = RetryPolicy(max_attempts=max_attempts, throttle_limit=throttle_limit)
    return S3Settings(endpoint_url=endpoint, retry=policy)


def multipart(store: S3Store, key: str, parts: list[bytes]) -> tuple[str, list[str]]:
    upload_id = store.initiate(BUCKET, key)
    try:
        etags = [
            store.upload_part(BUCKET, key, upload_id, i + 1, body).etag
            for i, body in enumerate(parts)
        ]
    except BaseException:
        store.abort(BUCKET, key, upload_id)
        raise
    return upload_id, etags


@pytest.mark.parametrize(
    ("method", "target", "headers", "expected"),
    [
        ("POST", "/b/k/x.parquet?uploads", {}, "CreateMultipartUpload"),
        ("PUT", "/b/k?partNumber=2&uploadId=U", {}, "UploadPart"),
        ("PUT", "/b/k?partNumber=2&uploadId=U", {"x-amz-copy-source": "b/o"}, "UploadPartCopy"),
        ("POST", "/b/k?uploadId=U", {}, "CompleteMultipartUpload"),
        ("DELETE", "/b/k?uploadId=U", {}, "AbortMultipartUpload"),
        ("GET", "/b/k?uploadId=U", {}, "ListParts"),
        ("GET", "/b?uploads&prefix=out%2F", {}, "ListMultipartUploads"),
        ("GET", "/b/?list-type=2&prefix=a%2F", {}, "ListObjectsV2"),
        ("GET", "/b?prefix=a", {}, "ListObjects"),
        ("POST", "/b?delete", {}, "DeleteObjects"),
        ("PUT", "/b/k", {}, "PutObject"),
        ("PUT", "/b/k", {"x-amz-copy-source": "b/o"}, "CopyObject"),
        ("GET", "/b/k", {}, "GetObject"),
        ("HEAD", "/b/k", {}, "HeadObject"),
        ("DELETE", "/b/k", {}, "DeleteObject"),
        ("HEAD", "/b", {}, "HeadBucket"),
        ("GET", "/b?lifecycle", {}, "GetBucketLifecycleConfiguration"),
        ("PUT", "/b?lifecycle", {}, "PutBucketLifecycleConfiguration"),
        ("GET", "/b?cors", {}, "GetBucketCors"),
        ("GET", "/", {}, "ListBuckets"),
        ("POST", "/moto-api/reset", {}, "MotoApi"),
    ],
)
def test_operation_names(method, target, headers, expected):
    from urllib.parse import parse_qs, urlsplit

    split = urlsplit(target)
    query = parse_qs(split.query, keep_blank_values=True)
    assert s3_operation(method, split.path, query, headers) == expected


def test_pass_through_multipart_round_trip(proxy, dest, s3, s3_server):
    store = store_via(proxy)
    key = dest.dir + "big.bin"
    parts = [os.urandom(5 * MIB), os.urandom(1234)]
    upload_id, etags = multipart(store, key, parts)
    etag = store.complete(BUCKET, key, upload_id, etags)
    if differs_on(s3_server, "rgw", "CompleteMultipartUpload answers an empty <ETag/>"):
        assert etag == ""
        etag = store.head(BUCKET, key).etag
    assert etag.endswith('-2"')
    assert store.get(BUCKET, key) == b"".join(parts)
    assert store.head(BUCKET, key).size == 5 * MIB + 1234
    assert [o.key for o in store.list_objects(BUCKET, dest.dir)] == [key]
    assert store.list_pending(BUCKET, dest.dir) == []
    store.delete_keys(BUCKET, [key])
    assert visible_keys(s3, dest.dir) == []
    # the proxy names every request as botocore does, one for one, and injected nothing
    assert proxy.counts == store.counters.snapshot()
    assert proxy.counts["UploadPart"] == 2
    assert proxy.events == []


def test_slowdown_on_every_second_upload_part_is_retried(proxy, dest, s3):
    proxy.set_rules([slow_down("UploadPart", occurrences=range(2, 100, 2))])
    store = store_via(proxy)
    key = dest.dir + "retried.bin"
    parts = [os.urandom(5 * MIB), os.urandom(5 * MIB), os.urandom(77)]
    upload_id, etags = multipart(store, key, parts)
    store.complete(BUCKET, key, upload_id, etags)
    body = s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()  # the real endpoint
    assert body == b"".join(parts)
    # requests 2 and 4 were refused and retried: 3 parts took 5 requests
    assert proxy.counts["UploadPart"] == 5
    assert store.counters.snapshot()["UploadPart"] == 5
    assert proxy.events == [
        FaultEvent("UploadPart", 2, SLOW_DOWN),
        FaultEvent("UploadPart", 4, SLOW_DOWN),
    ]
    s3.delete_object(Bucket=BUCKET, Key=key)


def test_parts_sent_from_file_ranges_survive_refused_and_reset_requests(proxy, dest, s3, tmp_path):
    """A staged file's parts go out as ranges of the file (FileRange), never read whole: a
    retried request starts its range again, after a refusal and after a reset mid-body."""
    proxy.set_rules(
        [slow_down("UploadPart", occurrences=[1]), reset("UploadPart", occurrences=[3], after=True)]
    )
    store = store_via(proxy)
    key = dest.dir + "ranged.bin"
    path = tmp_path / "staged.bin"
    data = os.urandom(10 * MIB + 77)
    path.write_bytes(data)
    ranges = [(0, 5 * MIB), (5 * MIB, 5 * MIB), (10 * MIB, 77)]
    upload_id = store.initiate(BUCKET, key)
    try:
        parts = []
        for number, (offset, length) in enumerate(ranges, start=1):
            with FileRange(str(path), offset, length) as body:
                parts.append(store.upload_part(BUCKET, key, upload_id, number, body))
        assert [p.size for p in parts] == [5 * MIB, 5 * MIB, 77]
        store.complete(BUCKET, key, upload_id, [p.etag for p in parts])
    except BaseException:
        store.abort(BUCKET, key, upload_id)
        raise
    assert s3.get_object(Bucket=BUCKET, Key=key)["Body"].read() == data
    assert proxy.events == [
        FaultEvent("UploadPart", 1, SLOW_DOWN),
        FaultEvent("UploadPart", 3, RESET),
    ]
    assert proxy.counts["UploadPart"] == 5
    s3.delete_object(Bucket=BUCKET, Key=key)


def test_persistent_internal_error_on_complete_surfaces_as_store_error(proxy, dest, s3):
    proxy.set_rules([internal_error("CompleteMultipartUpload")])
    store = store_via(proxy, max_attempts=2)
    key = dest.dir + "never.bin"
    upload_id, etags = multipart(store, key, [b"data"])
    try:
        with pytest.raises(StoreError, match="InternalError"):
            store.complete(BUCKET, key, upload_id, etags)
        # botocore tried more than once, and the proxy refused every attempt
        attempts = store.counters.snapshot()["CompleteMultipartUpload"]
        assert attempts >= 2
        assert proxy.counts["CompleteMultipartUpload"] == attempts
        assert proxy.events == [
            FaultEvent("CompleteMultipartUpload", n, INTERNAL_ERROR) for n in range(1, attempts + 1)
        ]
        assert [u["Key"] for u in pending_uploads(s3, dest.dir)] == [key]
        assert visible_keys(s3, dest.dir) == []
    finally:
        assert store.abort(BUCKET, key, upload_id)


@pytest.mark.parametrize("after", [False, True], ids=["before-forwarding", "after-forwarding"])
def test_connection_reset_is_retried(proxy, dest, s3, after):
    proxy.set_rules([reset("PutObject", occurrences=[1], after=after)])
    store = store_via(proxy)
    key = dest.dir + "reset.txt"
    store.put(BUCKET, key, b"hello")
    assert proxy.counts["PutObject"] == 2
    assert proxy.events == [FaultEvent("PutObject", 1, RESET)]
    assert s3.get_object(Bucket=BUCKET, Key=key)["Body"].read() == b"hello"
    s3.delete_object(Bucket=BUCKET, Key=key)


def test_reset_is_a_connection_error_not_a_response(proxy, dest):
    proxy.set_rules([reset("HeadBucket")])
    with pytest.raises(StoreError) as info:
        store_via(proxy, max_attempts=1, throttle_limit=1).check_bucket(BUCKET)
    assert isinstance(info.value.__cause__, botocore.exceptions.ConnectionClosedError)


def test_delay_is_applied(proxy, dest):
    proxy.set_rules([delay(400, "HeadBucket")])
    store = store_via(proxy)
    started = time.monotonic()
    store.check_bucket(BUCKET)
    assert time.monotonic() - started >= 0.4
    assert store.head(BUCKET, dest.dir + "missing") is None  # not delayed, not logged
    assert proxy.events == [FaultEvent("HeadBucket", 1, DELAY)]


def test_a_delay_matches_by_key_and_only_after_a_given_request(proxy, dest, s3):
    """``key_contains`` narrows a rule to keys holding it; ``after_key`` arms it only after
    the n-th request of ``after_operation`` whose key holds it (the request after a PUT)."""
    proxy.set_rules(
        [
            delay(1, "GetObject", key_contains="b.txt"),
            delay(1, "GetObject", after_key="mark", after_count=2, after_operation="PutObject"),
        ]
    )
    store = store_via(proxy)
    for name in ("a.txt", "b.txt", "mark-1"):
        store.put(BUCKET, dest.dir + name, b"x")
    store.get(BUCKET, dest.dir + "a.txt")  # GET 1: neither rule (one mark PUT so far)
    store.get(BUCKET, dest.dir + "mark-1")  # GET 2: a GET of a mark does not count
    store.put(BUCKET, dest.dir + "mark-2", b"x")
    store.get(BUCKET, dest.dir + "a.txt")  # GET 3: after the second mark PUT
    store.get(BUCKET, dest.dir + "b.txt")  # GET 4: both rules
    assert proxy.events == [
        FaultEvent("GetObject", 3, DELAY),
        FaultEvent("GetObject", 4, DELAY),
        FaultEvent("GetObject", 4, DELAY),
    ]
    s3.delete_objects(
        Bucket=BUCKET,
        Delete={"Objects": [{"Key": dest.dir + n} for n in ("a.txt", "b.txt", "mark-1", "mark-2")]},
    )


def test_bandwidth_cap_on_request_and_response_bodies(proxy, dest, s3):
    key = dest.dir + "slow.bin"
    body = os.urandom(128 * 1024)
    proxy.set_rules([bandwidth(256 * 1024, "PutObject"), bandwidth(256 * 1024, "GetObject")])
    store = store_via(proxy)
    started = time.monotonic()
    store.put(BUCKET, key, body)
    assert time.monotonic() - started >= 0.45  # 128 KiB at 256 KiB/s
    started = time.monotonic()
    assert store.get(BUCKET, key) == body
    assert time.monotonic() - started >= 0.45
    s3.delete_object(Bucket=BUCKET, Key=key)


def test_server_side_copies_are_counted_in_bytes_and_paced(proxy, dest, s3):
    source, body = dest.dir + "source.bin", os.urandom(192 * 1024)
    s3.put_object(Bucket=BUCKET, Key=source, Body=body)
    proxy.set_rules([bandwidth(256 * 1024, "CopyObject")])
    store = store_via(proxy)
    started = time.monotonic()
    store.copy(BUCKET, source, dest.dir + "copy one.bin")
    assert time.monotonic() - started >= 0.7  # 192 KiB at 256 KiB/s
    upload = s3.create_multipart_upload(Bucket=BUCKET, Key=dest.dir + "ranged.bin")
    part = store.client.upload_part_copy(
        Bucket=BUCKET,
        Key=dest.dir + "ranged.bin",
        UploadId=upload["UploadId"],
        PartNumber=1,
        CopySource={"Bucket": BUCKET, "Key": source},
        CopySourceRange="bytes=0-999",
    )
    s3.complete_multipart_upload(
        Bucket=BUCKET,
        Key=dest.dir + "ranged.bin",
        UploadId=upload["UploadId"],
        MultipartUpload={"Parts": [{"ETag": part["CopyPartResult"]["ETag"], "PartNumber": 1}]},
    )
    assert proxy.copied_bytes == len(body) + 1000
    assert s3.get_object(Bucket=BUCKET, Key=dest.dir + "copy one.bin")["Body"].read() == body
    proxy.reset()
    assert proxy.copied_bytes == 0
    s3.delete_objects(
        Bucket=BUCKET,
        Delete={"Objects": [{"Key": k} for k in list_keys(s3, dest.dir)]},
    )


def _outcomes(proxy: FaultProxy, seed: int) -> tuple[list[bool], list[FaultEvent]]:
    proxy.reset()
    proxy.set_rules([slow_down("HeadBucket", probability=0.5)], seed=seed)
    client = boto3.client(
        "s3",
        endpoint_url=proxy.endpoint,
        config=botocore.config.Config(retries={"mode": "standard", "total_max_attempts": 1}),
    )  # no retries: every decision shows
    outcomes = []
    for _ in range(32):
        try:
            client.head_bucket(Bucket=BUCKET)
            outcomes.append(True)
        except botocore.exceptions.ClientError as exc:
            assert exc.response["ResponseMetadata"]["HTTPStatusCode"] == 503
            outcomes.append(False)
    return outcomes, proxy.events


def test_same_seed_gives_the_same_fault_sequence(proxy):
    first, first_events = _outcomes(proxy, seed=11)
    again, again_events = _outcomes(proxy, seed=11)
    other, _ = _outcomes(proxy, seed=12)
    assert first == again
    assert first_events == again_events
    assert [not ok for ok in first].count(True) == len(first_events)
    assert True in first and False in first  # p=0.5 really mixes outcomes
    assert other != first  # 32 coin flips: another seed differs


def test_stop_closes_the_listening_socket(s3_server):
    with FaultProxy(s3_server.endpoint) as proxy:
        endpoint = proxy.endpoint
        open_store(S3Settings(endpoint_url=endpoint)).check_bucket(BUCKET)
    with pytest.raises(StoreError):
        open_store(settings_for(endpoint, max_attempts=1)).check_bucket(BUCKET)


def frame() -> pd.DataFrame:
    n = 3000
    return pd.DataFrame(
        {
            "id": range(n),
            "name": [f"user-{i % 13}" for i in range(n)],
            "amount": [i * 0.25 for i in range(n)],
            "day": [f"2026-01-0{1 + i % 3}" for i in range(n)],
        }
    )


def test_write_committed_survives_twenty_percent_slowdowns(proxy, dest, s3, s3_server):
    df = frame()
    clean = f"{dest.prefix}/clean"
    faulty = f"{dest.prefix}/faulty"
    options = {"tasks": 2, "endpoint": proxy.endpoint}
    # through the proxy without faults first: the once-per-process conditional-PUT check of
    # this endpoint happens here, outside the counted job
    write_committed(df, f"s3://{BUCKET}/{clean}", partition_by=["day"], options=options)
    proxy.reset()

    proxy.set_rules([slow_down("*", probability=0.2)], seed=2026)
    result = write_committed(
        df,
        f"s3://{BUCKET}/{faulty}",
        partition_by=["day"],
        options=options,
    )
    faults = proxy.events
    assert faults, "no fault was injected: the test proves nothing"
    assert {e.action for e in faults} == {SLOW_DOWN}
    # every request the job made went through the proxy and is counted, retries included;
    # only the PUT that saves a task's statistics and the job-alive HEAD after it, and the
    # batch delete that releases the destination after _SUCCESS, are counted before they are
    # sent (those statistics cannot see their retries)
    seen, counted = proxy.counts, result.requests
    precounted = ("PutObject", "HeadObject", "DeleteObjects")
    assert {k: v for k, v in seen.items() if k not in precounted} == {
        k: v for k, v in counted.items() if k not in precounted
    }
    for op in precounted:
        assert counted[op] <= seen[op] <= counted[op] + len(faults)
    assert sum(proxy.counts.values()) > len(faults)
    # every retry is counted in _SUCCESS by its reason (those of the precounted requests and
    # of the _SUCCESS PUT itself cannot be in it)
    assert 0 < result.success["retries"]["throttled"] <= len(faults)

    # read back through the real endpoint, not the proxy
    assert read_back(s3_server, faulty) == read_back(s3_server, clean)
    assert len(read_back(s3_server, faulty)) == len(df)
    assert pending_uploads(s3, dest.dir) == []
    assert file_names(s3, faulty) == file_names(s3, clean)  # same partitions, same task files


def file_names(s3, prefix: str) -> list[str]:
    """The visible files under ``prefix``, relative and with the job UUID masked."""
    return sorted(JOB_UUID.sub("<job>", k[len(prefix) + 1 :]) for k in visible_keys(s3, prefix))


def test_throttling_has_a_budget_of_its_own(proxy):
    """Ten SlowDowns in a row ride out under the throttle budget even with max_attempts=2;
    500s are counted against max_attempts, separately."""
    proxy.set_rules([slow_down("HeadBucket", occurrences=range(1, 11))])
    store = open_store(
        S3Settings(
            endpoint_url=proxy.endpoint,
            retry=RetryPolicy(max_attempts=2, throttle_limit=20, throttle_interval_s=0.001),
        )
    )
    store.check_bucket(BUCKET)
    assert proxy.counts["HeadBucket"] == 11
    assert store.counters.retries() == {"throttled": 10}

    proxy.reset()
    proxy.set_rules([internal_error("HeadBucket", occurrences=[1, 2])])
    with pytest.raises(StoreError, match="500") as info:
        store.check_bucket(BUCKET)
    assert info.value.code == "500"  # a HEAD's error answer has no body, only the status
    assert proxy.counts["HeadBucket"] == 2  # max_attempts, not the throttle budget

    proxy.reset()
    proxy.set_rules([slow_down("HeadBucket")])
    tight = RetryPolicy(throttle_limit=4, throttle_interval_s=0.001)
    with pytest.raises(StoreError, match="503"):
        open_store(S3Settings(endpoint_url=proxy.endpoint, retry=tight)).check_bucket(BUCKET)
    assert proxy.counts["HeadBucket"] == 4


def test_throttle_budget_stops_at_its_time_limit(proxy):
    proxy.set_rules([slow_down("HeadBucket")])
    policy = RetryPolicy(throttle_limit=1000, throttle_interval_s=0.05, max_duration_s=0.5)
    started = time.monotonic()
    with pytest.raises(StoreError, match="503"):
        open_store(S3Settings(endpoint_url=proxy.endpoint, retry=policy)).check_bucket(BUCKET)
    assert time.monotonic() - started < 2.0
    assert 2 <= proxy.counts["HeadBucket"] < 1000
