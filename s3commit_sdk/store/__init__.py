"""Object stores behind one narrow interface the committers use; ``open_store`` opens S3."""

from .opener import open_store
from .s3 import ObjectInfo, PartInfo, PendingUploadInfo, RequestCounters, S3Settings, S3Store

__all__ = [
    "ObjectInfo",
    "PartInfo",
    "PendingUploadInfo",
    "RequestCounters",
    "S3Settings",
    "S3Store",
    "open_store",
]
