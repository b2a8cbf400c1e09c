"""Spark engine: each Spark task writes its partition inside ``mapInArrow``.

DESIGN section 4: the task's pendingset comes back as the task's result row, and Spark keeps
the result of exactly one successful attempt per partition, so job commit never lists the store.
"""

from __future__ import annotations

import pyarrow as pa

from ..protocol import JobContext, execute_task

RESULT_SCHEMA = "message string"


def is_spark_dataframe(data: object) -> bool:
    module = type(data).__module__
    return module.startswith("pyspark.sql") and type(data).__name__ == "DataFrame"


def spark_schema_to_arrow(df) -> pa.Schema:
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(df.schema)


def spark_conf(df) -> dict[str, str]:
    """The session's conf, static (``spark.hadoop.*``) and runtime."""
    session = df.sparkSession
    found: dict[str, str] = {}
    context = getattr(session, "sparkContext", None)
    if context is not None:
        found.update(context.getConf().getAll())
    found.update(session.conf.getAll)
    return found


def run_spark_tasks(df, job: JobContext) -> list[str]:
    from pyspark import TaskContext

    schema = spark_schema_to_arrow(df)
    if df.rdd.getNumPartitions() == 0:
        df = df.repartition(1)  # one task still runs, so an empty job writes its schema file

    def task(batches):
        context = TaskContext.get()
        message = execute_task(job, context.partitionId(), context.attemptNumber(), batches, schema)
        yield pa.RecordBatch.from_pydict({"message": [message]})

    return [row.message for row in df.mapInArrow(task, RESULT_SCHEMA).collect()]
