"""S3 requests per committed file are deterministic: count them by operation.

Per file: 1 CreateMultipartUpload, ceil(size / part size) UploadPart, 1 CompleteMultipartUpload.
Per task: 1 PutObject (its pendingset), 1 HeadObject (is the job still alive?). Per job:
HeadBucket, a HeadObject for an unfinished commit, ListMultipartUploads, one listing of the job's
hidden directory, one DeleteObjects for it, PutObject for the alive marker, the journal, the
commit marker and _SUCCESS, one DeleteObjects for the alive marker and one for journal and
marker, plus the listings and deletes that conflict resolution needs. A write that keeps the
destination's files beside its own (append; fail or replace per partition) first reads the
destination's schema: a GET of _SUCCESS and, when none records it, one listing to find a file.
"""

from __future__ import annotations

import math
import os
from collections import Counter

import pandas as pd
import pytest
from conftest import BUCKET, differs_on

from s3commit_sdk import write_committed

PART = 5 * 1024 * 1024


def data() -> pd.DataFrame:
    # two partitions; "big" holds ~12 MiB of incompressible bytes in one file (3 parts)
    big = [os.urandom(1024 * 1024) for _ in range(12)]
    small = [os.urandom(100) for _ in range(12)]
    return pd.DataFrame({"blob": big + small, "part": ["big"] * 12 + ["small"] * 12})


#: the schema check's requests: not run, _SUCCESS records the schema, or a file was looked for
SCHEMA_READS = {"none": {}, "recorded": {"GetObject": 1}, "sampled": {"GetObject": 1, "List": 1}}


def expected(
    result, tasks: int, listings: int, deletes: int, server, schema: str = "none"
) -> dict[str, int]:
    """For every S3 committer: one job-alive check per task."""
    parts = sum(max(1, math.ceil(f.size / PART)) for f in result.files)
    heads = listings_to_verify = 0
    if differs_on(server, "rgw", "completion answers carry no ETag: every file is checked"):
        per_dir = Counter(f.partition["part"] for f in result.files)
        heads = sum(1 for n in per_dir.values() if n == 1)  # a lone file: one HEAD
        listings_to_verify = sum(1 for n in per_dir.values() if n > 1)  # else one listing
    counts = {
        "HeadBucket": 1,
        "HeadObject": 1 + tasks + heads,
        "CreateMultipartUpload": len(result.files),
        "UploadPart": parts,
        "CompleteMultipartUpload": len(result.files),
        "PutObject": tasks + 4,
        "ListObjectsV2": 1 + listings + listings_to_verify + SCHEMA_READS[schema].get("List", 0),
        "ListMultipartUploads": 1,
        "DeleteObjects": 3 + deletes,
    }
    if "GetObject" in SCHEMA_READS[schema]:
        counts["GetObject"] = SCHEMA_READS[schema]["GetObject"]
    return counts


@pytest.mark.parametrize(
    ("committer", "mode", "listings", "schema"),
    [
        ("directory", "fail", 1, "none"),  # job setup: is the destination empty?
        ("directory", "append", 0, "sampled"),
        ("partitioned", "fail", 2, "sampled"),  # one listing per partition written, in tasks
        ("partitioned", "append", 0, "sampled"),
    ],
)
def test_counts_per_committed_file(s3, s3_server, dest, committer, mode, listings, schema):
    options = {"tasks": 1, "multipart.size": "5M"}
    result = write_committed(
        data(),
        dest.url,
        committer=committer,
        partition_by=["part"],
        conflict_mode=mode,
        options=options,
    )
    assert sorted(f.partition["part"] for f in result.files) == ["big", "small"]
    assert result.requests == expected(result, 1, listings, 0, s3_server, schema)
    assert result.success["requests"] == result.requests
    big = next(f for f in result.files if f.partition["part"] == "big")
    assert big.size > 2 * PART  # really three parts
    head = s3.head_object(Bucket=BUCKET, Key=big.key)
    assert head["ETag"].endswith('-3"')


@pytest.mark.parametrize(("committer", "listings"), [("directory", 1), ("partitioned", 2)])
def test_counts_with_replace(s3, s3_server, dest, committer, listings):
    options = {"tasks": 2, "multipart.size": "5M"}
    frame = data()
    write_committed(frame, dest.url, committer=committer, partition_by=["part"], options=options)
    result = write_committed(
        frame,
        dest.url,
        committer=committer,
        partition_by=["part"],
        conflict_mode="replace",
        options=options,
    )
    # replace lists the destination (directory) or each partition written (partitioned) once,
    # then deletes the old files in one batch
    # partitioned replace keeps the other partitions: the first job's _SUCCESS gives the schema
    schema = "recorded" if committer == "partitioned" else "none"
    assert result.requests == expected(result, 2, listings, 1, s3_server, schema)
    assert result.success["replacedObjects"] >= 2


def test_magic_counts_per_committed_file(s3_server, dest):
    """Magic costs what the staging committers cost: 2 + parts per file, one check per task."""
    result = write_committed(
        data(),
        dest.url,
        committer="magic",
        partition_by=["part"],
        conflict_mode="append",
        options={"tasks": 1, "multipart.size": "5M"},
    )
    assert result.requests == expected(result, 1, 0, 0, s3_server, "sampled")
