"""Partition values longer than a local file name may be (255 bytes): S3 keys take them, so
the staging committers stage such files under shortened local names and upload them to keys
that keep the whole value. On moto and Ceph RGW; one case on classic Spark.
"""

from __future__ import annotations

import os

import pandas as pd
import pytest
from conftest import list_keys, pending_uploads, read_back

from s3commit_sdk import write_committed
from s3commit_sdk.committers.staging import NAME_MAX, local_path

#: 320 bytes in UTF-8: longer than any local file name, far below S3's 1024-byte keys
LONG = "é" * 150 + "x" * 20
#: its directory as Spark names it (nothing in it needs escaping)
LONG_DIR = f"p={LONG}/"


def frame(n: int = 12) -> pd.DataFrame:
    return pd.DataFrame({"id": range(n), "p": [LONG if i % 3 else "short" for i in range(n)]})


@pytest.mark.parametrize("committer", ["directory", "partitioned"])
def test_a_partition_value_longer_than_a_file_name_keeps_its_key(s3, s3_server, dest, committer):
    assert len(LONG_DIR.encode()) > NAME_MAX
    result = write_committed(
        frame(), dest.url, committer=committer, partition_by=["p"], progress=False
    )
    long_keys = [k for k in list_keys(s3, dest.dir) if k.startswith(dest.dir + LONG_DIR)]
    assert len(long_keys) == len([f for f in result.files if LONG_DIR in f.key]) >= 1
    assert sorted(read_back(s3_server, dest.prefix)) == sorted(
        (str(i), LONG if i % 3 else "short") for i in range(12)
    )
    assert pending_uploads(s3, dest.dir) == []


def test_local_names_are_shortened_only_where_too_long(tmp_path):
    short = local_path(str(tmp_path), "p=short/part-0.parquet")
    assert short == os.path.join(tmp_path, "p=short", "part-0.parquet")
    shortened = local_path(str(tmp_path), f"{LONG_DIR}part-0.parquet")
    directory, name = os.path.split(os.path.relpath(shortened, tmp_path))
    assert name == "part-0.parquet" and len(directory.encode()) <= NAME_MAX
    assert directory.startswith("p=éé")
    other = local_path(str(tmp_path), f"p={LONG}y/part-0.parquet")  # one more byte
    assert os.path.dirname(other) != os.path.dirname(shortened)


def test_spark_stages_a_long_partition_value(spark, s3, s3_server, dest):
    df = spark.createDataFrame(frame()).repartition(2)
    write_committed(df, dest.url, committer="partitioned", partition_by=["p"], progress=False)
    assert any(k.startswith(dest.dir + LONG_DIR) for k in list_keys(s3, dest.dir))
    assert len(read_back(s3_server, dest.prefix)) == 12
    assert pending_uploads(s3, dest.dir) == []
