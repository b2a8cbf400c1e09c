"""A one-node Ceph RADOS Gateway (RGW) on 127.0.0.1: a real S3 server for tests and benchmarks.

moto is a mock; RGW is an S3 server run in production, and it answers differently (empty ETag
in CompleteMultipartUpload's answer, real ListMultipartUploads pagination, ...). ``RGWServer``
has the interface of :class:`~s3commit_sdk.testing.sandbox.S3Sandbox`, so a test can take either.

It builds a throwaway cluster the way Ceph's developer clusters are built: one monitor, one OSD
keeping objects in RAM (``memstore``), one radosgw with the beast frontend, and an S3 user with
the sandbox's dummy keys. Every daemon runs in the foreground as a child process in its own
session (a Ctrl-C to the test's process group does not reach them), and everything (config,
monitor store, logs, admin sockets) lives in one temporary directory, removed by ``stop()``.
Needs Debian's ``ceph-mon ceph-osd radosgw`` packages (``make system-deps``).

``python -m s3commit_sdk.testing.rgw`` runs one until Ctrl-C, for manual runs and benchmarks.
"""

from __future__ import annotations

import argparse
import atexit
import errno
import os
import shutil
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from typing import NoReturn

from .sandbox import DUMMY_ENV, LocalS3Server, free_port, serve

CEPH_PROGRAMS = ("monmaptool", "ceph-mon", "ceph", "ceph-osd", "radosgw", "radosgw-admin")
MON_ID = "a"
OSD_ID = "0"
RGW_NAME = "client.rgw"
LOG_TAIL_LINES = 20
#: attempts of an admin command that radosgw-admin cancels (exit ECANCELED) on a metadata race
CANCELED_ATTEMPTS = 5

# One node: pools of size 1 with few PGs, no cephx (S3 signatures are still checked).
# `ms mon client mode = crc`: without it radosgw waits 5 minutes for the monitor's config.
# `paxos propose interval = 0.1`: start-up in ~2-3 s instead of ~12 s.
# `tcp_nodelay=1`: without it every reply with a body waits ~40 ms for a delayed ACK.
# `rgw dns name` empty: path-style requests only, as boto3 sends them to an IP endpoint.
# `rgw gc obj min wait`: deleted and overwritten data leaves memstore's RAM after a minute, not 2 h.
# `mon data avail crit = 0`: the monitor does not shut itself down on a nearly full disk.
# `rgw crypt ...`: SSE-KMS and SSE-C over plain http (RGW refuses SSE without TLS otherwise), the
# KMS keys from the config (Ceph's "testing" backend): key RGW_TEST_KMS_KEY encrypts SSE-KMS tests.
CEPH_CONF = """\
[global]
fsid = {fsid}
mon host = [v2:127.0.0.1:{mon_port}]
public addr = 127.0.0.1
cluster addr = 127.0.0.1
ms bind ipv6 = false
ms bind msgr1 = false
ms mon client mode = crc
auth cluster required = none
auth service required = none
auth client required = none
keyring = {dir}/keyring
run dir = {dir}/run
crash dir = {dir}/crash
log file = {dir}/log/$name.log
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
osd crush chooseleaf type = 0
mon allow pool size one = true
mon warn on pool no redundancy = false
mon warn on insecure global id reclaim allowed = false
mon data avail warn = 1
mon data avail crit = 0

[mon]
mon data = {dir}/mon
mon cluster log file = {dir}/log/$cluster.$channel.log
paxos propose interval = 0.1

[osd]
osd data = {dir}/osd
osd objectstore = memstore
memstore device bytes = {memstore_bytes}

[{rgw_name}]
rgw data = {dir}/rgw
rgw frontends = beast endpoint=127.0.0.1:{port} tcp_nodelay=1
rgw dns name =
rgw gc obj min wait = 60
rgw gc processor period = 60
rgw crypt require ssl = false
rgw crypt s3 kms backend = testing
rgw crypt s3 kms encryption keys = {kms_key}={kms_key_bytes}
"""

