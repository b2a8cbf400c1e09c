"""Spark looks up top-level ``pyspark_*`` modules exposing ``DefaultSource`` when a Python data
source is first used: installing s3commit-sdk makes ``format("s3commit")`` work unregistered."""

from s3commit_sdk.datasource import S3CommitDataSource as DefaultSource

__all__ = ["DefaultSource"]
