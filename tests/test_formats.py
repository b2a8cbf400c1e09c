"""Commit metadata JSON: round trips and the strict validation a tampered pendingset must fail."""

from __future__ import annotations

import dataclasses
import json

import pytest

from s3commit_sdk.committers.report import build_success
from s3commit_sdk.errors import PendingSetError
from s3commit_sdk.formats import (
    PENDING_VERSION,
    PENDINGSET_VERSION,
    SUCCESS_FILENAMES_CAP,
    SUCCESS_NAME,
    ClassicPayload,
    CommittedFile,
    ManifestDirectory,
    ManifestFile,
    ManifestPayload,
    PendingSet,
    PendingUpload,
    SuccessDocument,
    TaskFile,
    TaskManifest,
    parse_success,
)
from s3commit_sdk.paths import FsLocation
from s3commit_sdk.protocol import JobContext

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


def committed(n: int) -> CommittedFile:
    key = f"{DIR}year=2024/part-{n:05d}-{JOB}.c000.snappy.parquet"
    url, etag, task = f"s3://{BUCKET}/{key}", f'"e{n}"', f"task_{n % 3:05d}"
    return CommittedFile(url, key, 100 + n, n, {"year": "2024"}, etag, task)


def success(files: int = SUCCESS_FILENAMES_CAP + 5, **table) -> SuccessDocument:
    """What the partitioned committer writes for ``files`` files (``table``: a table format's
    fields)."""
    job = JobContext.on_s3(
        f"s3://{BUCKET}/{DIR}", "partitioned", partition_by=("year",), job_id=JOB
    )
    return build_success(
        job,
        "partitioned",
        [committed(n) for n in range(files)],
        ["year=2024"],
        1,
        {"complete_uploads": 0.25, "job_commit": 1.5},
        {"CompleteMultipartUpload": 3},
        task_durations={"task_00000": 2.0},
        retries={"throttled": 1},
        completion_checks={"answered": 3},
        table_fields=table,
    )


def test_parse_success_round_trip():
    doc = success()
    parsed = parse_success(doc.to_json().encode())
    assert parsed == doc
    assert parsed["name"] == SUCCESS_NAME
    assert parsed["success"] is True
    assert parsed["jobId"] == JOB
    assert len(parsed["filenames"]) == SUCCESS_FILENAMES_CAP  # Hadoop's cap
    assert parsed["files"] == [committed(n).to_dict() for n in range(SUCCESS_FILENAMES_CAP + 5)]
    assert parsed["iostatistics"]["counters"]["requests.CompleteMultipartUpload"] == 3


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


def test_success_document_round_trips_its_json_and_keeps_table_fields():
    doc = success(files=3, deltaVersion=4, deltaRemovedFiles=2)
    raw = json.loads(doc.to_json())
    assert list(raw)[:2] == ["name", "timestamp"]  # Hadoop's SuccessData fields first
    assert list(raw)[-2:] == ["deltaVersion", "deltaRemovedFiles"]  # the table's last
    parsed = SuccessDocument.from_dict(raw)
    assert parsed.to_dict() == raw == dict(parsed)
    assert parsed.table == {"deltaVersion": 4, "deltaRemovedFiles": 2}
    assert parsed.files == [committed(n) for n in range(3)]  # paths rebuilt from destination
    assert parsed.job_id == JOB and parsed.conflict_mode == "append" and parsed.rows == 3
    assert (parsed.bytes, parsed.bytes_uploaded) == (303, 303)


def test_success_document_mapping_is_a_copy_of_the_json_view():
    doc = success(files=2)
    doc["files"][0]["rows"] = 99
    doc["requests"]["PutObject"] = 7
    assert doc.files[0].rows == 0 and "PutObject" not in doc.requests
    assert doc.get("deltaVersion") is None and "deltaVersion" not in doc
    with pytest.raises(KeyError):
        doc["nothing"]


def test_table_fields_cannot_replace_success_fields():
    with pytest.raises(ValueError, match="rows"):
        success(files=1, rows=5)


def test_success_document_of_a_rename_committer_on_file():
    job = JobContext.on_s3(f"s3://{BUCKET}/{DIR}", "manifest", job_id=JOB)
    job = dataclasses.replace(job, location=FsLocation("file", "/data/out"))
    file = CommittedFile(
        "file:///data/out/part-0.parquet", "/data/out/part-0.parquet", 5, 1, {}, ""
    )
    doc = build_success(job, "manifest", [file], [""], 0, {}, {"rename": 1}, uploaded=False)
    parsed = parse_success(doc.to_json().encode())
    assert parsed == doc and parsed.files == [file] and parsed.bytes_uploaded == 0
    assert parsed["filenames"] == ["/data/out/part-0.parquet"] and parsed.partitions == []


def _without(key):
    return lambda raw: raw.pop(key)


def _set(key, value):
    return lambda raw: raw.__setitem__(key, value)


def _set_in_file(key, value):
    return lambda raw: raw["files"][0].__setitem__(key, value)


