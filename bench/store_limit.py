"""Scenario 5: the store's limit. Raw boto3 uploads of the same bytes with the same concurrency.

No Spark, no Parquet, no commit protocol: ``files`` objects of the end-to-end run's file size,
``parallel_files`` at a time (the Spark task slots), each a multipart upload with the same part
size and upload threads as our committers. End-to-end throughput is reported as a fraction of it.
"""

from __future__ import annotations

import io
import os
import time
from concurrent.futures import ThreadPoolExecutor

from boto3.s3.transfer import TransferConfig

from s3commit_sdk.options import CommitOptions

from .harness import BUCKET, MIB, Endpoint, Record, Run, aggregate


def upload_all(endpoint: Endpoint, files: int, file_bytes: int, parallel_files: int) -> float:
    defaults = CommitOptions()
    config = TransferConfig(
        multipart_threshold=defaults.multipart_size,
        multipart_chunksize=defaults.multipart_size,
        max_concurrency=defaults.upload_threads,
    )
    client = endpoint.client()
    payload = os.urandom(file_bytes)

    def one(index: int) -> None:
        key = f"raw/part-{index:05d}.bin"
        client.upload_fileobj(io.BytesIO(payload), BUCKET, key, Config=config)

    started = time.monotonic()
    with ThreadPoolExecutor(parallel_files) as pool:
        list(pool.map(one, range(files)))
    return time.monotonic() - started


def run_store_limit(
    run: Run, endpoint: Endpoint, size_mib: int, files: int, parallel_files: int, repeats: int
) -> None:
    file_bytes = size_mib * MIB // files
    samples = []
    for _ in range(repeats):
        endpoint.reset()
        seconds = upload_all(endpoint, files, file_bytes, parallel_files)
        samples.append({"seconds": seconds, "mib_per_s": size_mib / seconds})
    endpoint.reset()
    run.add(
        Record(
            "store_limit",
            {"size_mib": size_mib, "files": files, "parallel_files": parallel_files},
            aggregate(samples),
            {"file_bytes": file_bytes},
        )
    )
