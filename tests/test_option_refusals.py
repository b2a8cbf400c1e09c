"""Options a write cannot use are refused with ``InvalidOptionError`` before anything is
uploaded: a ``buffer.dir`` no file can be staged in, a blank value, an option the chosen
committer ignores. Through ``write_committed`` (pandas, classic Spark), the data source
(``df.write.format("s3commit")``); on Spark Connect in test_error_envelope (one Connect
server for the error tests).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest
from conftest import list_keys, pending_uploads
from test_datasource import Native

from s3commit_sdk import InvalidArgumentError, register, write_committed
from s3commit_sdk.api import new_job
from s3commit_sdk.datasource import write_job
from s3commit_sdk.errors import InvalidOptionError, from_spark

DATA = pd.DataFrame({"id": range(6), "day": ["a", "b"] * 3})
SCHEMA = pa.schema([("id", pa.int64()), ("day", pa.string())])
#: a directory that exists and in which no one, root included, can create a file
UNWRITABLE = "/proc/self"


def bad_buffer_dirs(tmp_path: Path) -> dict[str, tuple[str, str]]:
    """name -> (buffer.dir, the reason the error gives)."""
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    return {
        "a file": (str(a_file), "not a directory"),
        "missing under a file": (str(a_file / "sub"), "Not a directory"),
        "not writable": (UNWRITABLE, ""),
    }


def assert_nothing_written(s3, dest) -> None:
    assert list_keys(s3, dest.dir) == [] and pending_uploads(s3, dest.dir) == []


# -- buffer.dir -----------------------------------------------------------------------------------
@pytest.mark.parametrize("case", ["a file", "missing under a file", "not writable"])
@pytest.mark.parametrize("committer", ["directory", "partitioned"])
def test_a_buffer_dir_no_file_can_be_staged_in_is_refused(s3, dest, tmp_path, committer, case):
    path, reason = bad_buffer_dirs(tmp_path)[case]
    with pytest.raises(InvalidOptionError, match=r"option 'buffer\.dir' is") as refused:
        write_committed(
            DATA,
            dest.url,
            committer=committer,
            partition_by=["day"],
            options={"buffer.dir": path},
            progress=False,
        )
    error = refused.value
    assert error.option == "buffer.dir" and isinstance(error, InvalidArgumentError)
    assert repr(path) in str(error) and reason in str(error)
    assert "Nothing was uploaded" in str(error)
    assert_nothing_written(s3, dest)


def test_a_missing_buffer_dir_that_can_be_created_is_created(s3, dest, tmp_path):
    buffer = tmp_path / "new" / "buffer"
    result = write_committed(
        DATA, dest.url, committer="directory", options={"buffer.dir": str(buffer)}, progress=False
    )
    assert result.rows == 6 and buffer.is_dir() and list(buffer.iterdir()) == []
    assert (buffer.stat().st_mode & 0o777) == 0o700


def test_magic_stages_nothing_locally_and_leaves_buffer_dir_unchecked(s3, dest, tmp_path):
    """One options mapping serves the three S3 committers: magic ignores ``buffer.dir``."""
    path, _ = bad_buffer_dirs(tmp_path)["a file"]
    result = write_committed(
        DATA, dest.url, committer="magic", options={"buffer.dir": path}, progress=False
    )
    assert result.rows == 6


def test_spark_write_committed_refuses_a_bad_buffer_dir_on_the_driver(spark, s3, dest, tmp_path):
    path, reason = bad_buffer_dirs(tmp_path)["a file"]
    with pytest.raises(InvalidOptionError, match=reason) as refused:
        write_committed(
            spark.createDataFrame(DATA), dest.url, options={"buffer.dir": path}, progress=False
        )
    assert refused.value.option == "buffer.dir"
    assert_nothing_written(s3, dest)


# -- the data source on classic Spark ------------------------------------------------------------
@pytest.fixture
def native(spark, s3_server):
    register(spark)
    return Native(spark, s3_server)


def refused_by_spark(native, dest, **options: str) -> InvalidOptionError:
    with pytest.raises(Exception) as raised:  # Spark's own class; ours inside it
        native.save(native.spark.createDataFrame(DATA), dest.url, **options)
    typed = from_spark(raised.value)
    assert isinstance(typed, InvalidOptionError), raised.value
    return typed


def test_the_data_source_refuses_what_it_would_ignore_or_could_not_use(native, s3, dest, tmp_path):
    path, reason = bad_buffer_dirs(tmp_path)["a file"]
    error = refused_by_spark(native, dest, committer="partitioned", **{"buffer.dir": path})
    assert error.option == "buffer.dir" and reason in str(error)
    error = refused_by_spark(native, dest, partition_by=" , ")
    assert error.option == "partition_by" and "blank column" in str(error)
    assert "id, day" in str(error)  # the columns it could have named
    error = refused_by_spark(
        native, dest, committer="partitioned", partition_by="day", **{"algorithm.version": "2"}
    )
    assert error.option == "algorithm.version"
    assert "committer 'partitioned' would ignore it: leave it out, or use the committer file" in (
        str(error)
    )
    assert_nothing_written(s3, dest)


# -- blank values and names ----------------------------------------------------------------------
@pytest.mark.parametrize(
    "options",
    [
        {"profile": " "},
        {"buffer.dir": ""},
        {"access.key": "", "secret.key": ""},
        {"session.token": "  "},
        {"fs.s3a.committer.profile": None},
    ],
    ids=["profile", "buffer.dir", "keys", "session.token", "hadoop-name-none"],
)
def test_a_blank_option_value_is_refused_not_taken_as_unset(s3, dest, options):
    name = next(iter(options))
    with pytest.raises(InvalidOptionError, match=f"option '{name}' is blank") as refused:
        write_committed(DATA, dest.url, options=options, progress=False)
    assert refused.value.option == name
    assert_nothing_written(s3, dest)


@pytest.mark.parametrize("text", [" , ", "", "day,", ",day", "day, ,id"])
def test_the_data_source_refuses_a_blank_partition_column(text):
    with pytest.raises(InvalidOptionError, match="names a blank column") as refused:
        write_job({"path": "s3://b/t", "partition_by": text}, SCHEMA, overwrite=False)
    assert refused.value.option == "partition_by"


def test_the_data_source_refuses_a_blank_credentials_provider():
    with pytest.raises(InvalidOptionError, match="'credentials_provider' is blank"):
        write_job({"path": "s3://b/t", "credentials_provider": " "}, SCHEMA, overwrite=False)


def test_write_committed_refuses_a_blank_partition_column(s3, dest):
    with pytest.raises(InvalidArgumentError, match="invalid partition column name ' '"):
        write_committed(DATA, dest.url, partition_by=[" "], progress=False)
    assert_nothing_written(s3, dest)


# -- options the chosen committer ignores --------------------------------------------------------
def job(committer: str, options: dict):
    return new_job(
        "s3://b/t",
        committer=committer,
        partition_by=None,
        conflict_mode=None,
        format="parquet",
        options=options,
        schema=SCHEMA,
        conf=None,
    )


@pytest.mark.parametrize(
    ("committer", "options", "reader"),
    [
        ("partitioned", {"algorithm.version": 2}, "committer file"),
        ("directory", {"fs.s3a.committer.algorithm.version": "1"}, "committer file"),
        ("manifest", {"algorithm.version": 2}, "committer file"),
        ("manifest", {"success.json": True}, "committer file"),
        ("file", {"validate.output": True}, "committers directory, partitioned, magic, manifest"),
        ("manifest", {"buffer.dir": "/tmp"}, "committers directory, partitioned"),
    ],
)
def test_an_option_the_committer_ignores_is_refused_naming_who_reads_it(committer, options, reader):
    """The S3 committers share their options (one ``fs.s3a.committer.*`` configuration);
    each rename committer reads only its own."""
    name = next(iter(options))
    with pytest.raises(InvalidOptionError) as refused:
        job(committer, options)
    assert refused.value.option == name
    assert f"committer {committer!r} would ignore it: leave it out, or use the {reader}" in str(
        refused.value
    )


def test_partitioned_refuses_algorithm_version_before_any_upload(s3, dest):
    with pytest.raises(InvalidOptionError, match=r"'algorithm\.version' applies to committer file"):
        write_committed(
            DATA,
            dest.url,
            committer="partitioned",
            partition_by=["day"],
            options={"algorithm.version": 2},
            progress=False,
        )
    assert_nothing_written(s3, dest)


def test_every_refused_option_is_named_in_the_option_field():
    with pytest.raises(InvalidOptionError) as refused:
        job("manifest", {"algorithm.version": 2, "success.json": True})
    assert refused.value.option == "algorithm.version, success.json"


@pytest.mark.parametrize("mode", ["replace", "fail"])
def test_plain_file_names_are_refused_for_a_delta_table(s3, dest, mode):
    """Replaced files stay named by the table's older versions: a replace writing the same
    plain names would overwrite them (time travel to version 0 read version 1's rows)."""
    with pytest.raises(InvalidOptionError, match="breaking time travel") as refused:
        write_committed(
            DATA,
            dest.url,
            format="delta",
            partition_by=["day"],
            conflict_mode=mode,
            options={"staging.unique-filenames": False},
            progress=False,
        )
    assert refused.value.option == "staging.unique-filenames"
    assert_nothing_written(s3, dest)