@pytest.mark.parametrize(
    "mutate",
    [
        _without("jobId"),
        _without("files"),
        _without("taskDurations"),
        _set("rows", -1),
        _set("rows", "3"),
        _set("bytes", True),  # a bool is not a count
        _set("success", "yes"),
        _set("files", {"key": "x"}),
        _set("partitionBy", "year"),
        _set("durations", {"job_commit": "slow"}),
        _set("requests", {"PutObject": 1.5}),
        _set("diagnostics", {"destination": None}),
        _set("destination", "ftp://host/x"),
        _set("destination", 42),
        _set_in_file("size", -5),
        _set_in_file("rows", None),
        _set_in_file("key", ""),
        _set_in_file("partition", {"year": 2024}),
        _set_in_file("etag", None),
        _set_in_file("path", "s3://elsewhere/x"),  # entries carry no path: an unknown key
        lambda raw: raw["files"][0].pop("task"),
        lambda raw: raw["files"].append("part-00000.parquet"),
    ],
)
def test_malformed_success_is_a_typed_error(mutate):
    raw = json.loads(success(files=2).to_json())
    mutate(raw)
    with pytest.raises(PendingSetError):
        parse_success(json.dumps(raw).encode())


# -- task manifests and the rename committers' task payloads ----------------------------------


def manifest(**changes) -> TaskManifest:
    fields = dict(
        job_id=JOB,
        task_id="task_00001",
        attempt_id="task_00001_0",
        attempt_dir="/data/out dir/_temporary/manifest_x/00/tasks/task_00001_0",
        files=[
            ManifestFile("/tmp/a b/day=x%y/part-1.parquet", "/out/day=x%y/part-1.parquet", 9, 3),
            ManifestFile("/tmp/c/part-2.parquet", "/out/part-2.parquet", 4, 1, {"day": None}),
        ],
        directories=[ManifestDirectory("/out/day=x%y", 3, 1)],
        counters={"rename": 2},
    )
    fields.update(changes)
    return TaskManifest(**fields)


def test_task_manifest_round_trip_encodes_uris_as_hadoop_does():
    saved = manifest().to_json()
    doc = json.loads(saved)
    assert doc["type"].endswith("TaskManifest/1") and doc["taskAttemptID"] == "task_00001_0"
    assert doc["files"][0] == {
        "s": "/tmp/a%20b/day%3Dx%25y/part-1.parquet",
        "d": "/out/day%3Dx%25y/part-1.parquet",
        "z": 9,
        "e": None,
    }
    assert doc["extraData"]["/out/day%3Dx%25y/part-1.parquet"] == {"rows": 3, "partition": {}}
    assert doc["iostatistics"]["counters"] == {"rename": 2}
    assert TaskManifest.from_json(saved.encode(), JOB) == manifest()


@pytest.mark.parametrize(
    "mutate",
    [
        lambda d: d.__setitem__("jobId", "another-job"),
        lambda d: d.__setitem__("version", 2),
        lambda d: d.__setitem__("type", "x"),
        lambda d: d.pop("files"),
        lambda d: d["files"][0].pop("z"),
        lambda d: d["files"][0].__setitem__("z", -1),
        lambda d: d["files"][1].__setitem__("d", d["files"][0]["d"]),  # one target twice
        lambda d: d["directories"][0].__setitem__("l", "1"),
        lambda d: d.__setitem__("extraData", []),
        lambda d: d["iostatistics"].__setitem__("counters", {"rename": "2"}),
    ],
)
def test_malformed_task_manifest_is_a_typed_error(mutate):
    doc = json.loads(manifest().to_json())
    mutate(doc)
    with pytest.raises(PendingSetError):
        TaskManifest.from_json(json.dumps(doc).encode(), JOB)


def test_rename_committer_payloads_round_trip():
    files = [TaskFile("day=a/part-0.parquet", 3, 10, {"day": "a"}), TaskFile("p.csv", 0, 0, {})]
    classic = ClassicPayload(files, {"rename": 4})
    assert ClassicPayload.from_dict(json.loads(json.dumps(classic.to_dict()))) == classic
    payload = ManifestPayload("/out/_temporary/manifest_x/00/manifests/t_0-manifest.json")
    assert ManifestPayload.from_dict(payload.to_dict()) == payload


@pytest.mark.parametrize(
    "payload",
    [
        {"files": [["a", 1, 2]], "requests": {}},
        {"files": [["a", -1, 2, {}]], "requests": {}},
        {"files": [["", 1, 2, {}]], "requests": {}},
        {"files": [], "requests": {"rename": "1"}},
        {"files": []},
        {"manifest": "/m.json"},
        [],
    ],
)
def test_malformed_classic_payload_is_a_typed_error(payload):
    with pytest.raises(PendingSetError):
        ClassicPayload.from_dict(payload)


@pytest.mark.parametrize("payload", [{}, {"manifest": 3}, {"manifest": "m", "x": 1}, ["m"]])
def test_malformed_manifest_payload_is_a_typed_error(payload):
    with pytest.raises(PendingSetError):
        ManifestPayload.from_dict(payload)
