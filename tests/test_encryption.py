"""Server-side encryption of every object a job creates (issue 25, item 1).

Each algorithm is written by one representative committer with pandas input (SSE-KMS: magic,
SSE-C: partitioned, SSE-S3: directory), while the fault proxy holds the job's first completion:
then every object the job has created so far (pendingsets, journal, marker, alive marker) is
HEADed, and after the job its data files and ``_SUCCESS``; each shows the algorithm and key. The
proxy also records the encryption headers of every request, so what HEAD cannot show is still
proven per request. Where a server does not keep or enforce something, the test says so:

- moto 5.2.5 keeps SSE-KMS and SSE-S3 but drops SSE-C (HEAD reports nothing; reads need no key);
- Ceph RGW 16 (testing KMS backend, ``rgw crypt require ssl = false``) keeps SSE-KMS and SSE-C,
  accepts SSE-S3 but does not report it on HEAD, and serves a plain object to a read that gives
  an SSE-C key;
- neither enforces a bucket policy requiring ``x-amz-server-side-encryption``, nor refuses (as S3
  does, 400) a read whose SSE-C headers do not fit the object: the proxy's ``require_header`` and
  ``strict_sse_c`` rules emulate both.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
from concurrent.futures import ThreadPoolExecutor

import boto3
import pandas as pd
import pyarrow as pa
import pytest
from conftest import (
    BUCKET,
    differs_on,
    list_keys,
    rows_of,
    sdk_table,
    visible_keys,
    wait_for_request,
)

from s3commit_sdk import StoreError, SuccessDocument, write_committed
from s3commit_sdk import recovery as recovery_api
from s3commit_sdk.cli import main as cli_main
from s3commit_sdk.paths import parse_s3_url
from s3commit_sdk.request_options import SSE_C
from s3commit_sdk.store import open_store
from s3commit_sdk.testing.crash import crash_write
from s3commit_sdk.testing.faultproxy import (
    REQUIRE_HEADER,
    STRICT_SSE_C,
    hold,
    require_header,
    strict_sse_c,
)
from s3commit_sdk.testing.rgw import RGW_TEST_KMS_KEY

SSE = "x-amz-server-side-encryption"
SSE_KMS_KEY = "x-amz-server-side-encryption-aws-kms-key-id"
SSE_C_ALGORITHM = "x-amz-server-side-encryption-customer-algorithm"
SSE_C_KEY = "x-amz-server-side-encryption-customer-key"
CREATING = ("PutObject", "CreateMultipartUpload", "CopyObject")
#: requests S3 refuses on an SSE-C object or upload unless they repeat the key
NEED_SSE_C = ("UploadPart", "CompleteMultipartUpload", "HeadObject", "GetObject")
#: a fixed SSE-C test key (32 bytes), and how options give it
CUSTOMER_KEY = bytes(range(100, 132))
CUSTOMER_KEY_TEXT = base64.b64encode(CUSTOMER_KEY).decode()
CUSTOMER_KEY_MD5 = base64.b64encode(hashlib.md5(CUSTOMER_KEY).digest()).decode()
SSE_C_OPTIONS = {"encryption.algorithm": "SSE-C", "encryption.key": CUSTOMER_KEY_TEXT}
SSE_C_READ = {"SSECustomerAlgorithm": "AES256", "SSECustomerKey": CUSTOMER_KEY}


@pytest.fixture(scope="module")
def kms_key(s3_server) -> str:
    """A KMS key the server knows: created in moto's KMS service (same endpoint), or the one
    RGW's testing backend has in its config."""
    if s3_server.kind == "rgw":
        return RGW_TEST_KMS_KEY
    kms = boto3.client("kms", endpoint_url=s3_server.endpoint, region_name="us-east-1")
    return kms.create_key(Description="s3commit encryption tests")["KeyMetadata"]["KeyId"]


