"""Scenario 5: the store's limit. Raw boto3 uploads of the same bytes with the same concurrency.

No Spark, no Parquet, no commit protocol: ``files`` objects of the end-to-end run's file size,
``parallel_files`` at a time (the Spark task slots), each a multipart upload with the same part
size and upload threads as our committers. End-to-end throughput is reported as a fraction of
it. Each completion is timed on its own: a store that copies the parts on completion (moto)
shows it there, one that completes by metadata (RGW, S3) answers in milliseconds.
"""

from __future__ import annotations

import os
import statistics
import time
from concurrent.futures import ThreadPoolExecutor

from s3commit_sdk.options import CommitOptions

from .harness import BUCKET, MIB, Endpoint, Record, Run, aggregate


def upload_all(
    endpoint: Endpoint, files: int, file_bytes: int, parallel_files: int
) -> dict[str, float]:
    """Wall seconds for every upload, and the median seconds of one completion."""
    defaults = CommitOptions()
    part, threads = defaults.multipart_size, defaults.upload_threads
    client = endpoint.client(threads=parallel_files * threads)
    payload = os.urandom(file_bytes)
    bodies = [payload[start : start + part] for start in range(0, file_bytes, part)]
    completions: list[float] = []

    def one(index: int) -> None:
        key = f"raw/part-{index:05d}.bin"
        upload = client.create_multipart_upload(Bucket=BUCKET, Key=key)["UploadId"]

        def send(numbered: tuple[int, bytes]) -> dict:
            number, body = numbered
            answer = client.upload_part(
                Bucket=BUCKET, Key=key, UploadId=upload, PartNumber=number, Body=body
            )
            return {"PartNumber": number, "ETag": answer["ETag"]}

        with ThreadPoolExecutor(threads) as parts:
            sent = list(parts.map(send, enumerate(bodies, start=1)))
        started = time.monotonic()
        client.complete_multipart_upload(
            Bucket=BUCKET, Key=key, UploadId=upload, MultipartUpload={"Parts": sent}
        )
        completions.append(time.monotonic() - started)

    started = time.monotonic()
    with ThreadPoolExecutor(parallel_files) as pool:
        list(pool.map(one, range(files)))
    return {"seconds": time.monotonic() - started, "complete_s": statistics.median(completions)}


def run_store_limit(
    run: Run, endpoint: Endpoint, size_mib: int, files: int, parallel_files: int, repeats: int
) -> None:
    file_bytes = size_mib * MIB // files
    samples = []
    for _ in range(repeats):
        endpoint.reset()
        done = upload_all(endpoint, files, file_bytes, parallel_files)
        samples.append({**done, "mib_per_s": size_mib / done["seconds"]})
    endpoint.reset()
    run.add(
        Record(
            "store_limit",
            {
                "endpoint": endpoint.kind,
                "size_mib": size_mib,
                "files": files,
                "parallel_files": parallel_files,
            },
            aggregate(samples),
            {"file_bytes": file_bytes},
        )
    )
