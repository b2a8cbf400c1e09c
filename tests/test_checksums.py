"""End-to-end integrity with ``checksum.algorithm``: every part carries the checksum of its bytes,
the completion repeats them, verification compares the stored composite checksum with the one
the part checksums make, and ``_SUCCESS`` records it; a store that keeps no checksums is refused
at job setup.

Moto 5.2.5 keeps the checksums but checks none: the fault proxy's ``check_checksums`` rule does
what S3 does (a part unlike its checksum header, 400 BadDigest; a completion of a checksummed
upload without its part checksums, 400 InvalidRequest). Ceph RGW 16 accepts checksums and keeps
none: there the job is refused at setup.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import zlib

import pandas as pd
import pytest
from conftest import BUCKET, list_keys, pending_uploads, visible_keys
from test_recovery import crash, spec

from s3commit_sdk import (
    InvalidOptionError,
    S3CommitError,
    read_result,
    register,
    write_committed,
)
from s3commit_sdk.checksums import checksum_of, matches
from s3commit_sdk.committers import checksum_probe
from s3commit_sdk.committers.checksum_probe import require_kept_checksums
from s3commit_sdk.errors import CommitError, PendingSetError
from s3commit_sdk.formats import PendingUpload
from s3commit_sdk.options import resolve_options
from s3commit_sdk.paths import parse_s3_url
from s3commit_sdk.recovery import recover
from s3commit_sdk.store import S3Settings
from s3commit_sdk.testing.faultproxy import check_checksums, corrupt_body, refuse_checksums

MIB = 1024 * 1024
#: 40 small rows in two days, and one day whose file (6 MiB of random bytes) takes two parts
FRAME = pd.DataFrame(
    {
        "id": range(52),
        "day": ["d1", "d2"] * 20 + ["big"] * 12,
        "blob": [b"x"] * 40 + [os.urandom(MIB // 2) for _ in range(12)],
    }
)


@pytest.fixture
def keeping(s3_server):
    """A store that keeps checksums: moto (behind the proxy, which checks them as S3 does)."""
    if s3_server.kind == "rgw":
        pytest.skip("Ceph RGW 16 keeps no checksums: test_rgw_refuses_checksums_at_setup")
    return s3_server


def write(dest, committer: str, algorithm: str, endpoint: str, **options: str):
    return write_committed(
        FRAME,
        dest.url,
        committer=committer,
        partition_by=["day"],
        options={
            "endpoint": endpoint,
            "checksum.algorithm": algorithm,
            "multipart.size": "5M",
            **options,
        },
    )


def stored_checksums(s3, dest, algorithm: str) -> dict[str, str]:
    """Every data file's checksum as a HEAD with ``ChecksumMode=ENABLED`` shows it."""
    keys = [k for k in visible_keys(s3, dest.dir) if not k.endswith("/_SUCCESS")]
    heads = {k: s3.head_object(Bucket=BUCKET, Key=k, ChecksumMode="ENABLED") for k in keys}
    return {k: head.get(f"Checksum{algorithm}") for k, head in heads.items()}


def assert_recorded(s3, dest, algorithm: str) -> dict:
    """HEAD shows a checksum for every data file, and ``_SUCCESS`` records the same."""
    stored = stored_checksums(s3, dest, algorithm)
    assert stored and all(stored.values()), stored
    success = json.loads(s3.get_object(Bucket=BUCKET, Key=dest.dir + "_SUCCESS")["Body"].read())
    recorded = {f["key"]: f for f in success["files"]}
    assert sorted(recorded) == sorted(stored)
    for key, value in stored.items():
        assert recorded[key]["checksumAlgorithm"] == algorithm
        assert matches(recorded[key]["checksum"], value), (key, recorded[key], value)
    return success


def probed(dest, algorithm: str, endpoint: str) -> None:
    """Job setup's check, passed once for this endpoint (it is remembered per process): the
    faults a test sets afterwards hit the data's parts, not the check's."""
    options = resolve_options({"endpoint": endpoint, "checksum.algorithm": algorithm})
    require_kept_checksums(S3Settings.resolve(options), parse_s3_url(dest.url))


