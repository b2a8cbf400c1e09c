"""The option registry: one declaration per option, read by every place that knows options.

No S3 server is needed: jobs are built (``new_job``, the data source's ``write_job``) and
checked, never run.
"""

from __future__ import annotations

import dataclasses
import re
import typing
from pathlib import Path

import pyarrow as pa
import pytest

from s3commit_sdk import InvalidArgumentError, UnknownOptionError
from s3commit_sdk.api import new_job
from s3commit_sdk.committers import COMMITTERS
from s3commit_sdk.datasource import write_job
from s3commit_sdk.options import (
    COMMITTER_NAMES,
    ENGINE_INPUT,
    ENGINES,
    OPTION_NAMES,
    OUTPUT_FORMATS,
    REGISTRY,
    SPARK_CONF_PREFIX,
    CommitOptions,
    CommitterName,
    RenameCommitterName,
    S3CommitterName,
    option_spec,
    reference_table,
    resolve_options,
    spark_conf_defaults,
)
from s3commit_sdk.writers import FORMATS

OPTIONS_PAGE = Path(__file__).resolve().parents[1] / "docs" / "reference" / "options.md"
SCHEMA = pa.schema([("id", pa.int64()), ("day", pa.string())])
URL = "s3://bucket/table"
#: a valid value of the options whose default is none ("not set") or not one a user may give
SAMPLES = {
    "staging.conflict-mode": "append",
    "endpoint": "http://127.0.0.1:9000",
    "tasks": 2,
    "encryption.algorithm": "SSE-KMS",
    "create.storage.class": "standard_ia",
    "acl.default": "BucketOwnerFullControl",
    "checksum.algorithm": "crc32c",
    "iceberg.table": "analytics.events",
}


def job(committer: str = "partitioned", options=None, conf=None, **kwargs):
    return new_job(
        URL,
        committer=committer,
        partition_by=None,
        conflict_mode=kwargs.pop("conflict_mode", None),
        format=kwargs.pop("format", "parquet"),
        options=options,
        schema=SCHEMA,
        conf=conf,
        **kwargs,
    )


def test_every_field_of_the_resolved_options_is_one_option():
    attributes = [spec.attribute for spec in REGISTRY]
    assert sorted(attributes) == sorted(f.name for f in dataclasses.fields(CommitOptions))
    assert len(set(attributes)) == len(attributes)
    assert len(set(OPTION_NAMES)) == len(REGISTRY)


def test_the_names_a_write_takes_are_declared_once():
    """The Literal types are the committers, formats and engines the code implements."""
    assert typing.get_args(CommitterName) == (
        *typing.get_args(S3CommitterName),
        *typing.get_args(RenameCommitterName),
    )
    assert tuple(COMMITTERS) == COMMITTER_NAMES
    assert FORMATS == OUTPUT_FORMATS
    assert tuple(ENGINE_INPUT) == ENGINES
    for spec in REGISTRY:
        assert set(spec.committers) <= set(COMMITTER_NAMES), spec.name
        assert set(spec.formats) <= set(OUTPUT_FORMATS), spec.name
        assert set(spec.engines) <= set(ENGINES), spec.name


@pytest.mark.parametrize("spec", REGISTRY, ids=lambda spec: spec.name)
def test_every_spelling_of_an_option_resolves_alike(spec):
    value = SAMPLES.get(spec.name, spec.default if spec.default is not None else "x")
    if spec.name in ("access.key", "secret.key"):  # they go together
        pair = {"access.key": "a", "secret.key": "b"}
        prefixed = {f"fs.s3a.committer.{k}": v for k, v in pair.items()}
        assert resolve_options(pair) == resolve_options(prefixed)
        return
    short = resolve_options({spec.name: value})
    assert short == resolve_options({spec.hadoop_name: value})
    assert getattr(short, spec.attribute) == spec.parse(spec.name, value)
    assert option_spec(spec.hadoop_name) is option_spec(spec.name) is spec


def test_shown_defaults_are_the_defaults():
    """Where the table shows a default as a user writes it, it parses to the real default."""
    for name in ("multipart.size", "retry.throttle.interval", "retry.throttle.max-duration"):
        spec = option_spec(name)
        assert spec.parse(name, spec.shown_default.strip("`")) == spec.default
    assert option_spec("staging.conflict-mode").shown_default == "`fail`"
    assert job().conflict_mode == "fail"


def test_spark_conf_defaults_are_read_for_every_option_and_nothing_else():
    conf = {spec.spark_conf_key: "v" for spec in REGISTRY}
    conf[SPARK_CONF_PREFIX + "name"] = "magic"  # Hadoop's own key, not ours
    conf["spark.hadoop.fs.s3a.endpoint"] = "http://elsewhere:9000"  # S3A's, not ours
    assert spark_conf_defaults(conf) == {spec.name: "v" for spec in REGISTRY}


