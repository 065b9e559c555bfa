"""Start, health-check and always stop the inference server under test.

The failure modes this module exists for: orphaned servers holding GPU memory after a
timeout, ``pkill -f vllm`` killing the tuner itself, OOM discovered only mid-benchmark. So:

* the server runs in **its own session / process group** (``killpg`` reaches every process it
  spawned that did not leave the group), on a **free port on 127.0.0.1**;
* the direct child gets ``PR_SET_PDEATHSIG = SIGKILL`` (Linux ``prctl`` through ctypes in
  ``preexec_fn``): if Arbor is ``kill -9``-ed, the kernel kills the server at once;
* every process of the server carries a **lease token** in its environment
  (``ARBOR_SERVER_LEASE``) and the token is written to a lease file. Stopping kills the group,
  then sweeps ``/proc`` for the token (workers that called ``setsid`` are found too); the next
  start sweeps the tokens of lease files whose owner died — this is how grandchildren of a
  ``kill -9``-ed run are cleaned up. Nothing is ever killed by name;
* start-up is watched: a process that exits before it is healthy is diagnosed ``oom`` (out of
  memory text in its log, or SIGKILL we did not send) or ``startup_failed``; one that never gets
  healthy is a ``timeout``. Either way it is stopped.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from .leases import LEASE_ENV, _proc_start_time, _wait_gone, default_lease_dir

PR_SET_PDEATHSIG = 1
# Variables a server legitimately needs from the parent (device visibility, caches, locale).
PASSTHROUGH_ENV = (
    "PATH", "LANG", "LC_ALL", "HOME", "USER", "TMPDIR", "LD_LIBRARY_PATH", "VIRTUAL_ENV",
    "CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_HOME",
    "HF_HOME", "HF_HUB_CACHE", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE",
    "XDG_CACHE_HOME", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR",
)
PASSTHROUGH_PREFIXES = ("VLLM_", "SGLANG_", "NCCL_")
_OOM = re.compile(r"out of memory|OutOfMemoryError|MemoryError|Cannot allocate memory|std::bad_alloc|"
                  r"CUDA error: out of memory|insufficient memory|not enough memory", re.I)
_ADDR_IN_USE = re.compile(r"address already in use|Errno 98", re.I)
_LOG_TAIL = 4000


class ServerStartError(RuntimeError):
    """The server did not become healthy: ``error_class`` is oom | startup_failed | timeout."""

    def __init__(self, error_class: str, message: str, log_tail: str = ""):
        super().__init__(message)
        self.error_class = error_class
        self.log_tail = log_tail

    def __reduce__(self):  # type: ignore[no-untyped-def]
        # the default passes only the message: the receiving process would lose the error class
        return (type(self), (self.error_class, str(self), self.log_tail))


@dataclass
class ServerConfig:
    argv: list[str]  # may contain {port} and {host}
    env: dict[str, str] = field(default_factory=dict)  # values may contain {port} and {host}
    health_path: str = "/health"
    startup_timeout_s: float = 300.0
    stop_grace_s: float = 10.0
    memory_bytes: int | None = None
    lease_dir: Path | None = None
    label: str = "server"
    passthrough: tuple[str, ...] = ()
    host: str = "127.0.0.1"


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _prctl():
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.prctl
    except (OSError, AttributeError):  # not Linux: the lease sweep still cleans up
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    return fn


def _make_preexec(memory_bytes: int | None, parent_pid: int):
    prctl = _prctl()  # resolved before fork: the child only calls it

    def preexec() -> None:
        if prctl is not None:
            prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            if os.getppid() != parent_pid:  # the parent died between fork and prctl
                os._exit(1)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if memory_bytes is not None:
            _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
            value = memory_bytes if hard == resource.RLIM_INFINITY else min(memory_bytes, hard)
            resource.setrlimit(resource.RLIMIT_AS, (value, value))

    return preexec


def diagnose(returncode: int | None, log: str) -> str:
    if _OOM.search(log or "") or returncode == -signal.SIGKILL:
        return "oom"
    return "startup_failed"


def _render(text: str, port: int, host: str) -> str:
    return text.replace("{port}", str(port)).replace("{host}", host)


def _server_env(cfg: ServerConfig, port: int, token: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k in PASSTHROUGH_ENV or k in cfg.passthrough or k.startswith(PASSTHROUGH_PREFIXES)}
    env.setdefault("PATH", os.defpath)
    env["PYTHONUNBUFFERED"] = "1"
    env.update({k: _render(v, port, cfg.host) for k, v in cfg.env.items()})
    env[LEASE_ENV] = token
    return env


def _peek_exit(pid: int) -> int | None:
    """The exit status of our child *without reaping it* (so its pgid cannot be recycled yet)."""
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return 0
    if info is None or info.si_pid == 0:
        return None
    return -info.si_status if info.si_code in (os.CLD_KILLED, os.CLD_DUMPED) else info.si_status


class ServerProcess:
    """One server instance. Use as a context manager, or call ``stop()`` in a ``finally``."""

    def __init__(self, cfg: ServerConfig):
        self.cfg = cfg
        self.port: int | None = None
        self.proc: subprocess.Popen | None = None
        self.token = os.urandom(12).hex()
        self.workdir: str | None = None
        self.lease_file: Path | None = None
        self.startup_s: float | None = None
        self.returncode: int | None = None
        self._log_file = None
        self._t0 = 0.0
        self._final_log = ""

    @property
    def base_url(self) -> str:
        return f"http://{self.cfg.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def start(self) -> "ServerProcess":
        self.port = free_port(self.cfg.host)
        argv = [_render(a, self.port, self.cfg.host) for a in self.cfg.argv]
        self.workdir = tempfile.mkdtemp(prefix=f"arbor-{self.cfg.label}-")
        self._log_file = open(Path(self.workdir) / "server.log", "wb")
        self._t0 = time.monotonic()
        # Ctrl-C is held back from fork until the lease is written: a KeyboardInterrupt raised in
        # Python's after-fork hooks is printed and *ignored*, which would lose the user's Ctrl-C,
        # and one raised between fork and ``self.proc = ...`` would leave a server nobody stops.
        with _sigint_held():
            try:
                self.proc = subprocess.Popen(
                    argv, cwd=self.workdir, env=_server_env(self.cfg, self.port, self.token),
                    stdin=subprocess.DEVNULL, stdout=self._log_file, stderr=subprocess.STDOUT,
                    start_new_session=True, preexec_fn=_make_preexec(self.cfg.memory_bytes, os.getpid()),
                    close_fds=True)
            except OSError as exc:
                self._cleanup_files()
                raise ServerStartError("startup_failed", f"{self.cfg.label}: cannot execute {argv[0]!r}: "
                                       f"{exc.strerror}") from None
            self._write_lease(argv)
        return self

    def _write_lease(self, argv: list[str]) -> None:
        d = self.cfg.lease_dir or default_lease_dir()
        d.mkdir(parents=True, exist_ok=True)
        self.lease_file = d / f"{self.token}.json"
        self.lease_file.write_text(json.dumps({
            "token": self.token, "pid": self.proc.pid, "pgid": self.proc.pid, "label": self.cfg.label,
            "argv": argv, "owner_pid": os.getpid(), "owner_start": _proc_start_time(os.getpid()),
            "created": time.time()}))

    def exited(self) -> int | None:
        if self.proc is None:
            return self.returncode
        return _peek_exit(self.proc.pid)

    def log_tail(self, limit: int = _LOG_TAIL) -> str:
        if self.workdir is None:
            return self._final_log[-limit:]
        try:
            data = (Path(self.workdir) / "server.log").read_bytes()
        except OSError:
            return self._final_log[-limit:]
        return data[-limit:].decode("utf-8", "replace")

    def check_health(self, client: httpx.Client) -> bool:
        try:
            return client.get(self.base_url + self.cfg.health_path, timeout=2.0).status_code == 200
        except httpx.HTTPError:
            return False

    def startup_error(self) -> ServerStartError | None:
        rc = self.exited()
        if rc is None:
            return None
        log = self.log_tail()
        cls = diagnose(rc, log)
        last = next((ln for ln in reversed(log.strip().splitlines()) if ln.strip()), "no output")
        return ServerStartError(cls, f"{self.cfg.label} server exited with status {rc} before it was "
                                f"healthy: {last.strip()[:300]}", log)

    def stop(self) -> None:
        """Stop the server and everything it spawned; safe to call twice, never raises."""
        if self.proc is None:
            return
        pid = self.proc.pid
        try:
            if self.exited() is None:
                _signal_group(pid, signal.SIGTERM)
                deadline = time.monotonic() + self.cfg.stop_grace_s
                while self.exited() is None and time.monotonic() < deadline:
                    time.sleep(0.05)
            _signal_group(pid, signal.SIGKILL)  # the unreaped leader still holds the pgid
        finally:
            _signal_group(pid, signal.SIGKILL)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL cannot be ignored
                pass
            self.returncode = self.proc.returncode
            left = _wait_gone(self.token, 5.0)
            self._final_log = self.log_tail()
            self.proc = None
            if not left and self.lease_file is not None:
                self.lease_file.unlink(missing_ok=True)
            self._cleanup_files()

    def _cleanup_files(self) -> None:
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None

    def __enter__(self) -> "ServerProcess":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


@contextlib.contextmanager
def _sigint_held():
    """Record a SIGINT instead of raising it, and raise it (via the previous handler) on exit.

    Blocking the signal with a thread mask is not enough: a process-directed SIGINT is then
    taken by another thread, whose C handler still makes the main thread raise mid-fork."""
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread receives KeyboardInterrupt
        return
    got: list[int] = []
    prev = signal.signal(signal.SIGINT, lambda signum, frame: got.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, prev)
        if got and callable(prev):
            prev(signal.SIGINT, None)  # default_int_handler raises KeyboardInterrupt


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def stop_all(servers: list[ServerProcess]) -> None:
    """Stop every server; a Ctrl-C pressed meanwhile waits until all are down, then is raised."""
    with _sigint_held():
        for s in servers:
            s.stop()


def wait_healthy(servers: list[ServerProcess], timeout_s: float | None = None) -> None:
    """Wait until every server answers its health path; raises ServerStartError (and leaves the
    stopping to the caller, who owns the servers)."""
    t0 = time.monotonic()
    pending = list(servers)
    with httpx.Client(trust_env=False) as client:
        delay = 0.05
        while pending:
            for s in list(pending):
                err = s.startup_error()
                if err is not None:
                    raise err
                if s.check_health(client):
                    s.startup_s = time.monotonic() - s._t0
                    pending.remove(s)
            if not pending:
                break
            limit = timeout_s if timeout_s is not None else max(s.cfg.startup_timeout_s for s in pending)
            if time.monotonic() - t0 > limit:
                s = pending[0]
                raise ServerStartError("timeout", f"{s.cfg.label} server not healthy at "
                                       f"{s.cfg.health_path} after {limit:g} s", s.log_tail())
            time.sleep(delay)
            delay = min(delay * 1.5, 0.5)


def start_servers(cfgs: list[ServerConfig], registry: list[ServerProcess], retries: int = 2) -> list[ServerProcess]:
    """Start every server, then wait for all to be healthy. Each started server is appended to
    ``registry`` *before* anything can fail, so the caller's ``finally`` stops it. A server that
    lost the race for its port is restarted on a fresh one."""
    servers = []
    for cfg in cfgs:
        s = ServerProcess(cfg)
        registry.append(s)
        servers.append(s.start())
    for attempt in range(retries + 1):
        try:
            wait_healthy(servers)
            return servers
        except ServerStartError as err:
            clash = [s for s in servers if s.exited() is not None and _ADDR_IN_USE.search(s.log_tail())]
            if not clash or attempt == retries:
                raise err from None
            for s in clash:
                s.stop()
                s.start()
    return servers
