"""The embedded default: a local S3 endpoint (moto's server process) and a local Spark.

``with S3Sandbox() as s3:`` starts ``moto.server`` on a free 127.0.0.1 port, exports the
endpoint and dummy credentials in this process's environment (so the driver and every Spark
executor started afterwards see them), creates a bucket, and stops the server on exit.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from typing import Any

import boto3

DUMMY_ENV = {
    "AWS_ACCESS_KEY_ID": "sandbox",
    "AWS_SECRET_ACCESS_KEY": "sandbox",
    "AWS_REGION": "us-east-1",
    "AWS_DEFAULT_REGION": "us-east-1",
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class S3Sandbox:
    """A moto S3 server child process on 127.0.0.1; exports the endpoint while it runs."""

    def __init__(
        self,
        bucket: str = "sandbox",
        port: int | None = None,
        extra_env: dict[str, str] | None = None,
        export: bool = True,
    ) -> None:
        self.bucket = bucket
        self.port = port or free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.extra_env = extra_env or {}
        self.export = export
        self.process: subprocess.Popen | None = None
        self._saved_env: dict[str, str | None] = {}

    @property
    def env(self) -> dict[str, str]:
        return {
            **DUMMY_ENV,
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ENDPOINT_URL_S3": self.endpoint,
        }

    def start(self) -> S3Sandbox:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, **self.extra_env},
        )
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"{self.endpoint}/moto-api/", timeout=1).close()
                break
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"moto server did not start on {self.endpoint}") from None
                time.sleep(0.1)
        if self.export:
            for key, value in self.env.items():
                self._saved_env[key] = os.environ.get(key)
                os.environ[key] = value
        try:
            if self.bucket:
                self.client().create_bucket(Bucket=self.bucket)
        except BaseException:
            self.stop()
            raise
        return self

    def client(self, **kwargs: Any):
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=DUMMY_ENV["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=DUMMY_ENV["AWS_SECRET_ACCESS_KEY"],
            region_name=DUMMY_ENV["AWS_REGION"],
            **kwargs,
        )

    def arrow_fs(self):
        """A pyarrow S3 filesystem on this endpoint, for reading output back."""
        from pyarrow import fs

        return fs.S3FileSystem(
            endpoint_override=self.endpoint,
            access_key=DUMMY_ENV["AWS_ACCESS_KEY_ID"],
            secret_key=DUMMY_ENV["AWS_SECRET_ACCESS_KEY"],
            region=DUMMY_ENV["AWS_REGION"],
            allow_bucket_creation=False,
        )

    def stop(self) -> None:
        for key, value in self._saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        self._saved_env.clear()
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def __enter__(self) -> S3Sandbox:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def local_spark(master: str = "local[2]", app_name: str = "s3commit-sandbox", **conf: str):
    """A local SparkSession bound to loopback, using this Python for its workers."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.session.timeZone", "UTC")
    )
    for key, value in conf.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()
