"""Object stores behind one narrow interface the committers use."""

from .s3 import ObjectInfo, PendingUploadInfo, RequestCounters, S3Settings, S3Store

__all__ = ["ObjectInfo", "PendingUploadInfo", "RequestCounters", "S3Settings", "S3Store"]
