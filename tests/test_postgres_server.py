"""The PostgreSQL launcher: a real database on 127.0.0.1 for the Iceberg SQL catalog's tests.

These tests start their own servers and check what the catalog tests rely on: SQL through
SQLAlchemy at ``uri`` (as pyiceberg's SqlCatalog connects), TCP on 127.0.0.1 only with a
password, servers side by side, and nothing left behind, whether stopped, failed or killed.
"""

from __future__ import annotations

import glob
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

import psycopg2
import pytest
import sqlalchemy as sa
from conftest import children_named

from s3commit_sdk.testing.postgres import PostgresServer, PostgresServerError

pytestmark = pytest.mark.postgres


@pytest.fixture(scope="module")
def pg():
    with PostgresServer() as server:
        yield server


def running(pid: int) -> bool:
    """Whether ``pid`` runs: a zombie (killed, not yet reaped by its new parent) does not."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def postgres_children() -> set[int]:
    """postgres processes that are children of this process (postmasters), not yet reaped."""
    return children_named({"postgres"})


def server_dirs() -> set[str]:
    return set(glob.glob(os.path.join(tempfile.gettempdir(), "s3commit-postgres-*")))


def test_answers_sql_through_sqlalchemy_at_its_uri(pg):
    engine = sa.create_engine(pg.uri)
    try:
        with engine.begin() as db:
            db.execute(sa.text("CREATE TABLE pointers (name text PRIMARY KEY, location text)"))
            db.execute(
                sa.text("INSERT INTO pointers VALUES (:name, :location)"),
                [{"name": "db.events", "location": "s3://b/t/metadata/00001.json"}],
            )
        with engine.connect() as db:
            rows = db.execute(sa.text("SELECT name, location FROM pointers")).all()
            assert rows == [("db.events", "s3://b/t/metadata/00001.json")]
            assert db.execute(sa.text("SELECT current_database(), current_user")).one() == (
                pg.database,
                pg.user,
            )
    finally:
        engine.dispose()


def test_tcp_wants_the_password_and_listens_on_127_0_0_1_only(pg):
    with psycopg2.connect(pg.dsn) as db, db.cursor() as cursor:
        cursor.execute("SHOW listen_addresses")
        assert cursor.fetchone() == ("127.0.0.1",)
    db.close()
    with pytest.raises(psycopg2.OperationalError, match="password authentication failed"):
        psycopg2.connect(pg.dsn.replace(pg.password, "wrong"))
    # Linux routes all of 127.0.0.0/8 to this host: nothing listens on another of its addresses
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.2", pg.port), timeout=5).close()


def test_two_servers_at_once_keep_their_own_data(pg):
    with PostgresServer(database="other", user="someone") as other:
        assert other.port != pg.port
        with psycopg2.connect(other.dsn) as db, db.cursor() as cursor:
            cursor.execute("CREATE TABLE only_here (n int)")
        db.close()
        with psycopg2.connect(pg.dsn) as db, db.cursor() as cursor:
            cursor.execute("SELECT to_regclass('only_here')")
            assert cursor.fetchone() == (None,)
        db.close()


def test_stop_ends_every_process_with_a_client_connected_and_removes_the_directory():
    server = PostgresServer().start()
    try:
        client = psycopg2.connect(server.dsn)  # a smart shutdown would wait for it
        pids, directory = server.pids, server.dir
        assert server.process is not None and pids[0] == server.process.pid
        assert len(pids) > 2  # the postmaster, its background workers and our backend
        assert directory is not None and os.path.isdir(directory)
    finally:
        started = time.monotonic()
        server.stop()
    assert time.monotonic() - started < 5
    assert not [pid for pid in pids if running(pid)]
    assert not os.path.exists(directory)
    assert server.pids == [] and server.dir is None
    client.close()


def test_failed_start_names_the_taken_port_and_leaves_nothing(pg):
    before, dirs_before = postgres_children(), server_dirs()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        server = PostgresServer(port=taken.getsockname()[1])
        failed = r"(?s)exited with 1 \(EADDRINUSE: port \d+ .*already in use.*postgres\.log"
        with pytest.raises(PostgresServerError, match=failed):
            server.start()
    assert postgres_children() == before and pg.process.pid in before
    assert server_dirs() == dirs_before
    assert server.dir is None and server.process is None


def test_a_killed_server_is_detected_and_stop_clears_its_orphans():
    server = PostgresServer().start()
    try:
        server.check()
        psycopg2.connect(server.dsn).close()
        pids, directory = server.pids, server.dir
        assert server.process is not None
        os.kill(server.process.pid, signal.SIGKILL)
        server.process.wait(10)
        with pytest.raises(PostgresServerError, match=r"(?s)is down: postgres exited with -9"):
            server.check()
        with pytest.raises(psycopg2.OperationalError):
            psycopg2.connect(server.dsn, connect_timeout=5)
    finally:
        server.stop()
    assert not [pid for pid in pids if running(pid)]
    assert directory is not None and not os.path.exists(directory)


def test_python_m_serves_until_sigterm_and_writes_the_env_file(tmp_path):
    env_file = tmp_path / "pg.env"
    process = subprocess.Popen(
        [sys.executable, "-m", "s3commit_sdk.testing.postgres", "--env-file", str(env_file)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while not env_file.exists() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        env = dict(line.split("=", 1) for line in env_file.read_text().splitlines())
        with psycopg2.connect("", **_libpq(env)) as db, db.cursor() as cursor:
            cursor.execute("SELECT current_database()")
            assert cursor.fetchone() == ("s3commit",)
        db.close()
        assert env["S3COMMIT_POSTGRES_URI"].startswith("postgresql+psycopg2://s3commit:")
    finally:
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    assert "export PGPORT=" in out and "stopped" in err
    assert not env_file.exists()


def _libpq(env: dict[str, str]) -> dict[str, str]:
    """psycopg2.connect's keywords from libpq's PG* variables."""
    names = {"PGHOST": "host", "PGPORT": "port", "PGDATABASE": "dbname", "PGUSER": "user"}
    return {keyword: env[name] for name, keyword in names.items()} | {"password": env["PGPASSWORD"]}