#: the KMS key id RGW's testing KMS backend knows (``encryption.key`` of SSE-KMS tests on RGW)
RGW_TEST_KMS_KEY = "s3commit-test-key"
#: its 32 key bytes, base64 (a fixed test value: the backend keeps keys in the config)
RGW_TEST_KMS_KEY_BYTES = "czNjb21taXQtdGVzdC1rZXktMzItYnl0ZXMtbG9uZyE="


class RGWServer(LocalS3Server):
    """A one-node Ceph cluster with a radosgw on 127.0.0.1; exports the endpoint while it runs.

    ``memstore_bytes`` is the OSD's capacity (objects are held in RAM, which is only handed back
    when the server stops); ``timeout`` bounds the start-up.
    """

    kind = "rgw"

    def __init__(
        self,
        bucket: str = "sandbox",
        port: int | None = None,
        export: bool = True,
        timeout: float = 90.0,
        memstore_bytes: int = 8 << 30,
    ) -> None:
        super().__init__(bucket, port, export)
        self.timeout = timeout
        self.memstore_bytes = memstore_bytes
        self.mon_port = free_port()
        self.dir: str | None = None
        self.daemons: dict[str, subprocess.Popen] = {}  # ceph name -> process, in start order
        self._owner_pid = os.getpid()
        #: admin commands that change users, one at a time (threads of one test may add keys)
        self._admin = threading.Lock()

    @property
    def pids(self) -> dict[str, int]:
        """The daemons' process ids by ceph name (``mon.a``, ``osd.0``, ``client.rgw``)."""
        return {name: process.pid for name, process in self.daemons.items()}

    def start(self) -> RGWServer:
        if self.dir is not None:
            raise RuntimeError(f"RGWServer on {self.endpoint} is already started")
        missing = [program for program in CEPH_PROGRAMS if shutil.which(program) is None]
        if missing:
            raise RuntimeError(
                f"Ceph is not installed (missing {', '.join(missing)}): run `make system-deps` "
                "or `apt-get install --no-install-recommends ceph-mon ceph-osd radosgw`"
            )
        self.dir = tempfile.mkdtemp(prefix="s3commit-rgw-")
        atexit.register(self._stop_at_exit)
        try:
            self._boot(time.monotonic() + self.timeout)
        except BaseException:
            self.stop()
            raise
        self._serve()
        return self

    def _boot(self, deadline: float) -> None:
        assert self.dir is not None
        for sub in ("mon", "osd", "rgw", "log", "run", "crash"):
            os.mkdir(os.path.join(self.dir, sub))
        fsid = str(uuid.uuid4())
        with open(self._path("ceph.conf"), "w") as conf:
            conf.write(
                CEPH_CONF.format(
                    fsid=fsid,
                    dir=self.dir,
                    mon_port=self.mon_port,
                    port=self.port,
                    memstore_bytes=self.memstore_bytes,
                    rgw_name=RGW_NAME,
                    kms_key=RGW_TEST_KMS_KEY,
                    kms_key_bytes=RGW_TEST_KMS_KEY_BYTES,
                )
            )
        monmap = self._path("monmap")
        mon_addr = f"[v2:127.0.0.1:{self.mon_port}]"
        self._run(
            deadline, "monmaptool", "--create", "--fsid", fsid, "--addv", MON_ID, mon_addr, monmap
        )
        self._run(deadline, "ceph-mon", "--mkfs", "-i", MON_ID, "--monmap", monmap)
        self._spawn(f"mon.{MON_ID}", "ceph-mon", "-i", MON_ID)
        osd_uuid = str(uuid.uuid4())
        self._run(deadline, "ceph", "osd", "new", osd_uuid, OSD_ID)
        self._run(deadline, "ceph-osd", "--mkfs", "-i", OSD_ID, "--osd-uuid", osd_uuid)
        self._spawn(f"osd.{OSD_ID}", "ceph-osd", "-i", OSD_ID)
        self._spawn(RGW_NAME, "radosgw", "-n", RGW_NAME)
        self._wait_for_http(deadline)
        key = DUMMY_ENV["AWS_ACCESS_KEY_ID"]
        self._create_user(
            deadline, key, "s3commit test user", key, DUMMY_ENV["AWS_SECRET_ACCESS_KEY"]
        )

    def add_key(self, access_key: str, secret_key: str) -> None:
        """A second key pair for the test user: RGW checks signatures, so a test that needs
        credentials of its own (e.g. a secret it can search outputs for) registers them."""
        with self._admin:
            self._run(
                time.monotonic() + self.timeout,
                "radosgw-admin",
                "key",
                "create",
                "--uid",
                DUMMY_ENV["AWS_ACCESS_KEY_ID"],
                "--key-type",
                "s3",
                "--access-key",
                access_key,
                "--secret-key",
                secret_key,
            )

    def add_user(self, uid: str, access_key: str, secret_key: str, caps: str = "") -> None:
        """Another S3 user with its own key pair and admin ``caps`` (e.g. ``user-policy=*``:
        it may then attach IAM user policies through RGW's IAM API). A user that does not own
        the bucket gets only what its user policy allows, as an IAM user on AWS does."""
        deadline = time.monotonic() + self.timeout
        with self._admin:
            self._create_user(deadline, uid, uid, access_key, secret_key)
            if caps:
                self._run(deadline, "radosgw-admin", "caps", "add", "--uid", uid, "--caps", caps)

    def _create_user(
        self, deadline: float, uid: str, name: str, access_key: str, secret_key: str
    ) -> None:
        self._run(
            deadline,
            "radosgw-admin",
            "user",
            "create",
            "--uid",
            uid,
            "--display-name",
            name,
            "--access-key",
            access_key,
            "--secret-key",
            secret_key,
        )

    def _path(self, *parts: str) -> str:
        assert self.dir is not None
        return os.path.join(self.dir, *parts)

    def admin(self, *args: str, timeout: float = 600) -> str:
        """``radosgw-admin`` on this cluster (e.g. ``"gc", "process", "--include-all"``); its
        standard output, JSON for most commands."""
        return self._run(time.monotonic() + timeout, "radosgw-admin", *args)

    def _run(self, deadline: float, program: str, *args: str) -> str:
        """One Ceph command, bounded by ``deadline``; its output goes into errors, and its
        standard output is returned."""
        command = [program, "-c", self._path("ceph.conf"), *args]
        for attempt in range(CANCELED_ATTEMPTS):
            try:
                done = subprocess.run(
                    command,
                    stdin=subprocess.DEVNULL,
                    capture_output=True,
                    text=True,
                    cwd=self.dir,
                    timeout=max(deadline - time.monotonic(), 0.1),
                )
            except subprocess.TimeoutExpired as exc:
                self._fail(f"`{' '.join(command)}` did not finish in time", exc.stderr)
            # ECANCELED: radosgw-admin lost a race on the user's metadata object (another key
            # created meanwhile); it changed nothing, and the same command is made again
            if done.returncode != errno.ECANCELED or attempt == CANCELED_ATTEMPTS - 1:
                break
            time.sleep(0.1 * (attempt + 1))
        if done.returncode != 0:
            self._fail(f"`{' '.join(command)}` exited with {done.returncode}", done.stderr)
        return done.stdout

    def _spawn(self, name: str, program: str, *args: str) -> None:
        with open(self._path("log", f"{name}.out"), "wb") as out:
            self.daemons[name] = subprocess.Popen(
                [program, "-f", "-c", self._path("ceph.conf"), *args],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.dir,
                start_new_session=True,
            )

    def _wait_for_http(self, deadline: float) -> None:
        while True:
            for name, process in self.daemons.items():
                if process.poll() is not None:
                    what = f"{name} exited with {process.returncode}"
                    if process.returncode == errno.EADDRINUSE:  # radosgw exits with bind's errno
                        what += f" (EADDRINUSE: port {self.port} on 127.0.0.1 already in use)"
                    self._fail(what, daemons=[name])
            try:
                urllib.request.urlopen(self.endpoint, timeout=1).close()
                return
            except urllib.error.HTTPError:
                return  # an S3 error answer is an answer
            except OSError:
                if time.monotonic() > deadline:
                    self._fail(f"radosgw did not answer on {self.endpoint} in {self.timeout:.0f} s")
                time.sleep(0.05)

    def _fail(
        self, what: str, output: str | bytes | None = None, daemons: list[str] | None = None
    ) -> NoReturn:
        """Raise a RuntimeError with a command's output and the tails of the daemons' logs."""
        sections = [f"RGWServer start-up failed: {what}"]
        if output:
            text = output.decode(errors="replace") if isinstance(output, bytes) else output
            sections.append(log_tail("output", text))
        for name in daemons or reversed(self.daemons):
            for suffix in (".log", ".out"):
                try:
                    with open(self._path("log", name + suffix), errors="replace") as log:
                        sections.append(log_tail(name + suffix, log.read()))
                except OSError:
                    pass
        raise RuntimeError("\n".join(sections))

    def stop(self, grace: float = 10.0) -> None:
        """Stop the daemons (SIGTERM, SIGKILL after ``grace`` seconds) and remove the directory.

        One at a time, newest first: radosgw stopping together with the OSD waits for it (10 s
        and more), and the OSD tells the monitor that it is leaving (0.5 s in all, in order).
        """
        self._restore_env()
        atexit.unregister(self._stop_at_exit)
        for process in reversed(self.daemons.values()):
            _end(process, grace)
        self.daemons.clear()
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    def kill(self) -> None:
        """SIGKILL every daemon at once and remove the directory (the data is lost anyway)."""
        self.stop(grace=0)

    def _stop_at_exit(self) -> None:
        if os.getpid() == self._owner_pid:  # not in a forked child
            self.kill()


