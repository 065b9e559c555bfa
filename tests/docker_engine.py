"""A real Docker engine for ``docker``-marked tests (a session fixture, see tests/conftest.py).

Uses the engine at $DOCKER_HOST or /var/run/docker.sock when one answers; otherwise, as root with
Debian's ``docker.io`` installed, starts a private ``dockerd`` (temp ``--data-root``, no iptables,
no bridge: sandbox containers use ``network_mode="none"``), points $DOCKER_HOST at it for the
session (CLI subprocesses inherit it), and stops it by PID at the end. Skips, with the reason,
only when no engine can run here.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

_START_TIMEOUT_S = 60


def _ping(url: str) -> bool:
    try:
        import docker

        docker.DockerClient(base_url=url, timeout=5).ping()
        return True
    except Exception:  # noqa: BLE001
        return False


def engine_possible() -> bool:
    """Cheap check used at collection time: could a docker test run here at all?"""
    if os.environ.get("DOCKER_HOST") or Path("/var/run/docker.sock").exists():
        return True
    return os.geteuid() == 0 and shutil.which("dockerd") is not None


def _unmount_under(root: str) -> None:
    try:
        mounts = [ln.split()[1] for ln in Path("/proc/mounts").read_text().splitlines()]
    except OSError:
        return
    for m in sorted((m for m in mounts if m.startswith(root)), key=len, reverse=True):
        subprocess.run(["umount", "-l", m], capture_output=True, check=False)


class PrivateDockerd:
    def __init__(self) -> None:
        self.root = tempfile.mkdtemp(prefix="arbor-dockerd-", dir="/tmp")
        self.url = f"unix://{self.root}/docker.sock"
        self.log = Path(self.root) / "dockerd.log"
        self.proc: subprocess.Popen | None = None

    @staticmethod
    def remove_stale() -> None:
        """Data roots of private daemons whose pytest was killed (their dockerd.pid is dead)."""
        for root in Path(tempfile.gettempdir()).glob("arbor-dockerd-*"):
            pidfile = root / "dockerd.pid"
            try:
                if not pidfile.exists():
                    if time.time() - root.stat().st_mtime < 600:
                        continue  # no pid file yet: maybe a daemon that is still starting
                else:
                    os.kill(int(pidfile.read_text()), 0)
                    continue  # still running: another session's engine
            except ProcessLookupError:
                pass
            except (OSError, ValueError):
                continue
            _unmount_under(str(root))
            shutil.rmtree(root, ignore_errors=True)

    def start(self) -> None:
        self.remove_stale()
        from arbor.sandbox.runners.isolation import PR_SET_PDEATHSIG, libc

        prctl = libc().prctl

        def die_with_pytest() -> None:  # a killed pytest must not leave an engine running
            prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)

        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(
                ["dockerd", f"--data-root={self.root}/data", f"--exec-root={self.root}/exec",
                 f"--pidfile={self.root}/dockerd.pid", f"--host={self.url}", "--iptables=false",
                 "--ip6tables=false", "--bridge=none", "--ip-masq=false"],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                preexec_fn=die_with_pytest)
        deadline = time.monotonic() + _START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            if _ping(self.url):
                return
            time.sleep(0.2)
        reason = self.reason()
        self.stop()
        raise RuntimeError(reason)

    def reason(self) -> str:
        try:
            lines = [ln for ln in self.log.read_text(errors="replace").splitlines()
                     if "level=fatal" in ln or "level=error" in ln or "failed" in ln]
        except OSError:
            lines = []
        return f"dockerd did not start: {(lines[-1] if lines else 'no answer within 60 s')[:300]}"

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                import docker

                client = docker.DockerClient(base_url=self.url, timeout=10)
                for c in client.containers.list(all=True):
                    c.remove(force=True)
            except Exception:  # noqa: BLE001
                pass
            self.proc.send_signal(signal.SIGTERM)  # by PID: never by name
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        _unmount_under(self.root)
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture(scope="session")
def docker_engine():
    """The base URL of a working engine; $DOCKER_HOST points at it for the session."""
    existing = os.environ.get("DOCKER_HOST")
    for url in filter(None, [existing, "unix:///var/run/docker.sock"]):
        if _ping(url):
            os.environ["DOCKER_HOST"] = url
            yield url
            return
    if not (os.geteuid() == 0 and shutil.which("dockerd")):
        pytest.skip("no Docker engine and cannot start one (needs root and dockerd: apt-get install docker.io)")
    daemon = PrivateDockerd()
    try:
        daemon.start()
    except (RuntimeError, OSError) as exc:
        pytest.skip(str(exc))
    os.environ["DOCKER_HOST"] = daemon.url
    try:
        yield daemon.url
    finally:
        if existing is None:
            os.environ.pop("DOCKER_HOST", None)
        else:
            os.environ["DOCKER_HOST"] = existing
        daemon.stop()
