"""Bad input raises a typed error before anything is uploaded; store errors name the bucket."""

from __future__ import annotations

import typing

import pandas as pd
import pytest
from conftest import BUCKET, list_keys, pending_uploads

import s3commit_sdk
from s3commit_sdk import (
    InvalidArgumentError,
    InvalidPathError,
    S3CommitError,
    StoreError,
    UnknownOptionError,
    write_committed,
)
from s3commit_sdk.options import (
    COMMITTER_NAMES,
    CONFLICT_MODES,
    OUTPUT_FORMATS,
    CommitterName,
    ConflictMode,
    OutputFormat,
)
from s3commit_sdk.testing.sandbox import S3Sandbox

DATA = pd.DataFrame({"id": [1, 2, 3], "day": ["a", "b", "b"]})


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        ({"committer": "rename"}, InvalidArgumentError, "unknown committer"),
        ({"options": {"no.such.option": 1}}, UnknownOptionError, "no.such.option"),
        ({"options": {"fs.s3a.committer.threadz": 1}}, UnknownOptionError, "threadz"),
        ({"options": {"threads": "many"}}, InvalidArgumentError, "integer"),
        ({"options": {"multipart.size": "1M"}}, InvalidArgumentError, "5 MiB"),
        ({"options": {"abort.pending.uploads": "some"}}, InvalidArgumentError, "job, all"),
        ({"conflict_mode": "overwrite"}, InvalidArgumentError, "conflict_mode"),
        (
            {"conflict_mode": "fail", "options": {"staging.conflict-mode": "replace"}},
            InvalidArgumentError,
            "contradicts",
        ),
        ({"partition_by": ["missing"]}, InvalidArgumentError, "missing"),
        ({"partition_by": ["id", "day"]}, InvalidArgumentError, "every column"),
        ({"partition_by": ["day", "day"]}, InvalidArgumentError, "twice"),
        ({"format": "avro"}, InvalidArgumentError, "unknown format"),
        ({"options": {None: 1}}, UnknownOptionError, "None"),
        ({"options": [("threads", 2)]}, InvalidArgumentError, "options must be a mapping"),
        ({"committer": ["x"]}, InvalidArgumentError, "unknown committer"),
        ({"partition_by": 123}, InvalidArgumentError, "partition_by"),
        ({"options": {"endpoint": "not a url"}}, InvalidArgumentError, "http"),
        ({"options": {"region": "bad region!"}}, InvalidArgumentError, "region"),
        ({"path": "s3://B_AD/x"}, InvalidPathError, "bucket name"),
        ({"path": "s3://bkt:9000/x"}, InvalidPathError, "endpoint"),
        ({"options": {"multipart.size": "1T"}}, InvalidArgumentError, "5 GiB"),
        ({"options": {"threads": 1.5}}, InvalidArgumentError, "integer"),
        ({"options": {"threads": True}}, InvalidArgumentError, "integer"),
        (
            {"options": {"threads": 2, "fs.s3a.committer.threads": 3}},
            InvalidArgumentError,
            "both",
        ),
        (
            {"conflict_mode": "append", "options": {"staging.unique-filenames": False}},
            InvalidArgumentError,
            "unique-filenames",
        ),
        ({"committer": "magik"}, InvalidArgumentError, "did you mean 'magic'"),
        ({"committer": "Partitioned"}, InvalidArgumentError, "did you mean 'partitioned'"),
        ({"format": "parket"}, InvalidArgumentError, "did you mean 'parquet'"),
        ({"conflict_mode": "apend"}, InvalidArgumentError, "did you mean 'append'"),
        ({"conflict_mode": "overwrite"}, InvalidArgumentError, "did you mean 'replace'"),
        ({"options": {"threadz": 1}}, UnknownOptionError, "did you mean 'threads'"),
        (
            {"options": {"fs.s3a.committer.multipart.sise": "5M"}},
            UnknownOptionError,
            "did you mean 'fs.s3a.committer.multipart.size'",
        ),
        ({"options": {"retry.mode": "adaptve"}}, InvalidArgumentError, "did you mean 'adaptive'"),
        (
            {"committer": "magic", "options": {"algorithm.version": 2}},
            InvalidArgumentError,
            "option 'algorithm.version' applies to committer file only: committer 'magic' would",
        ),
        (
            {"committer": "partitioned", "options": {"success.json": True}},
            InvalidArgumentError,
            "committer 'partitioned' would ignore it",
        ),
        (
            {"committer": "manifest", "options": {"threads": 2, "exclusive.commit": "unchecked"}},
            InvalidArgumentError,
            "option 'exclusive.commit' applies to committers directory, partitioned, magic only",
        ),
    ],
)
def test_bad_arguments_raise_value_errors_and_upload_nothing(s3, dest, kwargs, error, words):
    arguments = dict(kwargs)
    with pytest.raises(error, match=words) as info:
        write_committed(DATA, arguments.pop("path", dest.url), **arguments)
    assert isinstance(info.value, ValueError) and isinstance(info.value, S3CommitError)
    assert list_keys(s3, dest.dir) == [] and pending_uploads(s3, dest.dir) == []


