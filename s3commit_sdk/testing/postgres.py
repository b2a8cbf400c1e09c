"""A throwaway PostgreSQL server on 127.0.0.1: the Iceberg SQL catalog of a real deployment.

pyiceberg's ``SqlCatalog`` keeps each table's metadata pointer in a database and commits with
one conditional UPDATE; sqlite is the embedded default, PostgreSQL what several hosts share.
``PostgresServer`` runs one from the distribution's packages (Debian's ``postgresql``, ``make
system-deps``): ``initdb`` in a temporary directory, one database and one password user for the
tests, and the ``postgres`` server in the foreground as a child process in its own session (a
Ctrl-C to the test's process group does not reach it), listening on 127.0.0.1 only, its unix
socket inside that directory. As root it runs as the ``postgres`` system user: PostgreSQL
refuses to run as root. ``stop()`` ends it by PID and removes the directory.

``uri`` is the SQLAlchemy URI pyiceberg takes (``postgresql+psycopg2://...``, which needs
``psycopg2``); ``dsn`` the same for libpq.

``python -m s3commit_sdk.testing.postgres`` runs one until Ctrl-C, for manual runs and benchmarks.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import glob
import os
import pwd
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse
from typing import NoReturn

from .rgw import log_tail
from .sandbox import env_lines, free_port

PROGRAMS = ("initdb", "postgres")
#: where distributions put the server's programs, one directory per major version, when they
#: are not on PATH (Debian's postgresql-NN, Homebrew's keg-only postgresql@NN)
BIN_DIRS = (
    "/usr/lib/postgresql/*/bin",
    "/opt/homebrew/opt/postgresql@*/bin",
    "/usr/local/opt/postgresql@*/bin",
)
SYSTEM_USER = "postgres"  # who runs the server when we are root (Debian's package creates it)
TIMEOUT_S = 30.0

# Appended to the postgresql.conf initdb writes. TCP on 127.0.0.1 only; the socket in our
# directory (the default, /var/run/postgresql, may not exist or be the system cluster's).
# A throwaway cluster needs no durability: a crash loses the directory anyway, and fsync=off
# keeps commits fast on a loaded test machine (locking and isolation are unchanged).
# The log goes to stderr, which is our log file.
POSTGRESQL_CONF = """
listen_addresses = '127.0.0.1'
port = {port}
unix_socket_directories = '{dir}'
fsync = off
synchronous_commit = off
full_page_writes = off
logging_collector = off
"""


class PostgresServerError(RuntimeError):
    """The server did not start, or is no longer running; the message has its log's tail."""


def find_bin_dir() -> str:
    """The directory of ``initdb`` and ``postgres`` (one version): PATH's first, else the
    highest version in the distributions' directories; PostgresServerError naming the package
    if there is none."""
    candidates = []
    on_path = shutil.which("postgres")
    if on_path:
        candidates.append(os.path.dirname(os.path.realpath(on_path)))
    versioned = [path for pattern in BIN_DIRS for path in glob.glob(pattern)]
    candidates += sorted(versioned, key=_version, reverse=True)
    for directory in candidates:
        if all(os.access(os.path.join(directory, p), os.X_OK) for p in PROGRAMS):
            return directory
    raise PostgresServerError(
        "PostgreSQL is not installed (no initdb and postgres on PATH or in "
        f"{', '.join(BIN_DIRS)}): run `make system-deps` or `apt-get install postgresql`"
    )


def _version(bin_dir: str) -> tuple[int, ...]:
    """``(15,)`` for /usr/lib/postgresql/15/bin or .../postgresql@15/bin."""
    found = re.search(r"postgresql@?(\d+(?:\.\d+)*)", bin_dir)
    return tuple(int(n) for n in found.group(1).split(".")) if found else ()


