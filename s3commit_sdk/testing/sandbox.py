"""The embedded default: a local S3 endpoint (moto's server process) and a local Spark.

Test and demo tooling, not a stable API (see :mod:`s3commit_sdk.testing`); the server needs
the ``testing`` extra (moto), ``local_spark`` the ``spark`` extra.

``with S3Sandbox() as s3:`` starts moto's S3 server (``s3commit_sdk.testing.sandbox_server``:
real upload initiation times) on a free 127.0.0.1 port, exports the endpoint and dummy
credentials in this process's environment (so the driver and every Spark executor started
afterwards see them), creates a bucket, and stops the server on exit. The server runs in a
session of its own, so a notebook's Kernel > Interrupt does not kill it, and it is stopped by
PID when the sandbox closes, when the Python process exits, or (by itself) when that process
is killed.

``python -m s3commit_sdk.testing.sandbox serve [--port N] [--bucket NAME] [--env-file PATH]``
keeps one running for scripts, the ``s3commit`` CLI and papermill: it prints the environment
that points them at it (``export`` lines) and writes it to ``PATH`` as ``KEY=value`` lines
(``set -a; . PATH; set +a``), until Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import warnings
from collections.abc import Iterator, Mapping
from typing import Any, TypeVar

import boto3

from ..errors import InvalidArgumentError
from ..options import local_dir

DUMMY_ENV = {
    "AWS_ACCESS_KEY_ID": "sandbox",
    "AWS_SECRET_ACCESS_KEY": "sandbox",
    "AWS_REGION": "us-east-1",
    "AWS_DEFAULT_REGION": "us-east-1",
}

#: S3's bucket naming rules (Amazon S3 User Guide, "General purpose bucket naming rules"):
#: 3 to 63 lowercase letters, digits, '.' and '-', starting and ending with a letter or digit,
#: no '..', not shaped like an IP address.
_BUCKET_NAME = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_IP_ADDRESS = re.compile(r"^\d+\.\d+\.\d+\.\d+$")


def check_bucket_name(name: str) -> str:
    """``name`` if S3 accepts it as a bucket name; else InvalidArgumentError naming the rules
    (the server's own refusal is a bare botocore error)."""
    if (
        not isinstance(name, str)
        or not _BUCKET_NAME.match(name)
        or ".." in name
        or _IP_ADDRESS.match(name)
    ):
        raise InvalidArgumentError(
            f"bucket={name!r} is not a valid S3 bucket name: S3 wants 3 to 63 lowercase "
            "letters, digits, '.' and '-', starting and ending with a letter or digit, "
            "without '..' and not shaped like an IP address (e.g. bucket='sandbox')"
        )
    return name


def wait_until_answers(url: str, process: subprocess.Popen, timeout_s: float, what: str) -> None:
    """Return once ``url`` answers (an HTTP error is an answer too); RuntimeError when
    ``process`` exits first or ``timeout_s`` runs out."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            urllib.request.urlopen(url, timeout=2).close()
            return
        except urllib.error.HTTPError:
            return
        except OSError:
            if process.poll() is not None:
                raise RuntimeError(
                    f"{what} exited with {process.returncode} before answering at {url}"
                ) from None
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"{what} did not answer at {url} within {timeout_s:.0f} s"
                ) from None
            time.sleep(0.1)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


_Server = TypeVar("_Server", bound="LocalS3Server")


class LocalS3Server:
    """What every local S3 server for tests shares: endpoint, dummy keys, exported env, clients.

    Subclasses start and stop the server; ``kind`` names it, so a test can tell them apart.
    """

    kind = ""

    def __init__(self, bucket: str | None, port: int | None, export: bool) -> None:
        """``bucket``: created once the server answers (None or '': none); checked here,
        before anything starts."""
        self.bucket = check_bucket_name(bucket) if bucket else bucket
        self.port = port or free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.export = export
        self._saved_env: dict[str, str | None] = {}

    @property
    def env(self) -> dict[str, str]:
        return {
            **DUMMY_ENV,
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ENDPOINT_URL_S3": self.endpoint,
        }

    def start(self: _Server) -> _Server:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def _serve(self) -> None:
        """Once the server answers: the environment exported and the bucket created, or the
        server stopped again."""
        try:
            self._export_env()
            if self.bucket:
                self.client().create_bucket(Bucket=self.bucket)
        except BaseException:
            self.stop()
            raise

    def _export_env(self) -> None:
        if self.export:
            for key, value in self.env.items():
                self._saved_env[key] = os.environ.get(key)
                os.environ[key] = value

    def _restore_env(self) -> None:
        for key, value in self._saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        self._saved_env.clear()

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

    def __enter__(self: _Server) -> _Server:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class S3Sandbox(LocalS3Server):
    """A moto S3 server child process on 127.0.0.1; exports the endpoint while it runs."""

    kind = "moto"

    def __init__(
        self,
        bucket: str = "sandbox",
        port: int | None = None,
        extra_env: dict[str, str] | None = None,
        export: bool = True,
        server_module: str = "s3commit_sdk.testing.sandbox_server",
    ) -> None:
        super().__init__(bucket, port, export)
        self.extra_env = extra_env or {}
        self.server_module = server_module  # run as `python -m MODULE -H HOST -p PORT`
        self.process: subprocess.Popen | None = None

    def add_key(self, access_key: str, secret_key: str) -> None:
        """Nothing to do: moto accepts any key pair (see :meth:`RGWServer.add_key`)."""

    def start(self) -> S3Sandbox:
        from .sandbox_server import PARENT_ENV

        refuse_taken_port(self.port)
        self.process = subprocess.Popen(
            [sys.executable, "-m", self.server_module, "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, PARENT_ENV: str(os.getpid()), **self.extra_env},
            start_new_session=True,  # Ctrl-C / Kernel > Interrupt go to our group, not to it
        )
        atexit.register(self.stop)
        try:
            wait_until_answers(f"{self.endpoint}/moto-api/", self.process, 30, "moto server")
        except RuntimeError:
            self.stop()
            raise
        self._serve()
        return self

    def stop(self) -> None:
        """Stop the server (by its PID) and restore the environment; safe to call twice."""
        atexit.unregister(self.stop)
        self._restore_env()
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None


def refuse_taken_port(port: int) -> None:
    """RuntimeError if something listens on 127.0.0.1:``port``: the sandbox would otherwise
    take that server's answer for its own (and create its bucket there)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT is no listener
        try:
            sock.bind(("127.0.0.1", port))
        except OSError as exc:
            raise RuntimeError(f"port {port} on 127.0.0.1 is taken ({exc.strerror})") from None


def describe(server: LocalS3Server) -> str:
    bucket = f"s3://{server.bucket}" if server.bucket else "none"
    return f"{server.kind} S3 endpoint {server.endpoint}, bucket {bucket}"


def env_lines(env: Mapping[str, str]) -> list[str]:
    """``KEY=value`` lines, quoted for a POSIX shell."""
    return [f"{key}={shlex.quote(value)}" for key, value in env.items()]


def write_env_file(path: str, server: LocalS3Server) -> None:
    """``server``'s environment as ``KEY=value`` lines, written whole: a script waiting for the
    file never reads half of it."""
    header = [
        f"# {describe(server)}",
        f"# into a shell: set -a; . {shlex.quote(path)}; set +a",
    ]
    partial = f"{path}.{os.getpid()}.partial"
    with open(partial, "w") as out:
        out.write("\n".join([*header, *env_lines(server.env)]) + "\n")
    os.replace(partial, path)


def serve(server: LocalS3Server, env_file: str | None = None) -> None:
    """Run ``server`` until Ctrl-C or SIGTERM: its environment printed as ``export`` lines and
    written to ``env_file``, which is removed again before the server stops."""
    for signum in (signal.SIGINT, signal.SIGTERM):  # SIGINT too: a shell's `cmd &` ignores it
        signal.signal(signum, signal.default_int_handler)
    try:
        with server:
            print("\n".join(f"export {line}" for line in env_lines(server.env)), flush=True)
            if env_file:
                write_env_file(env_file, server)
            print(f"{describe(server)}; Ctrl-C or SIGTERM stops it", file=sys.stderr, flush=True)
            try:
                while True:
                    time.sleep(3600)
            finally:
                if env_file:
                    with contextlib.suppress(FileNotFoundError):
                        os.remove(env_file)
    except KeyboardInterrupt:
        print("stopped", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    """``python -m s3commit_sdk.testing.sandbox serve``: exit 0 once stopped, 1 if the server
    could not start, 2 on bad arguments."""
    parser = argparse.ArgumentParser(
        prog="python -m s3commit_sdk.testing.sandbox",
        description="The sandbox's local S3 endpoint (moto) for scripts, the CLI and papermill.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    serve_cmd = commands.add_parser(
        "serve",
        help="run the endpoint on 127.0.0.1 until Ctrl-C or SIGTERM",
        description="Run the sandbox's S3 endpoint on 127.0.0.1 until Ctrl-C or SIGTERM; print "
        "the environment that points boto3, the s3commit CLI and papermill at it.",
    )
    serve_cmd.add_argument("--port", type=int, default=None, help="default: a free port")
    serve_cmd.add_argument("--bucket", default="sandbox", help="bucket to create ('' for none)")
    serve_cmd.add_argument(
        "--env-file",
        metavar="PATH",
        help="also write the environment here as KEY=value lines (removed when it stops)",
    )
    args = parser.parse_args(argv)
    try:
        server = S3Sandbox(bucket=args.bucket, port=args.port, export=False)
    except InvalidArgumentError as exc:
        serve_cmd.error(str(exc))
    try:
        serve(server, args.env_file)
    except (RuntimeError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


def _workers_run_this_python() -> None:
    """The session's Python workers (a local Connect server's included, which inherits this
    environment) run this interpreter, which has the SDK; a ``PYSPARK_PYTHON`` set to another
    one is kept only if it has the SDK too, else refused before the JVM starts."""
    from ..engines.worker_python import require_sdk_in

    given = os.environ.get("PYSPARK_PYTHON")
    # not realpath: a virtual environment's python is a link to one that lacks its packages
    if given and os.path.abspath(shutil.which(given) or given) != sys.executable:
        require_sdk_in(given, "PYSPARK_PYTHON")
    else:
        os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


def local_spark(
    master: str = "local[2]",
    app_name: str = "s3commit-sandbox",
    quiet: bool = True,
    connect: bool = False,
    **conf: str,
):
    """A local SparkSession bound to loopback, using this Python for its workers (a
    ``PYSPARK_PYTHON`` naming an interpreter without the SDK raises ``WorkerPythonError``).

    ``quiet``: the JVM's own output (start-up warnings, logs at ERROR and above, the Python
    workers' tracebacks, which the SDK's errors sum up) goes to ``spark-<pid>.log`` in this
    user's private directory (``$TMPDIR/s3commit-<uid>``) instead of the notebook; the path is
    the session's conf ``spark.s3commit.sandbox.log``. ``connect``: a Spark Connect session,
    on a local Connect server started in this process (``SparkSession.builder.remote(master)``),
    whose JVM is kept as quiet.
    """
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    _workers_run_this_python()
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.remote(master) if connect else SparkSession.builder.master(master)
    )
    builder = (
        builder.appName(app_name)
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.session.timeZone", "UTC")
    )
    if connect:  # the server on loopback only (PySpark's client always dials port 15002)
        builder = builder.config("spark.connect.grpc.binding.address", "127.0.0.1")
    for key, value in conf.items():
        builder = builder.config(key, value)
    if not quiet:
        return _session(builder)
    log = os.path.join(local_dir(), f"spark-{os.getpid()}.log")
    with _output_to(log):  # the JVM started here keeps these descriptors for its life
        session = _session(builder.config("spark.s3commit.sandbox.log", log))
    if not connect:  # a Connect client has no SparkContext; its server logs to the file
        session.sparkContext.setLogLevel("ERROR")
    return session


def _session(builder):
    """The builder's session. A local Connect server starts with every conf; its client then
    sets each again at runtime, where the static ones (spark.ui.*) only warn."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Failed to set ")
        return builder.getOrCreate()


@contextlib.contextmanager
def _output_to(path: str) -> Iterator[None]:
    """Point this process's stdout and stderr descriptors at ``path`` for a while.

    Only processes started meanwhile keep them; Python's own ``sys.stdout`` and a notebook's
    output are untouched.
    """
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.dup2(target, 1)
        os.dup2(target, 2)
        yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, target):
            os.close(fd)


if __name__ == "__main__":
    sys.exit(main())