@pytest.mark.parametrize(
    "path",
    [
        "s3://",
        "s3:///prefix",
        "bucket/prefix",
        "/tmp/out",
        "gs://b/x",
        "s3://b/a//c",
        "",
        "s3://b/nul\x00here",  # S3 keys cannot carry NUL
        "s3://b/" + "k" * 1000,  # no room left below it for file names (keys: 1024 bytes)
    ],
)
def test_bad_paths(s3_server, path):
    with pytest.raises(InvalidPathError) as info:
        write_committed(DATA, path)
    assert isinstance(info.value, ValueError)


def test_not_a_dataframe(s3, dest):
    with pytest.raises(InvalidArgumentError, match="cannot write"):
        write_committed(["not", "a", "frame"], dest.url)
    assert list_keys(s3, dest.dir) == []


def test_spark_argument_errors_raise_before_any_task(spark, s3, dest):
    df = spark.createDataFrame(DATA)
    with pytest.raises(InvalidArgumentError, match="missing"):
        write_committed(df, dest.url, partition_by=["missing"])
    assert list_keys(s3, dest.dir) == []


@pytest.mark.parametrize("options", [{"tasks": 2}, {"task.max-attempts": 3}])
def test_local_only_options_are_refused_with_spark(spark, s3, dest, options):
    """Spark decides tasks (partitions) and retries (spark.task.maxFailures) itself."""
    with pytest.raises(InvalidArgumentError, match="Spark"):
        write_committed(spark.createDataFrame(DATA), dest.url, options=options)
    assert list_keys(s3, dest.dir) == [] and pending_uploads(s3, dest.dir) == []


def test_arguments_after_the_path_are_keyword_only(s3, dest):
    """``write_committed(df, path, "magic")`` would read as a committer or, one day, as
    another argument: refused by Python before anything runs."""
    with pytest.raises(TypeError, match="positional"):
        write_committed(DATA, dest.url, "magic")
    assert list_keys(s3, dest.dir) == []


def test_the_signature_carries_the_choices_as_literal_types():
    hints = typing.get_type_hints(write_committed)
    assert hints["committer"] == CommitterName
    assert typing.get_args(hints["committer"]) == COMMITTER_NAMES
    assert hints["conflict_mode"] == ConflictMode | None
    assert hints["format"] == OutputFormat
    assert typing.get_args(OutputFormat) == OUTPUT_FORMATS
    assert typing.get_args(ConflictMode) == CONFLICT_MODES


def test_options_of_one_committer_kind_serve_all_of_it(s3, dest, tmp_path):
    """One options mapping serves the three S3 committers (as one fs.s3a.committer.*
    configuration serves Hadoop's): ``buffer.dir`` with magic, ``magic.cleanup`` with
    directory are accepted; the committer they do not concern leaves them."""
    shared = {"buffer.dir": str(tmp_path / "buffer"), "magic.cleanup": True, "tasks": 1}
    for committer in ("directory", "magic"):
        result = write_committed(
            DATA, f"{dest.url}/{committer}", committer=committer, options=shared, progress=False
        )
        assert result.rows == 3
    assert pending_uploads(s3, dest.dir) == []


def test_missing_bucket_names_the_bucket(s3_server, s3):
    with pytest.raises(StoreError, match="no-such-bucket-xyz") as info:
        write_committed(DATA, "s3://no-such-bucket-xyz/out")
    assert "does not exist" in str(info.value)
    assert isinstance(info.value, S3CommitError) and not isinstance(info.value, ValueError)


def test_bad_credentials_name_the_bucket_and_the_cause(s3_server):
    """A second moto server that enforces authentication refuses unknown keys."""
    with S3Sandbox(
        bucket=None, export=False, extra_env={"INITIAL_NO_AUTH_ACTION_COUNT": "0"}
    ) as secured:
        options = {"endpoint": secured.endpoint, "access.key": "nobody", "secret.key": "wrong"}
        with pytest.raises(StoreError, match="locked-bucket") as info:
            write_committed(DATA, "s3://locked-bucket/out", options=options)
    assert "AWS_ACCESS_KEY_ID" in str(info.value)


def test_unreachable_endpoint_is_a_store_error(s3_server):
    options = {"endpoint": "http://127.0.0.1:9", "retry.max-attempts": 1}
    with pytest.raises(StoreError, match=BUCKET):
        write_committed(DATA, f"s3://{BUCKET}/x", options=options)


def test_errors_exported_from_package_top_level():
    for name in ("ConflictError", "CommitError", "InvalidPathError", "ConcurrentCommitError"):
        assert issubclass(getattr(s3commit_sdk, name), S3CommitError)