def frame(n: int = 40, tag: str = "") -> pd.DataFrame:
    return pd.DataFrame(
        {"id": range(n), "v": [f"{tag}{i}" for i in range(n)], "day": ["a", "b"] * (n // 2)}
    )


def sdk_rows(url: str, options: dict) -> list[tuple]:
    """Every row through the SDK's reader (what ``spark.read.format("s3commit")`` runs)."""
    return rows_of(sdk_table(url, options), ["day", "id", "v"])


def frame_rows(df: pd.DataFrame) -> list[tuple]:
    return rows_of(pa.Table.from_pandas(df, preserve_index=False), ["day", "id", "v"])


def write_and_head(proxy, s3, dest, df, read: dict | None = None, **write_kwargs):
    """Run a write through the proxy, its first completion held; HEAD every object under the
    destination while it is held (the job's own metadata) and after the job (data, _SUCCESS).
    Returns the HEAD answers by key, the bodies of the hidden objects, and the result."""
    options = {"endpoint": proxy.endpoint, "tasks": 2, "threads": 2, **write_kwargs.pop("options")}
    proxy.record_headers(SSE, SSE_KMS_KEY, SSE_C_ALGORITHM, SSE_C_KEY)
    proxy.set_rules([hold("CompleteMultipartUpload", occurrences=[1])])
    heads, hidden = {}, {}
    with ThreadPoolExecutor(1) as pool:
        job = pool.submit(
            write_committed, df, dest.url, options=options, progress=False, **write_kwargs
        )
        wait_for_request(proxy, "CompleteMultipartUpload", 1, job)
        for key in list_keys(s3, dest.dir):
            heads[key] = s3.head_object(Bucket=BUCKET, Key=key, **(read or {}))
            hidden[key] = s3.get_object(Bucket=BUCKET, Key=key, **(read or {}))["Body"].read()
        proxy.release()
        result = job.result(timeout=120)
    for key in list_keys(s3, dest.dir):
        heads[key] = s3.head_object(Bucket=BUCKET, Key=key, **(read or {}))
    names = {key.rsplit("/", 1)[-1] for key in hidden}
    assert {"COMMIT_IN_PROGRESS", "journal.json", "alive"} <= names, sorted(hidden)
    assert any(key.endswith(".pendingset") for key in hidden), sorted(hidden)
    assert any(key.endswith("/_SUCCESS") for key in heads)
    assert len(result.files) >= 2 and all(f.key in heads for f in result.files)
    return heads, hidden, result


def every_request_carries(proxy, header: str, value: str, operations=CREATING) -> None:
    """Every request of ``operations`` the proxy saw had ``header: value`` (and there were some)."""
    seen = [r for r in proxy.requests if r.operation in operations]
    assert seen, proxy.counts
    lacking = [(r.operation, r.headers.get(header)) for r in seen if r.headers.get(header) != value]
    assert lacking == [], f"requests without {header}: {value}: {lacking}"


def success_of(s3, dest, read: dict | None = None) -> dict:
    reply = s3.get_object(Bucket=BUCKET, Key=f"{dest.dir}_SUCCESS", **(read or {}))
    return json.loads(reply["Body"].read())


def assert_nothing_left(s3, dest, options: dict) -> None:
    """No pending upload and no hidden object of a job left under the destination."""
    location = parse_s3_url(dest.url)
    assert open_store(options).list_pending(location.bucket, location.dir_prefix) == []
    assert [k for k in list_keys(s3, dest.dir) if "/__s3commit/" in k or "/__magic/" in k] == []


# -- SSE-KMS, SSE-S3, SSE-C: every object -------------------------------------------------------
def test_sse_kms_on_every_object_of_a_magic_job(proxy, s3, dest, kms_key):
    options = {"encryption.algorithm": "aws:kms", "encryption.key": kms_key}
    heads, _, result = write_and_head(
        proxy, s3, dest, frame(), committer="magic", partition_by=["day"], options=options
    )
    shown = {key: (h.get("ServerSideEncryption"), h.get("SSEKMSKeyId")) for key, h in heads.items()}
    assert shown == {key: ("aws:kms", kms_key) for key in heads}
    every_request_carries(proxy, SSE, "aws:kms")
    every_request_carries(proxy, SSE_KMS_KEY, kms_key)
    assert success_of(s3, dest)["requestOptions"] == {
        "encryption.algorithm": "aws:kms",
        "encryption.key": kms_key,
    }
    parsed = SuccessDocument.from_dict(success_of(s3, dest))
    assert parsed.request_options == result.success.request_options == parsed["requestOptions"]


def test_sse_s3_on_every_object_of_a_directory_job(s3_server, proxy, s3, dest):
    heads, _, _ = write_and_head(
        proxy, s3, dest, frame(), committer="directory", options={"encryption.algorithm": "SSE-S3"}
    )
    shown = {key: h.get("ServerSideEncryption") for key, h in heads.items()}
    if differs_on(s3_server, "rgw", "SSE-S3 (AES256) is accepted, but HEAD does not report it"):
        assert shown == {key: None for key in heads}
    else:
        assert shown == {key: "AES256" for key in heads}
    every_request_carries(proxy, SSE, "AES256")  # what HEAD cannot show on RGW, each request did
    assert success_of(s3, dest)["requestOptions"] == {"encryption.algorithm": "AES256"}


def test_sse_c_on_every_object_its_reads_and_no_key_anywhere(s3_server, proxy, s3, dest, caplog):
    """SSE-C: every object written with the customer key, every request that must repeat it
    did, the SDK's reader reads the data with the key and fails clearly without it; the key
    appears in no DEBUG log record, _SUCCESS, journal, pendingset, error or repr."""
    caplog.set_level(logging.DEBUG)
    df = frame(tag="c")
    heads, hidden, result = write_and_head(
        proxy,
        s3,
        dest,
        df,
        read=SSE_C_READ,
        committer="partitioned",
        partition_by=["day"],
        options=SSE_C_OPTIONS,
    )
    if differs_on(s3_server, "moto", "SSE-C is accepted but not kept: HEAD reports nothing"):
        assert {h.get("SSECustomerAlgorithm") for h in heads.values()} == {None}
    else:
        shown = {
            k: (h.get("SSECustomerAlgorithm"), h.get("SSECustomerKeyMD5")) for k, h in heads.items()
        }
        assert shown == {key: ("AES256", CUSTOMER_KEY_MD5) for key in heads}
    every_request_carries(proxy, SSE_C_ALGORITHM, "AES256")
    every_request_carries(proxy, SSE_C_ALGORITHM, "AES256", NEED_SSE_C)
    assert {r.operation for r in proxy.requests} >= {*CREATING[:2], *NEED_SSE_C}
    assert all(SSE not in r.headers for r in proxy.requests)  # SSE-C is not also SSE-S3
    recorded = {"encryption.algorithm": SSE_C, "encryption.key.md5": CUSTOMER_KEY_MD5}
    assert success_of(s3, dest, SSE_C_READ)["requestOptions"] == recorded

    # the SDK's reader, through a proxy refusing reads whose SSE-C headers do not fit, as S3
    proxy.set_rules([strict_sse_c()])
    through = {"endpoint": proxy.endpoint}
    assert sdk_rows(dest.url, {**through, **SSE_C_OPTIONS}) == frame_rows(df)
    with pytest.raises(StoreError, match="customer key \\(SSE-C\\)") as refused:
        sdk_rows(dest.url, through)
    assert refused.value.code in ("400", "InvalidRequest", "InvalidArgument")

    secret_texts = (CUSTOMER_KEY_TEXT, repr(CUSTOMER_KEY), CUSTOMER_KEY.hex())
    logged = caplog.text
    assert f"{SSE_C_KEY}:***" in logged  # the key's header was logged, redacted
    places = {
        "the DEBUG logs": logged,
        "_SUCCESS": json.dumps(success_of(s3, dest, SSE_C_READ)),
        "the journal and pendingsets": b"".join(hidden.values()).decode(errors="replace"),
        "the error": str(refused.value),
        "the result": repr(result) + repr(result.success.to_dict()),
        "the settings": repr(open_store(SSE_C_OPTIONS).settings),
    }
    for where, text in places.items():
        for secret in secret_texts:
            assert secret not in text, f"the SSE-C key leaked into {where}"


def test_sse_c_recover_and_abort_a_crashed_commit(s3_server, s3, dest, tmp_path, capsys):
    """A driver killed at its first completion leaves SSE-C uploads; ``s3commit recover`` with
    the key (``-o encryption.key=@FILE``: it stays out of the process list) completes and
    verifies them (the data then reads back with it), ``abort`` removes another."""
    df = frame(tag="r")
    for name in ("recover", "abort"):
        crash_write(
            df, f"{dest.url}/{name}", operation="CompleteMultipartUpload", options=SSE_C_OPTIONS
        )
    key_file = tmp_path / "sse-c.key"
    key_file.write_text(CUSTOMER_KEY_TEXT + "\n")
    key_options = ["-o", "encryption.algorithm=SSE-C", "-o", f"encryption.key=@{key_file}"]
    assert cli_main(["recover", f"{dest.url}/recover", *key_options]) == 0
    assert "_SUCCESS written" in capsys.readouterr().out
    assert sdk_rows(f"{dest.url}/recover", SSE_C_OPTIONS) == frame_rows(df)
    if not differs_on(s3_server, "moto", "SSE-C is not kept: a HEAD without the key succeeds"):
        key = next(k for k in visible_keys(s3, dest.dir + "recover/") if k.endswith(".parquet"))
        assert s3.head_object(Bucket=BUCKET, Key=key, **SSE_C_READ)["SSECustomerKeyMD5"] == (
            CUSTOMER_KEY_MD5
        )
    assert cli_main(["abort", f"{dest.url}/abort", *key_options]) == 0
    assert CUSTOMER_KEY_TEXT not in capsys.readouterr().out
    assert list_keys(s3, dest.dir + "abort/") == []
    for name in ("recover", "abort"):
        assert_nothing_left(s3, type(dest)(f"{dest.prefix}/{name}"), SSE_C_OPTIONS)


def test_an_sse_c_replace_over_data_written_without_encryption(proxy, s3, dest, monkeypatch):
    """An SSE-C ``replace`` over unencrypted data, its driver killed before the replace deletes,
    then recovered: the job reads the old ``_SUCCESS``, recovery confirms its deletes of the
    old files with HEADs and the reader reads the partition the job kept, all with the key.
    S3 refuses those reads while they carry the key (the proxy's ``strict_sse_c`` rule, in
    front of the crashed driver too); the SDK reads them again without it."""
    old, new = frame(tag="old"), frame(tag="new")
    write_committed(old, dest.url, partition_by=["day"], progress=False)
    proxy.set_rules([strict_sse_c()])
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.setenv(name, proxy.endpoint)  # the crashed driver's proxy goes through ours
    crash_write(
        new[new.day == "a"],
        dest.url,
        operation="DeleteObjects",
        occurrence=2,  # the replace deletes (the first deletes the setup probe)
        committer="partitioned",
        partition_by=["day"],
        conflict_mode="replace",
        options=SSE_C_OPTIONS,
    )
    through = {"endpoint": proxy.endpoint, **SSE_C_OPTIONS}
    report = recovery_api.recover(dest.url, through)
    assert report.deleted and all("day=a/" in key for key in report.deleted)
    refused = {e.operation for e in proxy.events if e.action == STRICT_SSE_C}
    assert refused == {"GetObject", "HeadObject"}  # old _SUCCESS, confirmed deletes
    expected = pd.concat([old[old.day == "b"], new[new.day == "a"]])
    assert sdk_rows(dest.url, through) == frame_rows(expected)
    assert_nothing_left(s3, dest, through)


# -- a bucket policy requiring SSE-KMS ----------------------------------------------------------
def test_a_policy_requiring_sse_kms_refuses_nothing_of_a_kms_job(proxy, s3, dest, kms_key):
    """The proxy denies, as a bucket policy on s3:PutObject does, every object-creating request
    without ``x-amz-server-side-encryption: aws:kms`` (moto and RGW 16 enforce no such policy)."""
    proxy.set_rules([require_header(SSE, "aws:kms")])
    proxy.record_headers(SSE)
    options = {
        "endpoint": proxy.endpoint,
        "encryption.algorithm": "aws:kms",
        "encryption.key": kms_key,
    }
    result = write_committed(
        frame(),
        dest.url,
        committer="partitioned",
        partition_by=["day"],
        options=options,
        progress=False,
    )
    assert result.rows == 40
    assert [e for e in proxy.events if e.action == REQUIRE_HEADER] == []
    assert proxy.counts["CreateMultipartUpload"] >= 2 and proxy.counts["PutObject"] >= 3
    every_request_carries(proxy, SSE, "aws:kms")


def test_a_policy_requiring_sse_kms_refuses_a_job_without_it(proxy, s3, dest):
    proxy.set_rules([require_header(SSE, "aws:kms")])
    options = {"endpoint": proxy.endpoint}
    with pytest.raises(StoreError) as refused:
        write_committed(
            frame(),
            dest.url,
            committer="magic",
            partition_by=["day"],
            options=options,
            progress=False,
        )
    assert refused.value.code == "AccessDenied"
    denied = [e for e in proxy.events if e.action == REQUIRE_HEADER]
    assert denied and denied[0].operation in CREATING
    assert "PUT '" in str(refused.value) and "s3:PutObject" in str(refused.value)
    assert refused.value.visible == "nothing"
    assert visible_keys(s3, dest.dir) == []
    assert_nothing_left(s3, dest, options)


# -- Delta: the log entries delta-rs writes -----------------------------------------------------
def test_delta_log_entries_of_an_sse_kms_job(proxy, s3, dest, kms_key):
    """delta-rs (deltalake 1.6.6, object_store's aws_server_side_encryption / aws_sse_kms_key_id)
    writes the ``_delta_log`` entry with the job's encryption."""
    options = {"encryption.algorithm": "aws:kms", "encryption.key": kms_key}
    result = write_committed(frame(), dest.url, format="delta", options=options, progress=False)
    entries = [k for k in list_keys(s3, dest.dir + "_delta_log/") if k.endswith(".json")]
    assert entries and result.files
    for key in [*entries, *(f.key for f in result.files), dest.dir + "_SUCCESS"]:
        head = s3.head_object(Bucket=BUCKET, Key=key)
        assert (head.get("ServerSideEncryption"), head.get("SSEKMSKeyId")) == ("aws:kms", kms_key)


def test_delta_table_with_sse_c(s3_server, s3, dest):
    """delta-rs takes the SSE-C key too (object_store's aws_sse_customer_key_base64): it writes
    the log entries with it and reads them with it when the next job appends."""
    df = frame(tag="d")
    for mode in ("fail", "append"):
        write_committed(
            df, dest.url, format="delta", conflict_mode=mode, options=SSE_C_OPTIONS, progress=False
        )
    entries = [k for k in list_keys(s3, dest.dir + "_delta_log/") if k.endswith(".json")]
    assert len(entries) == 2
    if not differs_on(s3_server, "moto", "SSE-C is accepted but not kept: HEAD reports nothing"):
        for key in entries:
            head = s3.head_object(Bucket=BUCKET, Key=key, **SSE_C_READ)
            assert head["SSECustomerKeyMD5"] == CUSTOMER_KEY_MD5
    assert sdk_rows(dest.url, SSE_C_OPTIONS) == frame_rows(pd.concat([df, df]))


# -- Spark's own API ----------------------------------------------------------------------------
def test_spark_format_s3commit_with_sse_kms(spark, proxy, s3, dest, kms_key):
    """``df.write.format("s3commit")`` with S3A's option names: every object-creating request
    of the driver and the executors carried the key, and HEAD shows it (moto only: one Spark
    run is enough for the Spark path, the rest is the same store)."""
    from s3commit_sdk import register

    register(spark)
    proxy.record_headers(SSE, SSE_KMS_KEY)
    (
        spark.range(0, 100, numPartitions=2)
        .write.format("s3commit")
        .option("endpoint", proxy.endpoint)
        .option("fs.s3a.encryption.algorithm", "SSE-KMS")
        .option("fs.s3a.encryption.key", kms_key)
        .mode("overwrite")
        .save(dest.url)
    )
    every_request_carries(proxy, SSE, "aws:kms")
    every_request_carries(proxy, SSE_KMS_KEY, kms_key)
    keys = list_keys(s3, dest.dir)
    assert any(k.endswith(".parquet") for k in keys) and dest.dir + "_SUCCESS" in keys
    for key in keys:
        head = s3.head_object(Bucket=BUCKET, Key=key)
        assert (head.get("ServerSideEncryption"), head.get("SSEKMSKeyId")) == ("aws:kms", kms_key)
    assert success_of(s3, dest)["requestOptions"]["encryption.key"] == kms_key