class PostgresServer:
    """A PostgreSQL cluster in a temporary directory, serving one database on 127.0.0.1.

    ``user`` owns ``database`` and is the cluster's superuser; it logs in over TCP with
    ``password`` (default: a random one, so a test can search outputs for it). ``timeout``
    bounds the start-up (under 1 s here); ``bin_dir`` holds ``initdb`` and ``postgres``
    (default: :func:`find_bin_dir`).
    """

    def __init__(
        self,
        database: str = "s3commit",
        user: str = "s3commit",
        password: str | None = None,
        port: int | None = None,
        timeout: float = TIMEOUT_S,
        bin_dir: str | None = None,
    ) -> None:
        self.database = database
        self.user = user
        self.password = password or secrets.token_hex(16)
        self.port = port or free_port()
        self.timeout = timeout
        self.bin_dir = bin_dir
        self.dir: str | None = None
        self.process: subprocess.Popen | None = None
        self._owner_pid = os.getpid()

    @property
    def uri(self) -> str:
        """The SQLAlchemy URI (psycopg2 driver): pyiceberg SqlCatalog's ``uri``."""
        user, password = (urllib.parse.quote(s, safe="") for s in (self.user, self.password))
        return f"postgresql+psycopg2://{user}:{password}@127.0.0.1:{self.port}/{self.database}"

    @property
    def dsn(self) -> str:
        """The libpq connection string (``psycopg2.connect(dsn)``, ``psql "$dsn"``)."""
        return (
            f"host=127.0.0.1 port={self.port} dbname={self.database} user={self.user} "
            f"password={self.password}"
        )

    @property
    def env(self) -> dict[str, str]:
        """libpq's variables (psql and psycopg2 connect with them alone) and the URI."""
        return {
            "PGHOST": "127.0.0.1",
            "PGPORT": str(self.port),
            "PGDATABASE": self.database,
            "PGUSER": self.user,
            "PGPASSWORD": self.password,
            "S3COMMIT_POSTGRES_URI": self.uri,
        }

    @property
    def data_dir(self) -> str:
        assert self.dir is not None, "PostgresServer is not started"
        return os.path.join(self.dir, "data")

    @property
    def pids(self) -> list[int]:
        """The postmaster's process id, then its children's (on Linux: every process whose
        working directory is the data directory, where the postmaster and all it forks work;
        an orphan of a killed postmaster too)."""
        if self.process is None:
            return []
        postmaster = [self.process.pid] if self.process.poll() is None else []
        return postmaster + [p for p in _working_in(self.data_dir) if p != self.process.pid]

    def start(self) -> PostgresServer:
        if self.dir is not None:
            raise PostgresServerError(f"PostgresServer on port {self.port} is already started")
        bin_dir = self.bin_dir or find_bin_dir()
        run_as = _system_user() if os.geteuid() == 0 else None
        self.dir = tempfile.mkdtemp(prefix="s3commit-postgres-")
        atexit.register(self._stop_at_exit)
        try:
            if run_as is not None:
                os.chown(self.dir, run_as.pw_uid, run_as.pw_gid)
            self._boot(bin_dir, run_as, time.monotonic() + self.timeout)
        except BaseException:
            self.stop(grace=0)
            raise
        return self

    def _boot(self, bin_dir: str, run_as: pwd.struct_passwd | None, deadline: float) -> None:
        def command(program: str, *args: str) -> list[str]:
            return [os.path.join(bin_dir, program), *args]

        user = {}  # subprocess's arguments that run a program as run_as
        if run_as is not None:
            user = {"user": run_as.pw_uid, "group": run_as.pw_gid, "extra_groups": []}
        password_file = self._path("password")
        with open(os.open(password_file, os.O_WRONLY | os.O_CREAT, 0o600), "w") as out:
            out.write(self.password + "\n")
        if run_as is not None:
            os.chown(password_file, run_as.pw_uid, run_as.pw_gid)
        self._run(
            deadline,
            command(
                "initdb",
                "--pgdata",
                self.data_dir,
                "--username",
                self.user,
                "--pwfile",
                password_file,
                "--auth-local=trust",  # the socket is in our private directory
                "--auth-host=scram-sha-256",
                "--encoding=UTF8",
                "--locale=C",
                "--no-sync",
                "--no-instructions",
            ),
            user,
        )
        os.remove(password_file)
        with open(os.path.join(self.data_dir, "postgresql.conf"), "a") as conf:
            conf.write(POSTGRESQL_CONF.format(port=self.port, dir=self.dir))
        # the database, in single-user mode before the server starts: no client program needed
        self._run(
            deadline,
            command("postgres", "--single", "-D", self.data_dir, "-c", "exit_on_error=on"),
            user,
            stdin=f"CREATE DATABASE {_quoted(self.database)} OWNER {_quoted(self.user)};\n",
        )
        with open(self._path("postgres.log"), "wb") as log:
            self.process = subprocess.Popen(
                command("postgres", "-D", self.data_dir),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.dir,
                start_new_session=True,
                **user,
            )
        self._wait_until_ready(deadline)

    def _path(self, *parts: str) -> str:
        assert self.dir is not None
        return os.path.join(self.dir, *parts)

    def _run(self, deadline: float, command: list[str], user: dict, stdin: str = "") -> None:
        """One set-up command, bounded by the start-up deadline; its output goes into errors."""
        try:
            done = subprocess.run(
                command,
                input=stdin,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,  # initdb and single-user mode say why on stderr
                text=True,
                cwd=self.dir,
                timeout=max(deadline - time.monotonic(), 0.1),
                **user,
            )
        except subprocess.TimeoutExpired as exc:
            self._fail(f"`{' '.join(command)}` did not finish in time", exc.output)
        if done.returncode != 0:
            self._fail(f"`{' '.join(command)}` exited with {done.returncode}", done.stdout)

    def _wait_until_ready(self, deadline: float) -> None:
        """Until the postmaster says ``ready`` in postmaster.pid (what ``pg_ctl start -w``
        waits for: it then accepts connections)."""
        assert self.process is not None
        status_file = os.path.join(self.data_dir, "postmaster.pid")
        while True:
            if self.process.poll() is not None:
                self._fail(self._exit_reason())
            with contextlib.suppress(OSError):
                with open(status_file) as status:
                    lines = status.read().splitlines()
                if len(lines) >= 8 and lines[7].strip() == "ready":
                    return
            if time.monotonic() > deadline:
                self._fail(f"postgres was not ready on 127.0.0.1:{self.port} in {self.timeout} s")
            time.sleep(0.02)

    def _exit_reason(self) -> str:
        assert self.process is not None
        what = f"postgres exited with {self.process.returncode}"
        if "Address already in use" in self._log():
            what += f" (EADDRINUSE: port {self.port} on 127.0.0.1 already in use)"
        return what

    def _log(self) -> str:
        try:
            with open(self._path("postgres.log"), errors="replace") as log:
                return log.read()
        except OSError:
            return ""

    def _fail(self, what: str, output: str | bytes | None = None) -> NoReturn:
        """Raise PostgresServerError with a command's output and the tail of the server's log."""
        sections = [f"PostgresServer start-up failed: {what}"]
        if output:
            text = output.decode(errors="replace") if isinstance(output, bytes) else output
            sections.append(log_tail("output", text))
        if self._log():
            sections.append(log_tail("postgres.log", self._log()))
        raise PostgresServerError("\n".join(sections))

    def check(self) -> None:
        """PostgresServerError, with the log's tail, if the server is no longer running
        (killed, crashed): a test can tell a dead catalog from a failed commit."""
        if self.process is None:
            raise PostgresServerError("PostgresServer is not started")
        if self.process.poll() is not None:
            raise PostgresServerError(
                f"PostgresServer on 127.0.0.1:{self.port} is down: {self._exit_reason()}\n"
                + log_tail("postgres.log", self._log())
            )

    def stop(self, grace: float = 10.0) -> None:
        """Stop the server and remove the directory; safe to call twice.

        A fast shutdown (SIGINT: clients are disconnected, unlike SIGTERM's smart shutdown,
        which waits for a test's open connection pool); after ``grace`` seconds (0: at once)
        an immediate one (SIGQUIT: the postmaster ends its children), then SIGKILL for
        whatever is left in the data directory.
        """
        atexit.unregister(self._stop_at_exit)
        if self.process is not None:
            _end(self.process, grace)
            leftover = _working_in(self.data_dir)  # children of a postmaster killed from outside
            for pid in leftover:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            _wait_gone(leftover, TIMEOUT_S)
            self.process = None
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    def kill(self) -> None:
        """Stop at once (the data is lost anyway)."""
        self.stop(grace=0)

    def _stop_at_exit(self) -> None:
        if os.getpid() == self._owner_pid:  # not in a forked child
            self.kill()

    def __enter__(self) -> PostgresServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _system_user() -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(SYSTEM_USER)
    except KeyError:
        raise PostgresServerError(
            f"PostgreSQL refuses to run as root, and there is no {SYSTEM_USER!r} user to run it "
            "as: install Debian's postgresql package (it creates one) or run as another user"
        ) from None


