"""A private PostgreSQL server for the store tests (session fixture ``pg_server``; ``pg_url`` gives
each test a fresh database on it).

Where Debian's PostgreSQL binaries exist (``initdb``, ``postgres``), starts one in a temp dir: a
free port on 127.0.0.1, the unix socket in the temp dir, trust auth, fsync off; as root it runs as
the ``postgres`` user (the server refuses root). Stopped by PID at the end of the session. With
$ARBOR_TEST_PG_URL set, that server is used instead (its user must be allowed CREATE DATABASE).
Skips with the reason where neither exists.
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import pytest

_START_TIMEOUT_S = 60


def pg_bindir() -> Path | None:
    found = shutil.which("initdb")
    if found:
        return Path(found).parent
    dirs = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(dirs[-1]).parent if dirs else None


def pg_possible() -> bool:
    if os.environ.get("ARBOR_TEST_PG_URL"):
        return True
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return False
    if pg_bindir() is None:
        return False
    if os.geteuid() == 0:
        import pwd

        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return False
    return True


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PgServer:
    """One postgres process; ``kill()``/``start()`` let chaos tests take it away mid-run."""

    def __init__(self) -> None:
        self.bindir = pg_bindir()
        self.tmp = Path(tempfile.mkdtemp(prefix="arbor-pg-"))
        self.data, self.sock = self.tmp / "data", self.tmp / "sock"
        self.sock.mkdir()
        self.port = _free_port()
        self.proc: subprocess.Popen | None = None
        self.user = None
        if os.geteuid() == 0:
            import pwd

            pw = pwd.getpwnam("postgres")
            self.user = "postgres"
            for p in (self.tmp, self.sock):
                os.chown(p, pw.pw_uid, pw.pw_gid)
        subprocess.run([str(self.bindir / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "arbor",
                        "--no-sync", "-E", "UTF8"], check=True, capture_output=True, user=self.user)

    @property
    def admin_url(self) -> str:
        return f"postgresql+psycopg://arbor@127.0.0.1:{self.port}/postgres"

    def start(self) -> None:
        log = open(self.tmp / "server.log", "ab")
        self.proc = subprocess.Popen(
            [str(self.bindir / "postgres"), "-D", str(self.data), "-k", str(self.sock), "-p", str(self.port),
             "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off",
             "-c", "full_page_writes=off", "-c", "max_connections=200"],
            stdout=log, stderr=subprocess.STDOUT, user=self.user, start_new_session=True)
        log.close()
        deadline = time.time() + _START_TIMEOUT_S
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError((self.tmp / "server.log").read_text()[-2000:])
            try:
                import psycopg

                psycopg.connect(self.admin_url.replace("+psycopg", ""), connect_timeout=2).close()
                return
            except Exception:  # noqa: BLE001  not up yet
                time.sleep(0.2)
        raise RuntimeError("postgres did not start in time")

    def kill(self) -> None:
        """SIGKILL the postmaster and its backends (a crashed server)."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        # backends of a SIGKILLed postmaster exit on their own; wait for the port to free up
        time.sleep(0.5)
        (self.data / "postmaster.pid").unlink(missing_ok=True)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)  # fast shutdown
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        shutil.rmtree(self.tmp, ignore_errors=True)


def create_database(admin_url: str) -> str:
    """A fresh database on the server of ``admin_url``; returns its SQLAlchemy URL."""
    import psycopg
    from sqlalchemy import make_url

    name = f"arbor_t_{uuid.uuid4().hex[:12]}"
    u = make_url(admin_url)
    with psycopg.connect(u.set(drivername="postgresql").render_as_string(hide_password=False),
                         autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return u.set(database=name).render_as_string(hide_password=False)


@pytest.fixture(scope="session")
def pg_server():
    """The admin URL of a PostgreSQL server for this session (skips where none can run)."""
    env = os.environ.get("ARBOR_TEST_PG_URL")
    if env:
        yield env
        return
    if not pg_possible():
        pytest.skip("needs PostgreSQL (Debian's postgresql package: initdb/postgres) and psycopg")
    server = PgServer()
    try:
        server.start()
        yield server.admin_url
    finally:
        server.stop()


@pytest.fixture
def pg_url(pg_server) -> str:
    """A fresh, empty database per test: contract tests never see each other's rows."""
    return create_database(pg_server)
