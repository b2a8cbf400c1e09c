"""Options refused on Spark Connect, run in a process of its own by test_option_refusals.

A Connect session cannot share a process with the test session's classic one: this script
(``python connect_option_scenarios.py '{"base": ..., "out": ..., "buffer": ...}'``) starts a
local Connect server and writes with a ``buffer.dir`` no file can be staged in, through
``write_committed`` and through ``df.write.format("s3commit")``; it reports each error (type,
fields, message) as JSON.
"""

from __future__ import annotations


def main(spec: dict) -> dict:
    from s3commit_sdk import S3CommitError, write_committed
    from s3commit_sdk.errors import from_spark
    from s3commit_sdk.testing.sandbox import local_spark

    spark = local_spark("local[2]", connect=True)
    df = spark.createDataFrame([(i, f"d{i % 2}") for i in range(6)], "id long, day string")
    outcomes = {}

    def outcome(name: str, write) -> None:
        try:
            write()
            outcomes[name] = {"type": None}
        except Exception as exc:
            typed = exc if isinstance(exc, S3CommitError) else from_spark(exc)
            outcomes[name] = {
                "type": type(typed).__name__ if typed else type(exc).__name__,
                "option": getattr(typed, "option", None),
                "visible": getattr(typed, "visible", None),
                "message": str(typed or exc)[:3000],
            }

    options = {"buffer.dir": spec["buffer"]}
    outcome(
        "wc",
        lambda: write_committed(
            df, spec["base"] + "/wc", partition_by=["day"], options=options, progress=False
        ),
    )

    def data_source() -> None:
        writer = df.write.format("s3commit").mode("append").option("partition_by", "day")
        writer.option("buffer.dir", spec["buffer"]).save(spec["base"] + "/ds")

    outcome("ds", data_source)
    spark.stop()
    return outcomes


if __name__ == "__main__":
    from connect_scenarios import run_as_child  # beside this script

    run_as_child(main)
