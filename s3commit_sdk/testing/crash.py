"""A driver that dies at a chosen S3 request: ``crash_write`` for recovery demos and tests.

Not a stable API (see :mod:`s3commit_sdk.testing`).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

_CRASH_DRIVER = """
import json, sys
import pyarrow.parquet as pq
from s3commit_sdk import write_committed
from s3commit_sdk.streaming import StreamBatch
spec = json.loads(sys.argv[1])
kwargs = spec["kwargs"]
if "stream" in kwargs:
    kwargs["stream"] = StreamBatch(*kwargs["stream"])
write_committed(pq.read_table(spec["data"]), spec["dest"], progress=False, **kwargs)
"""


def crash_write(
    data: Any,
    dest: str,
    *,
    operation: str,
    occurrence: int = 1,
    key_contains: str = "",
    timeout: float = 60.0,
    **write_kwargs: Any,
) -> None:
    """Run ``write_committed(data, dest, **write_kwargs)`` in a child driver process and kill it.

    The child talks to the sandbox's endpoint through a
    :class:`~s3commit_sdk.testing.faultproxy.FaultProxy` that holds its ``occurrence``-th
    ``operation`` request (e.g. ``"CompleteMultipartUpload"``); as soon as that request
    arrives the child is SIGKILLed, so the request never reaches S3: a driver dying at exactly
    that point; with ``key_contains``, only requests whose key holds it count (e.g.
    ``"journal.json"``). ``stream=StreamBatch(...)`` is passed on. For demos and tests on
    the embedded default (the endpoint must be a local ``http://`` one); ``data`` is a pandas
    DataFrame or pyarrow Table (the child runs the in-process engine).
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    from .faultproxy import FaultProxy, delay

    upstream = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or ""
    if not upstream.startswith("http://"):
        raise RuntimeError("crash_write needs a local http:// endpoint such as S3Sandbox's")
    table = data if isinstance(data, pa.Table) else pa.Table.from_pandas(data, preserve_index=False)
    rule = delay(
        timeout * 1000 + 60_000, operation, occurrences=[occurrence], key_contains=key_contains
    )
    with (
        tempfile.TemporaryDirectory(prefix="s3commit-crash-") as tmp,
        FaultProxy(upstream, [rule]) as proxy,
    ):
        path = os.path.join(tmp, "data.parquet")
        pq.write_table(table, path)
        kwargs = dict(write_kwargs)
        kwargs["options"] = {**(kwargs.get("options") or {}), "endpoint": proxy.endpoint}
        if kwargs.get("stream") is not None:
            kwargs["stream"] = [kwargs["stream"].query_id, kwargs["stream"].batch_id]
        spec = {"data": path, "dest": dest, "kwargs": kwargs}
        child = subprocess.Popen([sys.executable, "-c", _CRASH_DRIVER, json.dumps(spec)])
        try:
            deadline = time.monotonic() + timeout
            while not proxy.events:  # the delay fired: the request is held
                if child.poll() is not None:
                    raise RuntimeError(
                        f"the driver ended (exit {child.returncode}) before {operation} "
                        f"#{occurrence}"
                    )
                if time.monotonic() > deadline:
                    raise RuntimeError(f"no {operation} #{occurrence} within {timeout:.0f} s")
                time.sleep(0.02)
        finally:
            if child.poll() is None:
                child.send_signal(signal.SIGKILL)
            child.wait()


def run_stream(spec: dict[str, Any], *, timeout: float = 600.0) -> dict[str, Any]:
    """Run the streaming query ``spec`` describes (:mod:`.stream_driver`) in a child process to
    its end: every file of ``spec["source"]`` one micro-batch; returns its query id and last
    batch id. The child's output goes to ``spec["log"]`` (default: a file beside the
    checkpoint)."""
    with _stream_child(spec) as (child, out, log):
        try:
            code = child.wait(timeout=timeout)
        except subprocess.TimeoutExpired as late:
            raise RuntimeError(
                f"the stream did not end within {timeout:.0f} s; see {log}"
            ) from late
        if code != 0:
            tail = Path(log).read_text(errors="replace")[-3000:]
            raise RuntimeError(f"the stream failed (exit {code}); the end of {log}:\n{tail}")
        return json.loads(Path(out).read_text())


def crash_stream(
    spec: dict[str, Any],
    *,
    operation: str,
    occurrence: int = 1,
    key_contains: str = "",
    after_key: str = "",
    after_count: int = 1,
    after_operation: str = "*",
    timeout: float = 300.0,
) -> None:
    """Run the streaming query ``spec`` describes in a child process whose S3 requests go
    through a fault proxy, and SIGKILL its whole process group (driver, JVM, Python workers,
    a local Connect server) as soon as its ``occurrence``-th ``operation`` request whose key
    holds ``key_contains`` (after the ``after_count``-th ``after_operation`` request whose key
    holds ``after_key``)
    arrives: that request never reaches S3. Spark has then not
    recorded the batch in its commit log, and replays it when the query restarts from the same
    checkpoint."""
    from .faultproxy import FaultProxy, delay

    upstream = spec.get("endpoint") or os.environ.get("AWS_ENDPOINT_URL_S3") or ""
    upstream = upstream or os.environ.get("AWS_ENDPOINT_URL") or ""
    rule = delay(
        timeout * 1000 + 60_000,
        operation,
        occurrences=[occurrence],
        key_contains=key_contains,
        after_key=after_key,
        after_count=after_count,
        after_operation=after_operation,
    )
    with (
        FaultProxy(upstream, [rule]) as proxy,
        _stream_child({**spec, "endpoint": proxy.endpoint}) as (child, _, log),
    ):
        deadline = time.monotonic() + timeout
        while not proxy.events:
            if child.poll() is not None:
                raise RuntimeError(f"the stream ended before {operation} #{occurrence}: {log}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"no {operation} #{occurrence} within {timeout:.0f} s")
            time.sleep(0.05)


@contextlib.contextmanager
def _stream_child(spec: dict[str, Any]):
    """The child running the query; its process group is killed on the way out if alive."""
    spec = dict(spec)
    spec.setdefault(
        "endpoint", os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    )
    spec.setdefault("out", str(Path(spec["checkpoint"]).with_suffix(".out.json")))
    log = spec.pop("log", None) or str(Path(spec["checkpoint"]).with_suffix(".log"))
    env = {**os.environ, **spec.pop("env", {})}
    with open(log, "a") as output:
        child = subprocess.Popen(
            [sys.executable, "-m", "s3commit_sdk.testing.stream_driver", json.dumps(spec)],
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: the JVM and workers die with it
        )
        try:
            yield child, spec["out"], log
        finally:
            if child.poll() is None:
                os.killpg(child.pid, signal.SIGKILL)
            child.wait()
