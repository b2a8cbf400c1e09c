"""A bucket with versioning enabled: the job commits, or setup refuses it naming versioning.

Exclusive commit creates the destination's marker with ``If-None-Match: *``. On a versioned
bucket Ceph RGW ignores the condition (it writes another version; with versioning suspended it
honours it again), so before the fix every job there failed at setup with "the store ignores
`If-None-Match: *`", which said nothing of versioning or what to do. moto, like S3, honours the
condition on a versioned bucket: the job commits there.
"""

from __future__ import annotations

import uuid

import pandas as pd
import pytest
from conftest import differs_on

from s3commit_sdk import write_committed
from s3commit_sdk.errors import UNCHANGED_VISIBLE, StoreError, VersionedBucketError


@pytest.fixture
def versioned_bucket(s3):
    """A bucket of its own with versioning enabled, emptied (every version) and removed after."""
    name = f"versioned-{uuid.uuid4().hex[:10]}"
    s3.create_bucket(Bucket=name)
    s3.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": "Enabled"})
    yield name
    listed = s3.list_object_versions(Bucket=name)
    for entry in [*listed.get("Versions", []), *listed.get("DeleteMarkers", [])]:
        s3.delete_object(Bucket=name, Key=entry["Key"], VersionId=entry["VersionId"])
    s3.delete_bucket(Bucket=name)


def current_keys(s3, bucket: str) -> list[str]:
    return sorted(o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", []))


def pending(s3, bucket: str) -> list[str]:
    return [u["Key"] for u in s3.list_multipart_uploads(Bucket=bucket).get("Uploads", [])]


def test_a_job_on_a_versioned_bucket(s3, s3_server, versioned_bucket):
    bucket = versioned_bucket
    url = f"s3://{bucket}/table"
    data = pd.DataFrame({"id": range(6), "day": ["a", "b"] * 3})

    def write():
        return write_committed(data, url, committer="magic", partition_by="day")

    if differs_on(s3_server, "rgw", "RGW ignores If-None-Match: * on a versioned bucket"):
        with pytest.raises(VersionedBucketError) as info:
            write()
        error = info.value
        assert isinstance(error, StoreError) and error.bucket == bucket
        message = str(error)
        assert "versioning enabled" in message and "If-None-Match" in message
        assert "Status=Suspended" in message and "exclusive.commit=unchecked" in message
        assert error.visible == UNCHANGED_VISIBLE
        assert current_keys(s3, bucket) == [] and pending(s3, bucket) == []
        # what the error says to do: with versioning suspended the job commits
        s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Suspended"})
    result = write()
    assert result.rows == 6
    keys = current_keys(s3, bucket)
    assert sorted(f.key for f in result.files) == [k for k in keys if "/day=" in k]
    assert [k for k in keys if "/__" in k] == [] and pending(s3, bucket) == []
