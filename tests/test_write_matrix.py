"""Every committer x conflict mode, on Spark and on the in-process engine."""

from __future__ import annotations

import pandas as pd
import pytest
from conftest import BUCKET, list_keys, pending_uploads, read_back, visible_keys

from s3commit_sdk import ConflictError, write_committed

COLUMNS = ["id", "name", "day"]


def frame(day_rows: dict[str, int], start: int) -> pd.DataFrame:
    rows, n = [], start
    for day, count in day_rows.items():
        for _ in range(count):
            rows.append((n, f"name-{n}", day))
            n += 1
    return pd.DataFrame(rows, columns=COLUMNS)


FIRST = frame({"d1": 30, "d2": 20}, 0)
SECOND = frame({"d2": 15, "d3": 10}, 1000)


def rows(df: pd.DataFrame) -> list[tuple]:
    return sorted(tuple(str(v) for v in r) for r in df[sorted(COLUMNS)].itertuples(index=False))


def write(engine, spark, df, dest, **kwargs):
    data = spark.createDataFrame(df).repartition(3) if engine == "spark" else df
    return write_committed(data, dest.url, partition_by=["day"], **kwargs)


def etags(s3, dest) -> dict[str, str]:
    return {k: s3.head_object(Bucket=BUCKET, Key=k)["ETag"] for k in visible_keys(s3, dest.dir)}


@pytest.fixture(params=["local", pytest.param("spark", marks=pytest.mark.spark)])
def engine(request):
    return request.param


@pytest.fixture
def spark_or_none(engine, request):
    return request.getfixturevalue("spark") if engine == "spark" else None


MODES = ("append", "replace")
COMMITTERS = ("directory", "partitioned", "magic")
EXPECTED = {
    ("directory", "append"): rows(pd.concat([FIRST, SECOND])),
    ("directory", "replace"): rows(SECOND),
    ("partitioned", "append"): rows(pd.concat([FIRST, SECOND])),
    ("partitioned", "replace"): rows(pd.concat([FIRST[FIRST.day == "d1"], SECOND])),
}
# the magic committer with partition_by has the partitioned committer's semantics
EXPECTED.update({("magic", mode): EXPECTED[("partitioned", mode)] for mode in MODES})


@pytest.mark.parametrize("committer", COMMITTERS)
@pytest.mark.parametrize("mode", MODES)
def test_second_write(engine, spark_or_none, s3, s3_server, dest, committer, mode):
    first = write(engine, spark_or_none, FIRST, dest, committer=committer, conflict_mode=mode)
    assert first.rows == len(FIRST)
    before = etags(s3, dest)
    second = write(engine, spark_or_none, SECOND, dest, committer=committer, conflict_mode=mode)
    assert second.rows == len(SECOND)
    assert read_back(s3_server, dest.prefix) == EXPECTED[(committer, mode)]
    after = etags(s3, dest)
    first_keys = {f.key for f in first.files}
    if mode == "append":
        assert all(after[k] == before[k] for k in first_keys)
    elif committer == "directory":
        assert not first_keys & set(after)
    else:  # partitioned or magic replace: d1 untouched (same keys, same ETags), d2 replaced
        d1 = {k for k in before if "/day=d1/" in k}
        assert d1 and {k: after[k] for k in d1} == {k: before[k] for k in d1}
        assert not {k for k in before if "/day=d2/" in k} & set(after)
        assert second.success["replacedObjects"] == len([k for k in before if "/day=d2/" in k])
    assert set(after) == {f.key for f in second.files} | (set(before) & set(after))


@pytest.mark.parametrize("committer", COMMITTERS)
def test_fail_mode_into_empty_destination_succeeds(
    engine, spark_or_none, s3_server, dest, committer
):
    result = write(engine, spark_or_none, FIRST, dest, committer=committer, conflict_mode="fail")
    assert read_back(s3_server, dest.prefix) == rows(FIRST)
    assert result.success["conflictMode"] == "fail"


@pytest.mark.parametrize("committer", COMMITTERS)
def test_fail_mode_conflict(engine, spark_or_none, s3, s3_server, dest, committer):
    write(engine, spark_or_none, FIRST, dest, committer=committer, conflict_mode="fail")
    before = etags(s3, dest)
    with pytest.raises(ConflictError) as info:
        write(engine, spark_or_none, SECOND, dest, committer=committer, conflict_mode="fail")
    if committer != "directory":
        assert "day=d2" in str(info.value)
    assert etags(s3, dest) == before
    assert pending_uploads(s3, dest.dir) == []
    assert [k for k in list_keys(s3, dest.dir) if "/__" in k] == []  # no hidden metadata left


@pytest.mark.parametrize("committer", ["partitioned", "magic"])
def test_partition_fail_only_checks_partitions_that_receive_data(
    engine, spark_or_none, s3_server, dest, committer
):
    write(engine, spark_or_none, FIRST, dest, committer=committer, conflict_mode="fail")
    new_day = frame({"d9": 5}, 5000)
    write(engine, spark_or_none, new_day, dest, committer=committer, conflict_mode="fail")
    assert read_back(s3_server, dest.prefix) == rows(pd.concat([FIRST, new_day]))