@pytest.mark.parametrize(
    ("committer", "algorithm"),
    [("magic", "CRC32"), ("directory", "CRC32C"), ("partitioned", "SHA256")],
)
def test_every_file_keeps_its_checksum(keeping, proxy, s3, dest, committer, algorithm):
    proxy.set_rules([check_checksums()])
    write(dest, committer, algorithm, proxy.endpoint)
    success = assert_recorded(s3, dest, algorithm)
    assert success["requestOptions"]["checksum.algorithm"] == algorithm
    big = next(f for f in success["files"] if "/day=big/" in f["key"])
    assert big["checksum"].endswith("-2")  # composite, of the file's two parts
    result = read_result(dest.url)  # read back through CommittedFile's strict parser
    assert {f.key: f.checksum for f in result.files} == {
        f["key"]: f["checksum"] for f in success["files"]
    }
    assert not [e for e in proxy.events if e.action != "check-checksums"]


@pytest.mark.fault
def test_a_part_damaged_on_its_way_is_refused_and_nothing_is_left(keeping, proxy, s3, dest):
    probed(dest, "CRC32", proxy.endpoint)
    proxy.set_rules([corrupt_body("UploadPart"), check_checksums()])
    with pytest.raises(S3CommitError, match="BadDigest") as failure:
        write(dest, "magic", "CRC32", proxy.endpoint)
    assert failure.value.visible == "nothing"
    assert pending_uploads(s3, dest.dir) == []
    assert visible_keys(s3, dest.dir) == []


@pytest.mark.fault
def test_a_store_that_checks_no_part_fails_verification(keeping, proxy, s3, dest):
    """Moto stores the damaged part as it is: the composite checksum it then keeps differs from
    the one the tasks' part checksums make, and verification refuses the file before the job
    commits (the ETags agree: moto computed the damaged part's)."""
    probed(dest, "CRC32C", proxy.endpoint)
    proxy.set_rules([corrupt_body("UploadPart", occurrences=[1])])
    with pytest.raises(CommitError, match="CRC32C") as failure:
        write(dest, "partitioned", "CRC32C", proxy.endpoint)
    assert "is not what the task uploaded" in str(failure.value)
    assert failure.value.visible == "nothing"
    assert pending_uploads(s3, dest.dir) == []
    assert visible_keys(s3, dest.dir) == []


@pytest.mark.fault
def test_recovery_completes_with_the_part_checksums(keeping, proxy, s3, dest):
    """A driver killed after its journal (at its first data completion; the setup check's is the
    first of all): ``recover`` completes from the journal, which keeps each part's checksum, and
    the proxy refuses, as S3 does, a completion without them."""
    job = spec(dest.url, "magic", 2, ["d1", "d2"], proxy.endpoint)
    job["options"]["checksum.algorithm"] = "CRC32"
    crash(proxy, job, "CompleteMultipartUpload", 2)
    journals = [k for k in list_keys(s3, dest.dir + "__s3commit/") if k.endswith(".json")]
    commits = [
        c
        for key in journals
        for c in json.loads(s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()).get("commits", [])
    ]
    assert commits and all(c["checksumAlgorithm"] == "CRC32" and c["checksums"] for c in commits)
    proxy.set_rules([check_checksums()])
    report = recover(dest.url, {"endpoint": proxy.endpoint})
    assert len(report.completed) + len(report.already_visible) == len(commits)
    assert_recorded(s3, dest, "CRC32")
    assert pending_uploads(s3, dest.dir) == []


def test_a_store_that_refuses_checksums_is_refused_at_setup(keeping, proxy, s3, dest, monkeypatch):
    """Before any other request carries them (the conditional-create check's PUT does)."""
    monkeypatch.setattr(checksum_probe, "_kept", set())  # as in a new process: not checked yet
    proxy.set_rules([refuse_checksums()])
    with pytest.raises(InvalidOptionError, match="refused an upload carrying one") as failure:
        write(dest, "directory", "SHA256", proxy.endpoint)
    assert failure.value.option == "checksum.algorithm"
    assert list_keys(s3, dest.dir) == []
    assert pending_uploads(s3, dest.dir) == []