def test_public_options_leave_out_every_secret():
    sse_c_key = "q83vEjRWeJCrze8SNFZ4kKvN7xI0VniQq83vEjRWeJA="
    options = resolve_options(
        {
            "access.key": "AKIDSECRET1",
            "secret.key": "s3cr3t-value",
            "encryption.algorithm": "SSE-C",
            "encryption.key": sse_c_key,
        }
    )
    public = options.public()
    secrets = {spec.attribute for spec in REGISTRY if spec.secret}
    assert secrets == {
        "access_key",
        "secret_key",
        "session_token",
        "encryption_key",
        "iceberg_catalog_uri",  # a database URI may hold its password
        "iceberg_catalog",  # catalog properties may hold tokens
    }
    assert set(public) == {spec.attribute for spec in REGISTRY} - secrets
    for secret in ("AKIDSECRET1", "s3cr3t-value", sse_c_key):
        assert secret not in repr(public) and secret not in repr(options)


@pytest.mark.parametrize(
    ("name", "suggestion"),
    [
        ("thread", "threads"),
        ("multipart-size", "multipart.size"),
        ("staging.conflict_mode", "staging.conflict-mode"),
        ("fs.s3a.committer.magic.clean", "fs.s3a.committer.magic.cleanup"),
        ("max_records_per_files", "max_records_per_file"),
    ],
)
def test_unknown_options_name_the_nearest(name, suggestion):
    with pytest.raises(UnknownOptionError, match=f"did you mean '{suggestion}'") as info:
        resolve_options({name: "1"})
    assert "known options: abort.pending.uploads" in str(info.value)


def test_far_off_names_get_no_suggestion():
    with pytest.raises(UnknownOptionError) as info:
        resolve_options({"zzzzzz": 1})
    assert "did you mean" not in str(info.value)
    with pytest.raises(InvalidArgumentError) as info:
        job(committer="zzzzzz")
    assert "did you mean" not in str(info.value) and "use one of directory" in str(info.value)


@pytest.mark.parametrize(
    ("committer", "options"),
    [
        ("magic", {"algorithm.version": 1}),  # the default value too: magic would still ignore it
        ("directory", {"fs.s3a.committer.success.json": "true"}),
        ("file", {"upload.threads": 2}),
        ("manifest", {"buffer.dir": "/tmp/x"}),
        ("file", {"magic.cleanup": False}),
    ],
)
def test_an_option_no_committer_of_the_kind_reads_is_refused(committer, options):
    name = next(iter(options))
    with pytest.raises(InvalidArgumentError, match=f"option '{name}' applies to committer"):
        job(committer=committer, options=options)


def test_several_ignored_options_are_named_together():
    with pytest.raises(InvalidArgumentError) as info:
        job(committer="magic", options={"algorithm.version": 2, "success.json": True})
    assert "'algorithm.version'" in str(info.value) and "'success.json'" in str(info.value)


def test_options_for_pandas_input_are_refused_with_spark_but_not_as_conf_defaults():
    """Spark conf defaults serve every write of the session: each write takes those that
    apply to it, and none is refused."""
    with pytest.raises(InvalidArgumentError, match="Spark decides the tasks"):
        job(options={"tasks": 2}, conf={})
    conf = {SPARK_CONF_PREFIX + "tasks": "2", SPARK_CONF_PREFIX + "algorithm.version": "2"}
    built = job(committer="magic", conf=conf)
    assert built.options.tasks == 2 and built.options.algorithm_version == 2
    assert job(options={"tasks": 2}).options.tasks == 2  # pandas / Arrow input


def test_the_data_source_reads_options_from_the_registry():
    """The save mode is the default conflict mode; the option, in either spelling, wins; an
    option the write would ignore is refused as ``write_committed`` refuses it."""
    assert write_job({"path": URL}, SCHEMA, overwrite=True).conflict_mode == "replace"
    assert write_job({"path": URL}, SCHEMA, overwrite=False).conflict_mode == "append"
    for name in ("staging.conflict-mode", "fs.s3a.committer.staging.conflict-mode"):
        given = {"path": URL, name: "fail"}
        assert write_job(given, SCHEMA, overwrite=True).conflict_mode == "fail"
    with pytest.raises(InvalidArgumentError, match="committer 'magic' would ignore it"):
        write_job({"path": URL, "committer": "magic", "success.json": "true"}, SCHEMA, False)
    with pytest.raises(InvalidArgumentError, match="Spark decides"):
        write_job({"path": URL, "task.max-attempts": "2"}, SCHEMA, False)
    with pytest.raises(UnknownOptionError, match="did you mean 'threads'"):
        write_job({"path": URL, "treads": "2"}, SCHEMA, False)


def test_the_reference_table_lists_every_option_once():
    table = reference_table()
    rows = table.splitlines()[2:]
    assert [re.match(r"\| `([^`]+)` \|", row)[1] for row in rows] == [s.name for s in REGISTRY]
    for spec, row in zip(REGISTRY, rows, strict=True):
        assert f"`{spec.hadoop_name}`" in row and spec.doc.replace("|", "\\|") in row
    assert "| `tasks` | `fs.s3a.committer.tasks` | pandas / Arrow input | one per core |" in table
    assert "| `magic.cleanup` | `fs.s3a.committer.magic.cleanup` | committer magic |" in table


def test_the_options_page_shows_the_reference_table():
    """The docs' options page is built with ``reference_table()``'s output (the marker its MkDocs
    hook replaces; tests/test_docs.py checks the built page), so it cannot drift from the code."""
    assert "<!-- generated: options -->" in OPTIONS_PAGE.read_text()
    assert all(spec.hadoop_name in reference_table() for spec in REGISTRY)
