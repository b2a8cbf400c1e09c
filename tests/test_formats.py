"""Commit metadata JSON: round trips and the strict validation a tampered pendingset must fail."""

from __future__ import annotations

import json

import pytest

from s3commit_sdk.errors import PendingSetError
from s3commit_sdk.formats import (
    PENDING_VERSION,
    PENDINGSET_VERSION,
    SUCCESS_FILENAMES_CAP,
    SUCCESS_NAME,
    PendingSet,
    PendingUpload,
    parse_success,
    success_document,
)

JOB = "6f1c2a3b-0000-4000-8000-000000000001"
BUCKET = "bucket"
DIR = "t/ds1/"


def upload(key: str = "t/ds1/year=2024/part-00000-x.c000.snappy.parquet", **changes):
    fields = {
        "uri": f"s3://{BUCKET}/{key}",
        "bucket": BUCKET,
        "destinationKey": key,
        "uploadId": "upload-1",
        "etags": ['"0cc175b9c0f1b6a831c399e269772661"', '"92eb5ffee6ae2fec3ad71c777531578f"'],
        "length": 5 * 1024 * 1024 + 17,
        "rows": 42,
        "partition": {"year": "2024"},
        "jobId": JOB,
        "taskId": "attempt_0001_m_000000_0",
        "created": 1_700_000_000_000,
    }
    fields.update(changes)
    return PendingUpload(**fields)


def pendingset(*commits: PendingUpload, **changes) -> PendingSet:
    fields = {
        "jobId": JOB,
        "taskId": "task_0001_m_000000",
        "taskAttemptId": "attempt_0001_m_000000_0",
        "commits": list(commits) if commits else [upload()],
        "iostatistics": {"counters": {"UploadPart": 2}},
    }
    fields.update(changes)
    return PendingSet(**fields)


def load(text: str | bytes, job_id: str = JOB, bucket: str = BUCKET, dir_prefix: str = DIR):
    """What job commit does with a pendingset it reads back: parse, then validate."""
    loaded = PendingSet.from_json(text)
    loaded.validate(job_id, bucket, dir_prefix)
    return loaded


def tampered(mutate) -> str:
    """The JSON of a valid pendingset, edited as a dict by ``mutate``."""
    doc = json.loads(pendingset().to_json())
    mutate(doc)
    return json.dumps(doc)


# -- round trips ------------------------------------------------------------------------------


def test_pendingset_round_trip():
    original = pendingset(
        upload(),
        upload(
            "t/ds1/year=2025/part-00001-x.c000.snappy.parquet",
            uploadId="upload-2",
            etags=['"e1"'],
            length=0,
            rows=0,
            partition={"year": "2025"},
        ),
    )
    text = original.to_json()
    restored = load(text)
    assert restored == original
    assert isinstance(restored.commits[0], PendingUpload)
    assert load(text.encode()) == original  # bytes, as read from S3
    # Byte-stable: a re-serialized pendingset is the same document.
    assert restored.to_json() == text


def test_pendingset_json_uses_hadoop_field_names():
    doc = json.loads(pendingset().to_json())
    assert doc["version"] == PENDINGSET_VERSION
    assert {"jobId", "taskId", "taskAttemptId", "commits", "iostatistics"} <= set(doc)
    commit = doc["commits"][0]
    assert commit["version"] == PENDING_VERSION
    assert {
        "uri",
        "bucket",
        "destinationKey",
        "uploadId",
        "etags",
        "length",
        "created",
        "jobId",
        "taskId",
    } <= set(commit)
    assert commit["destinationKey"] == "t/ds1/year=2024/part-00000-x.c000.snappy.parquet"
    assert commit["etags"] == upload().etags


def test_unicode_keys_round_trip():
    key = "t/ds1/city=Zürich/city2=東京/part-0 with space.parquet"
    original = pendingset(upload(key, partition={"city": "Zürich", "city2": "東京"}))
    assert load(original.to_json()) == original


# -- rejected on load -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "",
        "{",
        '{"jobId": "x"',  # truncated
        "not json",
        "[]",
        "null",
        "42",
        '"a string"',
        "{}",  # no commits
    ],
)
def test_malformed_json_is_rejected(text):
    with pytest.raises(PendingSetError):
        load(text)


@pytest.mark.parametrize(
    "mutate",
    [
        pytest.param(lambda d: d.__setitem__("commits", None), id="commits-null"),
        pytest.param(lambda d: d.__setitem__("commits", [42]), id="commit-not-object"),
        pytest.param(lambda d: d["commits"][0].pop("uploadId"), id="commit-missing-field"),
        pytest.param(lambda d: d.pop("jobId"), id="set-missing-jobId"),
    ],
)
def test_structurally_broken_pendingset_is_rejected(mutate):
    with pytest.raises(PendingSetError):
        load(tampered(mutate))


@pytest.mark.parametrize(
    "mutate",
    [
        pytest.param(lambda d: d.__setitem__("version", 1), id="pendingset-version-1"),
        pytest.param(lambda d: d.__setitem__("version", 99), id="pendingset-version-99"),
        pytest.param(lambda d: d.__setitem__("version", "2"), id="pendingset-version-str"),
        pytest.param(lambda d: d["commits"][0].__setitem__("version", 1), id="pending-version-1"),
    ],
)
def test_unknown_version_is_rejected(mutate):
    with pytest.raises(PendingSetError, match="version"):
        load(tampered(mutate))