def _end(process: subprocess.Popen, grace: float) -> None:
    """SIGTERM, then SIGKILL if the process is still alive after ``grace`` seconds (0: at once)."""
    if process.poll() is None:
        if grace > 0:
            process.terminate()
            try:
                process.wait(grace)
                return
            except subprocess.TimeoutExpired:
                pass
        process.kill()
    process.wait()


def log_tail(title: str, text: str) -> str:
    """The log's error lines, then its last lines: a daemon that crashes on its way out (a bind
    failure often ends in abort()) pushes the line that says why out of a plain tail."""
    lines = text.rstrip().splitlines()
    said = ("error", "fail")
    errors = [line for line in lines[:-LOG_TAIL_LINES] if any(w in line.lower() for w in said)]
    head = f"--- error lines of {title} ---\n" + "\n".join(errors[-5:]) + "\n" if errors else ""
    return head + f"--- last lines of {title} ---\n" + "\n".join(lines[-LOG_TAIL_LINES:])


def main(argv: list[str] | None = None) -> None:
    """Run an RGWServer until Ctrl-C (or SIGTERM), printing what a shell needs to use it."""
    parser = argparse.ArgumentParser(prog="python -m s3commit_sdk.testing.rgw", description=__doc__)
    parser.add_argument("--bucket", default="sandbox", help="bucket to create ('' for none)")
    parser.add_argument("--port", type=int, default=None, help="S3 port (default: a free one)")
    parser.add_argument("--env-file", metavar="PATH", help="also write the environment here")
    args = parser.parse_args(argv)
    serve(RGWServer(bucket=args.bucket, port=args.port, export=False), args.env_file)


if __name__ == "__main__":
    main()
