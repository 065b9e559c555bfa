"""Server lifecycle: start-up failures are diagnosed and every process the server spawned is gone
afterwards — checked by PID, including a grandchild that left the process group and ignores
SIGTERM, and including after the parent is killed with SIGKILL."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from arbor.sandbox.runners.proctree import pid_alive
from arbor.sandbox.serving.leases import LEASE_ENV, cleanup_stale, lease_processes
from arbor.sandbox.serving.lifecycle import ServerConfig, ServerStartError, start_servers

from .conftest import scripted_argv


def py(code: str) -> list[str]:
    return [sys.executable, "-c", textwrap.dedent(code), "{port}"]


def start(argv, tmp_path, **kw):
    registry = []
    cfg = ServerConfig(argv=argv, lease_dir=tmp_path / "leases", **{"startup_timeout_s": 20, "stop_grace_s": 1, **kw})
    try:
        start_servers([cfg], registry)
    finally:
        for s in registry:
            s.stop()
    return registry[0]


def gone(pids, timeout=5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not any(pid_alive(p) for p in pids):
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("code, cls, needle", [
    ("import sys; print('bad flag --max-num-seqs'); sys.exit(3)", "startup_failed", "status 3"),
    ("import sys; print('torch.OutOfMemoryError: CUDA out of memory'); sys.exit(1)", "oom", "OutOfMemoryError"),
    ("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", "oom", "status -9"),
])
def test_startup_crash_is_diagnosed_and_nothing_is_left(tmp_path, code, cls, needle):
    with pytest.raises(ServerStartError) as e:
        start(py(code), tmp_path)
    assert e.value.error_class == cls and needle in (str(e.value) + e.value.log_tail)
    assert not list((tmp_path / "leases").glob("*.json"))


def test_startup_hang_times_out_and_is_killed(tmp_path):
    registry = []
    cfg = ServerConfig(argv=py("import time; time.sleep(120)"), lease_dir=tmp_path / "leases",
                       startup_timeout_s=1.0, stop_grace_s=0.5)
    t0 = time.monotonic()
    with pytest.raises(ServerStartError) as e:
        try:
            start_servers([cfg], registry)
        finally:
            pid = registry[0].pid
            assert pid_alive(pid)
            registry[0].stop()
    assert e.value.error_class == "timeout" and time.monotonic() - t0 < 15
    assert gone([pid])


def test_stop_kills_children_and_escaped_grandchildren(tmp_path):
    pid_file = tmp_path / "pids.json"
    registry = []
    cfg = ServerConfig(argv=scripted_argv(spawn=True, pid_file=pid_file), lease_dir=tmp_path / "leases",
                       startup_timeout_s=20, stop_grace_s=0.5)
    (s,) = start_servers([cfg], registry)
    try:
        pids = json.loads(pid_file.read_text())
        assert len(pids) == 3 and all(pid_alive(p) for p in pids)
        assert s.base_url.startswith("http://127.0.0.1:")
        assert sorted(lease_processes(s.token)) == sorted(pids)  # the token reaches the setsid'd one
        assert os.getpgid(pids[2]) != os.getpgid(pids[0])  # the grandchild left the group
    finally:
        s.stop()
    assert gone(pids)
    assert not list((tmp_path / "leases").glob("*.json"))


PARENT = """
import json, sys, time
from pathlib import Path
from arbor.sandbox.serving.lifecycle import ServerConfig, start_servers
argv, lease_dir, out = json.loads(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
reg = []
(s,) = start_servers([ServerConfig(argv=argv, lease_dir=lease_dir, startup_timeout_s=20)], reg)
out.write_text(json.dumps({"server": s.pid, "token": s.token}))
time.sleep(120)
"""


def test_kill_9_of_the_parent_leaves_nothing_after_the_next_start(tmp_path):
    """PR_SET_PDEATHSIG kills the server at once; its setsid'd grandchild is found by its lease
    token and killed by the next start's sweep."""
    pid_file, info = tmp_path / "pids.json", tmp_path / "info.json"
    argv = scripted_argv(spawn=True, pid_file=pid_file)
    env = {k: v for k, v in os.environ.items() if k != LEASE_ENV}
    parent = subprocess.Popen([sys.executable, "-c", PARENT, json.dumps(argv), str(tmp_path / "leases"), str(info)],
                              env=env)
    try:
        deadline = time.monotonic() + 30
        while not info.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert info.exists(), "the parent never got its server healthy"
        pids = json.loads(pid_file.read_text())
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        assert gone([pids[0]]), "PDEATHSIG did not take the server down with its parent"
        assert pid_alive(pids[2])  # the escaped grandchild outlives it ...
        killed = cleanup_stale(tmp_path / "leases")
        assert pids[2] in killed  # ... until the next start sweeps the lease
        assert gone(pids)
        assert not list((tmp_path / "leases").glob("*.json"))
    finally:
        if parent.poll() is None:
            parent.kill()
        for p in json.loads(pid_file.read_text()) if pid_file.exists() else []:
            if pid_alive(p):
                os.kill(p, signal.SIGKILL)


def test_a_live_owners_lease_is_left_alone(tmp_path):
    registry = []
    cfg = ServerConfig(argv=scripted_argv(), lease_dir=tmp_path / "leases", startup_timeout_s=20)
    (s,) = start_servers([cfg], registry)
    pid = s.pid
    try:
        assert cleanup_stale(tmp_path / "leases") == []  # our own, running server
        assert pid_alive(pid)
    finally:
        s.stop()
    assert gone([pid])


def test_missing_executable_is_a_startup_failure(tmp_path):
    with pytest.raises(ServerStartError) as e:
        start(["/nonexistent/vllm", "serve", "--port", "{port}"], tmp_path)
    assert e.value.error_class == "startup_failed" and "cannot execute" in str(e.value)