def test_wrong_job_id_is_rejected():
    other = "6f1c2a3b-0000-4000-8000-000000000002"
    # The whole pendingset belongs to another job.
    with pytest.raises(PendingSetError, match="job"):
        load(pendingset().to_json(), job_id=other)
    # The set claims this job but one upload inside belongs to another.
    mixed = pendingset(upload(), upload("t/ds1/year=2024/part-2.parquet", jobId=other))
    with pytest.raises(PendingSetError, match="job"):
        load(mixed.to_json())


def test_wrong_bucket_is_rejected():
    with pytest.raises(PendingSetError, match="bucket"):
        load(pendingset(upload(bucket="other-bucket")).to_json())
    with pytest.raises(PendingSetError, match="bucket"):
        load(pendingset().to_json(), bucket="other-bucket")


@pytest.mark.parametrize(
    "key",
    [
        "t/ds10/x",  # sibling prefix: "t/ds10/" starts with "t/ds1"
        "t/ds1x/part-0.parquet",
        "t/ds1",  # the destination itself, no trailing slash
        "t/ds1/",  # the directory marker, not a file under it
        "t/other/part-0.parquet",
        "part-0.parquet",
        "/t/ds1/part-0.parquet",
        "",
    ],
)
def test_key_outside_destination_is_rejected(key):
    with pytest.raises(PendingSetError, match="destination"):
        load(pendingset(upload(key)).to_json())


@pytest.mark.parametrize(
    "key",
    ["t/ds1/../ds10/part-0.parquet", "t/ds1/a/../../ds10/x", "t/ds1/.."],
)
def test_dot_dot_segment_is_rejected(key):
    with pytest.raises(PendingSetError, match=r"\.\."):
        load(pendingset(upload(key)).to_json())


def test_dot_dot_inside_a_name_is_allowed():
    ok = pendingset(upload("t/ds1/a..b/part..0.parquet"))
    assert load(ok.to_json()) == ok


@pytest.mark.parametrize(
    "etags",
    [
        pytest.param([], id="empty-list"),
        pytest.param([""], id="empty-string"),
        pytest.param(['"abc"', ""], id="second-empty"),
        pytest.param([None], id="null"),
        pytest.param([123], id="number"),
        pytest.param("abc", id="not-a-list"),
        pytest.param(None, id="missing"),
    ],
)
def test_bad_etags_are_rejected(etags):
    with pytest.raises(PendingSetError, match="ETag"):
        load(pendingset(upload(etags=etags)).to_json())


@pytest.mark.parametrize(
    "changes",
    [
        pytest.param({"length": -1}, id="negative-length"),
        pytest.param({"length": "10"}, id="string-length"),
        pytest.param({"length": 1.5}, id="float-length"),
        pytest.param({"length": None}, id="null-length"),
        pytest.param({"rows": -1}, id="negative-rows"),
        pytest.param({"uploadId": ""}, id="empty-upload-id"),
    ],
)
def test_bad_fields_are_rejected(changes):
    with pytest.raises(PendingSetError):
        load(pendingset(upload(**changes)).to_json())


def test_duplicate_destination_keys_are_rejected():
    key = "t/ds1/year=2024/part-00000-x.c000.snappy.parquet"
    twice = pendingset(upload(key, uploadId="u1"), upload(key, uploadId="u2"))
    with pytest.raises(PendingSetError, match="two uploads"):
        load(twice.to_json())


# -- _SUCCESS ---------------------------------------------------------------------------------


def success(**extra):
    return success_document(
        committer="partitioned",
        job_id=JOB,
        job_id_source="spark",
        description="test",
        filenames=[f"year=2024/part-{n:05d}.parquet" for n in range(SUCCESS_FILENAMES_CAP + 5)],
        metrics={"CompleteMultipartUpload": 3},
        diagnostics={"conflict_mode": "fail"},
        extra=extra,
    )


def test_parse_success_round_trip():
    doc = success(files=["a", "b"])
    parsed = parse_success(json.dumps(doc).encode())
    assert parsed == doc
    assert parsed["name"] == SUCCESS_NAME
    assert parsed["success"] is True
    assert parsed["jobId"] == JOB
    assert len(parsed["filenames"]) == SUCCESS_FILENAMES_CAP  # Hadoop's cap
    assert parsed["files"] == ["a", "b"]
    assert parsed["iostatistics"]["counters"] == {"CompleteMultipartUpload": 3}


@pytest.mark.parametrize("body", [b"", b"\n", b"  "])
def test_parse_success_zero_byte_marker_is_none(body):
    assert parse_success(body) is None


@pytest.mark.parametrize(
    "doc",
    [
        {"name": "org.apache.hadoop.fs.s3a.commit.files.SuccessData/2", "success": True},
        {"name": "something else"},
        {"success": True},
        [SUCCESS_NAME],
    ],
)
def test_parse_success_rejects_other_documents(doc):
    with pytest.raises(PendingSetError):
        parse_success(json.dumps(doc).encode())


@pytest.mark.parametrize("body", [b"{", b'{"name": "org.apache', b"\xff\xfe garbage"])
def test_parse_success_rejects_truncated_json_with_typed_error(body):
    """A truncated ``_SUCCESS`` is commit metadata that failed validation: a typed error."""
    with pytest.raises(PendingSetError):
        parse_success(body)