@pytest.mark.parametrize(
    ("algorithm", "values"),
    [
        (None, ["AAAAAA=="]),  # checksums without an algorithm
        ("MD5", ["AAAAAA=="]),  # no algorithm of S3's
        ("CRC32", []),  # a part without its checksum
        ("CRC32", ["AAAAAA==", "AAAAAA=="]),  # more checksums than parts
        ("CRC32", ["not base64!"]),
        ("SHA256", ["AAAAAA=="]),  # a CRC32's length, not a SHA-256's
    ],
)
def test_a_pending_upload_with_malformed_checksums_is_refused(algorithm, values):
    """What a task saved is validated before job commit or recovery completes anything with it
    (``journal_trust`` validates the journal's uploads alike)."""
    upload = PendingUpload(
        uri="s3://b/t/x.parquet",
        bucket="b",
        destinationKey="t/x.parquet",
        uploadId="u",
        etags=['"0cc175b9c0f1b6a831c399e269772661"'],
        length=1,
        rows=1,
        partition={},
        jobId="j",
        taskId="t",
        checksumAlgorithm=algorithm,
        checksums=values,
    )
    with pytest.raises(PendingSetError, match="checksum"):
        upload.validate("j", "b", "t/")


def test_rgw_refuses_checksums_at_setup(s3_server, s3, dest):
    if s3_server.kind != "rgw":
        pytest.skip("moto keeps checksums; the refusal is Ceph RGW 16's (it keeps none)")
    with pytest.raises(InvalidOptionError, match="does not keep CRC32 checksums") as failure:
        write_committed(
            FRAME.head(4), dest.url, committer="magic", options={"checksum.algorithm": "CRC32"}
        )
    assert failure.value.option == "checksum.algorithm"
    assert failure.value.visible == "unchanged"
    assert list_keys(s3, dest.dir) == []
    assert pending_uploads(s3, dest.dir) == []


def test_spark_data_source_writes_crc32c(keeping, spark, s3, dest):
    register(spark)
    env = keeping.env
    df = spark.createDataFrame([(i, f"d{i % 2}") for i in range(20)], "id int, day string")
    writer = df.repartition(2).write.format("s3commit").mode("append")
    for key, value in {
        "endpoint": keeping.endpoint,
        "access.key": env["AWS_ACCESS_KEY_ID"],
        "secret.key": env["AWS_SECRET_ACCESS_KEY"],
        "committer": "partitioned",
        "partition_by": "day",
        "checksum.algorithm": "CRC32C",
    }.items():
        writer = writer.option(key, value)
    writer.save(dest.url)
    assert_recorded(s3, dest, "CRC32C")


def _whole_digest(algorithm: str, data: bytes) -> bytes:
    """The digest by the libraries themselves, in one call."""
    if algorithm == "CRC32":
        return zlib.crc32(data).to_bytes(4, "big")
    if algorithm == "CRC32C":
        from crc32c import crc32c

        return crc32c(data).to_bytes(4, "big")
    return hashlib.sha256(data).digest()


@pytest.mark.parametrize("algorithm", ["CRC32", "CRC32C", "SHA256"])
def test_a_checksum_taken_piece_by_piece_is_the_whole_one(algorithm):
    """A part sent from a file is checksummed in pieces (FileRange.chunks): the same value."""
    data = os.urandom(3 * 1024 * 1024 + 5)
    pieces = [data[start : start + 1_000_000] for start in range(0, len(data), 1_000_000)]
    expected = base64.b64encode(_whole_digest(algorithm, data)).decode()
    assert checksum_of(algorithm, pieces) == expected
    assert checksum_of(algorithm, [b""]) == base64.b64encode(_whole_digest(algorithm, b"")).decode()