def _quoted(name: str) -> str:
    """``name`` as an SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def _end(process: subprocess.Popen, grace: float) -> None:
    """SIGINT, then SIGQUIT after ``grace`` seconds (0: at once), then SIGKILL."""
    for signum, wait_s in ((signal.SIGINT, grace), (signal.SIGQUIT, 10.0)):
        if process.poll() is not None or wait_s <= 0:
            continue
        process.send_signal(signum)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(wait_s)
    if process.poll() is None:
        process.kill()
    process.wait()


def _working_in(directory: str) -> list[int]:
    """Processes whose working directory is ``directory`` (Linux's /proc; elsewhere none)."""
    directory = os.path.realpath(directory)
    found = []
    with contextlib.suppress(OSError):
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                with contextlib.suppress(OSError):
                    if os.readlink(f"/proc/{entry}/cwd") == directory:
                        found.append(int(entry))
    return sorted(found)


def _wait_gone(pids: list[int], timeout_s: float) -> None:
    """Until every one of ``pids`` is dead (SIGKILLed orphans, which init reaps) or gone."""
    deadline = time.monotonic() + timeout_s
    while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.01)


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (Linux's /proc): a zombie is dead, waiting for its parent."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def main(argv: list[str] | None = None) -> int:
    """Run a PostgresServer until Ctrl-C (or SIGTERM), printing what a shell needs to use it."""
    parser = argparse.ArgumentParser(
        prog="python -m s3commit_sdk.testing.postgres", description=__doc__
    )
    parser.add_argument("--port", type=int, default=None, help="default: a free port")
    parser.add_argument("--database", default="s3commit")
    parser.add_argument("--user", default="s3commit")
    parser.add_argument("--password", default=None, help="default: a random one")
    parser.add_argument("--env-file", metavar="PATH", help="also write the environment here")
    args = parser.parse_args(argv)
    for signum in (signal.SIGINT, signal.SIGTERM):  # SIGINT too: a shell's `cmd &` ignores it
        signal.signal(signum, signal.default_int_handler)
    server = PostgresServer(args.database, args.user, args.password, args.port)
    try:
        with server:
            lines = env_lines(server.env)
            print("\n".join(f"export {line}" for line in lines), flush=True)
            if args.env_file:  # written whole: a script waiting for it never reads half
                partial = f"{args.env_file}.{os.getpid()}.partial"
                with open(partial, "w") as out:
                    out.write("\n".join(lines) + "\n")
                os.replace(partial, args.env_file)
            print(f"PostgreSQL at {server.dsn}; Ctrl-C or SIGTERM stops it", file=sys.stderr)
            try:
                while True:
                    time.sleep(3600)
            finally:
                if args.env_file:
                    with contextlib.suppress(FileNotFoundError):
                        os.remove(args.env_file)
    except PostgresServerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("stopped", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
