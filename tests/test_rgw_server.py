"""The Ceph RGW launcher: a real S3 server on 127.0.0.1, and what it answers over HTTP.

These tests start their own servers (not the session's S3 fixture) and pin down the RGW answers
the SDK has to live with, e.g. CompleteMultipartUpload's empty ETag.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import socket

import botocore.exceptions
import pytest
from conftest import children_named

from s3commit_sdk.testing.rgw import RGWServer

pytestmark = [
    pytest.mark.rgw,
    pytest.mark.skipif(
        shutil.which("radosgw") is None, reason="Ceph's radosgw is not installed (make system-deps)"
    ),
]

BUCKET = "rgw-selftest"
CEPH_DAEMONS = {"ceph-mon", "ceph-osd", "radosgw"}


@pytest.fixture(scope="module")
def rgw():
    with RGWServer(bucket=BUCKET, export=False) as server:
        yield server


@pytest.fixture
def s3(rgw):
    return rgw.client()


def ceph_children() -> set[int]:
    """Ceph daemons that are children of this process, alive or not yet reaped."""
    return children_named(CEPH_DAEMONS)


def test_put_and_get_object(s3):
    s3.put_object(Bucket=BUCKET, Key="small/object", Body=b"hello rgw")
    assert s3.get_object(Bucket=BUCKET, Key="small/object")["Body"].read() == b"hello rgw"


def test_two_part_upload_reads_back_and_head_shows_the_multipart_etag(s3):
    parts = [os.urandom(5 * 1024 * 1024), b"!"]
    upload_id = s3.create_multipart_upload(Bucket=BUCKET, Key="mpu/two")["UploadId"]
    etags = [
        s3.upload_part(
            Bucket=BUCKET, Key="mpu/two", UploadId=upload_id, PartNumber=number, Body=body
        )["ETag"]
        for number, body in enumerate(parts, start=1)
    ]
    assert etags == [f'"{hashlib.md5(body).hexdigest()}"' for body in parts]
    completed = s3.complete_multipart_upload(
        Bucket=BUCKET,
        Key="mpu/two",
        UploadId=upload_id,
        MultipartUpload={"Parts": [{"PartNumber": n, "ETag": e} for n, e in enumerate(etags, 1)]},
    )
    # RGW 16.2 answers `<ETag></ETag>` here (AWS S3 gives the multipart ETag).
    assert completed["ETag"] == ""
    digest = hashlib.md5(b"".join(hashlib.md5(body).digest() for body in parts)).hexdigest()
    assert s3.head_object(Bucket=BUCKET, Key="mpu/two")["ETag"] == f'"{digest}-2"'
    assert s3.get_object(Bucket=BUCKET, Key="mpu/two")["Body"].read() == b"".join(parts)


def test_if_none_match_refuses_an_existing_key(s3):
    s3.put_object(Bucket=BUCKET, Key="exclusive/key", Body=b"first", IfNoneMatch="*")
    with pytest.raises(botocore.exceptions.ClientError) as refused:
        s3.put_object(Bucket=BUCKET, Key="exclusive/key", Body=b"second", IfNoneMatch="*")
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 412
    assert s3.get_object(Bucket=BUCKET, Key="exclusive/key")["Body"].read() == b"first"


def test_list_multipart_uploads_paginates(s3):
    started = {
        s3.create_multipart_upload(Bucket=BUCKET, Key=f"pending/{i}")["UploadId"]: f"pending/{i}"
        for i in range(5)
    }
    seen, page_sizes, markers = {}, [], {}
    while True:
        page = s3.list_multipart_uploads(Bucket=BUCKET, Prefix="pending/", MaxUploads=2, **markers)
        uploads = page.get("Uploads", [])
        page_sizes.append(len(uploads))
        seen.update((upload["UploadId"], upload["Key"]) for upload in uploads)
        if not page["IsTruncated"]:
            break
        markers = {"KeyMarker": page["NextKeyMarker"], "UploadIdMarker": page["NextUploadIdMarker"]}
    assert page_sizes == [2, 2, 1]
    assert seen == started
    for upload_id, key in started.items():
        s3.abort_multipart_upload(Bucket=BUCKET, Key=key, UploadId=upload_id)
    assert "Uploads" not in s3.list_multipart_uploads(Bucket=BUCKET, Prefix="pending/")


def test_stop_ends_every_daemon_removes_the_directory_and_restores_env(monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://before.invalid")
    server = RGWServer(bucket="rgw-lifecycle").start()
    try:
        assert server.kind == "rgw"
        assert os.environ["AWS_ENDPOINT_URL"] == server.endpoint == server.env["AWS_ENDPOINT_URL"]
        server.client().head_bucket(Bucket="rgw-lifecycle")
        pids, directory = set(server.pids.values()), server.dir
        assert len(pids) == 3 and pids <= ceph_children()
        assert directory is not None and os.path.isdir(directory)
    finally:
        server.stop()
    assert not pids & ceph_children()
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert not os.path.exists(directory)
    assert os.environ["AWS_ENDPOINT_URL"] == "http://before.invalid"


def test_failed_start_raises_with_the_daemon_log_and_leaves_nothing_running(rgw):
    before = ceph_children()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        server = RGWServer(bucket="", port=taken.getsockname()[1], timeout=30)
        # radosgw exits 98 (EADDRINUSE, which RGWServer names: an abort on the way out can cut
        # the log before the bind failure's line), or crashes on its way out (-11) after logging it
        failed = r"(?s)client\.rgw exited with -?\d+.*already in use"
        with pytest.raises(RuntimeError, match=failed):
            server.start()
    assert ceph_children() == before  # the suite's own RGW servers may be among them
    assert set(rgw.pids.values()) <= before
    assert server.dir is None and not server.daemons
