"""Object options on every request a job makes (issue 25, item 2): the storage class, a canned
ACL, requester pays, and each format's Content-Type.

The fault proxy records the headers of every request (``record_headers``), so each option is
checked per request as well as on the objects (HEAD, GetObjectAcl). What a server does not keep,
the test says: Ceph RGW 16 knows only the storage classes its zone's placement defines
(``STANDARD`` unless configured), so it refuses ``STANDARD_IA`` (``InvalidArgument``); both
servers keep a canned ACL, but with the bucket's owner writing, ``bucket-owner-full-control``
grants what ``private`` grants (the owner's FULL_CONTROL); neither bills anyone, so requester pays
is checked on the wire only.
"""

from __future__ import annotations

import pandas as pd
import pytest
from conftest import BUCKET, differs_on, list_keys, visible_keys

from s3commit_sdk import StoreError, write_committed
from s3commit_sdk.paths import parse_s3_url
from s3commit_sdk.request_options import CONTENT_TYPES, JSON_CONTENT_TYPE
from s3commit_sdk.store import open_store

CREATING = ("PutObject", "CreateMultipartUpload", "CopyObject")
STORAGE_CLASS = "x-amz-storage-class"
ACL = "x-amz-acl"
REQUEST_PAYER = "x-amz-request-payer"


def frame(n: int = 40) -> pd.DataFrame:
    return pd.DataFrame({"id": range(n), "day": ["a", "b"] * (n // 2)})


def lacking(proxy, header: str, value: str, operations=None) -> list[tuple[str, str | None]]:
    """The requests (of ``operations``; None: all) the proxy saw without ``header: value``."""
    seen = [r for r in proxy.requests if operations is None or r.operation in operations]
    assert seen, proxy.counts
    return [(r.operation, r.headers.get(header)) for r in seen if r.headers.get(header) != value]


def write(proxy, dest, committer: str, **options):
    return write_committed(
        frame(),
        dest.url,
        committer=committer,
        partition_by=["day"],
        options={"endpoint": proxy.endpoint, "tasks": 2, **options},
        progress=False,
    )


def test_storage_class_on_every_object(s3_server, proxy, s3, dest):
    proxy.record_headers(STORAGE_CLASS)
    if differs_on(s3_server, "rgw", "STANDARD_IA is no storage class of its default placement"):
        with pytest.raises(StoreError) as refused:
            write(proxy, dest, "magic", **{"create.storage.class": "STANDARD_IA"})
        assert refused.value.code == "InvalidArgument" and refused.value.visible == "nothing"
        assert visible_keys(s3, dest.dir) == [] and list_keys(s3, dest.dir + "__s3commit/") == []
        location = parse_s3_url(dest.url)
        assert open_store({}).list_pending(location.bucket, location.dir_prefix) == []
        return
    result = write(proxy, dest, "magic", **{"create.storage.class": "STANDARD_IA"})
    assert lacking(proxy, STORAGE_CLASS, "STANDARD_IA", CREATING) == []
    keys = list_keys(s3, dest.dir)
    assert {f.key for f in result.files} | {dest.dir + "_SUCCESS"} == set(keys)
    shown = {key: s3.head_object(Bucket=BUCKET, Key=key).get("StorageClass") for key in keys}
    assert shown == {key: "STANDARD_IA" for key in keys}
    assert result.success.request_options == {"create.storage.class": "STANDARD_IA"}


def test_canned_acl_and_requester_pays_on_every_request_of_a_rename_committer(proxy, s3, dest):
    """The manifest committer on S3 (rename = CopyObject + delete): its copies carry the ACL
    too, and its ``_SUCCESS`` records the options like the S3 committers' does."""
    proxy.record_headers(ACL, REQUEST_PAYER)
    options = {"acl.default": "BucketOwnerFullControl", "requester.pays.enabled": "true"}
    result = write(proxy, dest, "manifest", **options)
    assert proxy.counts.get("CopyObject", 0) >= 2
    assert lacking(proxy, ACL, "bucket-owner-full-control", CREATING) == []
    assert lacking(proxy, REQUEST_PAYER, "requester") == []
    acl = s3.get_object_acl(Bucket=BUCKET, Key=result.files[0].key)
    owner = acl["Owner"]["ID"]
    assert {(g["Grantee"].get("ID"), g["Permission"]) for g in acl["Grants"]} == {
        (owner, "FULL_CONTROL")
    }
    assert result.success.request_options == {
        "acl.default": "bucket-owner-full-control",
        "requester.pays.enabled": "true",
    }


def test_requester_pays_on_every_request_of_an_s3_committer(proxy, dest):
    """Job setup, tasks, job commit and the replace of a magic job: every request says that
    the requester pays, but HeadBucket, whose API (botocore's model) takes no RequestPayer."""
    proxy.record_headers(REQUEST_PAYER)
    write(proxy, dest, "magic", **{"requester.pays.enabled": "true"})
    write_committed(
        frame(),
        dest.url,
        committer="magic",
        partition_by=["day"],
        conflict_mode="replace",
        options={"endpoint": proxy.endpoint, "requester.pays.enabled": "true"},
        progress=False,
    )
    operations = {r.operation for r in proxy.requests} - {"HeadBucket"}
    assert operations >= {"CreateMultipartUpload", "UploadPart", "CompleteMultipartUpload"}
    assert operations >= {"ListMultipartUploads", "ListObjectsV2", "DeleteObjects", "GetObject"}
    assert lacking(proxy, REQUEST_PAYER, "requester", operations) == []


@pytest.mark.parametrize("fmt", ["parquet", "csv", "json"])
def test_content_type_of_data_files_per_format(s3, dest, fmt):
    result = write_committed(
        frame(), dest.url, committer="directory", format=fmt, partition_by=["day"], progress=False
    )
    types = {f.key: s3.head_object(Bucket=BUCKET, Key=f.key)["ContentType"] for f in result.files}
    assert types == {f.key: CONTENT_TYPES[fmt] for f in result.files}
    success = s3.head_object(Bucket=BUCKET, Key=dest.dir + "_SUCCESS")
    assert success["ContentType"] == JSON_CONTENT_TYPE
