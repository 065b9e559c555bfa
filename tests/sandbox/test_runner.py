"""LocalRunner containment: the whole tree dies, output is bounded, the environment and the rest of
the machine are out of reach, temp dirs and cgroups never outlive a job (even a kill -9 of Arbor)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from arbor.sandbox.runners import isolation
from arbor.sandbox.runners.proctree import cgroup_available
from arbor.sandbox.runners.local import LocalRunner
from arbor.sandbox.runner import Job, JobResult, SandboxError, make_runner

from tests.hostile.helpers import job_processes

PY = sys.executable


@pytest.fixture(scope="module", autouse=True)
def _host_pids(host_pids):  # these tests follow a job's processes by the pids it reports
    yield


def _dead(pid: int, wait_s: float = 3.0) -> bool:
    """True once ``pid`` is gone or a zombie (killed but not yet reaped by init)."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/status").read_text()
        except FileNotFoundError:
            return True
        if "\nState:\tZ" in state:
            return True
        time.sleep(0.05)
    return False


def _arbor_cgroups() -> set[str]:
    base = Path("/sys/fs/cgroup/pids")
    mine = f"arbor-{os.getpid()}-"
    return {p.name for p in base.glob(f"{mine}*")} if base.is_dir() else set()


@pytest.fixture(scope="module")
def runner() -> LocalRunner:
    return LocalRunner()


def test_timeout_kills_grandchildren(runner):
    script = "sleep 60 & echo $! > gc.pid; wait"
    t0 = time.monotonic()
    res = runner.run(Job(["sh", "-c", script], {}, timeout_s=1.0, collect=["gc.pid"]))
    assert res.timed_out
    assert time.monotonic() - t0 < 5
    assert res.signal == 9 and res.returncode == -9
    assert _dead(int(res.outputs["gc.pid"])), "grandchild survived the timeout"


def test_setsid_double_fork_daemon_is_killed(runner):
    """A daemon that left the process group and session (reparented to init) still dies."""
    code = textwrap.dedent("""
        import os, time
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                open('daemon.pid', 'w').write(str(os.getpid()))
                time.sleep(120)
            os._exit(0)
        time.sleep(0.5)
        print(open('daemon.pid').read())
    """)
    res = runner.run(Job([PY, "-c", code], {}, timeout_s=20))
    assert res.returncode == 0, res.stderr_tail
    pid = int(res.stdout_tail.strip())
    assert _dead(pid), f"setsid daemon {pid} survived"
    assert any("left running" in n for n in res.notes)
    assert not _arbor_cgroups()


def test_fork_bomb_is_contained():
    code = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    res = LocalRunner(max_processes=32).run(Job([PY, "-c", code], {}, timeout_s=2))
    assert res.timed_out
    assert job_processes(os.getpid()) == []
    assert not _arbor_cgroups()


def test_output_truncated_to_tail(runner):
    code = "import sys; sys.stdout.write('x' * 50_000_000 + 'END'); sys.stderr.write('e' * 10)"
    res = runner.run(Job([PY, "-c", code], {}, timeout_s=30, max_output_bytes=4096))
    assert res.returncode == 0
    assert res.stdout_tail.endswith("x" * 100 + "END")
    assert len(res.stdout_tail) < 4096 + 100
    assert "discarded" in res.stdout_tail.splitlines()[0]
    assert res.stderr_tail == "e" * 10
    assert res.stdout_bytes == 50_000_003


def test_env_scrubbed(runner, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp-secret")
    code = "import json, os; print(json.dumps({'env': dict(os.environ), 'cwd': os.getcwd()}))"
    res = runner.run(Job([PY, "-c", code], {}, timeout_s=30, env={"ARBOR_X": "1"}))
    out = json.loads(res.stdout_tail)
    env = out["env"]
    assert "OPENAI_API_KEY" not in env and "GITHUB_TOKEN" not in env
    assert "secret" not in res.stdout_tail
    assert env["HOME"] == out["cwd"] == env["TMPDIR"]
    assert env["PYTHONHASHSEED"] == "0" and env["ARBOR_X"] == "1"
    assert env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    allowed = {"PATH", "LANG", "LC_ALL", "HOME", "TMPDIR", "PYTHONHASHSEED", "ARBOR_X", "ARBOR_JOB",
               "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "CUDA_DEVICE_ORDER",
               "NUMEXPR_NUM_THREADS", "CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES",
               "ROCR_VISIBLE_DEVICES", "LD_LIBRARY_PATH", "LC_CTYPE", "TRITON_INTERPRET", "TRITON_CACHE_DIR"}
    assert set(env) <= allowed


needs_landlock = pytest.mark.skipif(isolation.landlock_abi() < 6, reason="needs Landlock ABI >= 6 (Linux >= 6.12)")


@needs_landlock
def test_files_outside_workdir_and_parent_environ_are_unreadable(runner, tmp_path, monkeypatch):
    secret = tmp_path / "secret.txt"
    secret.write_text("TOPSECRET")
    monkeypatch.setenv("ARBOR_TEST_TOKEN", "tok-in-parent-env")
    code = textwrap.dedent(f"""
        import os
        out = []
        for path in [{str(secret)!r}, '/proc/{os.getpid()}/environ', os.path.expanduser('~root/.bashrc')]:
            try:
                out.append(open(path, 'rb').read(200).decode(errors='replace'))
            except OSError as e:
                out.append(type(e).__name__)
        try:
            open('/tmp/arbor-escape-{os.getpid()}', 'w')
            out.append('wrote /tmp')
        except OSError as e:
            out.append(type(e).__name__)
        print(out)
    """)
    res = runner.run(Job([PY, "-c", code], {}, timeout_s=30))
    assert res.returncode == 0, res.stderr_tail
    assert "TOPSECRET" not in res.stdout_tail and "tok-in-parent-env" not in res.stdout_tail
    assert res.stdout_tail.count("PermissionError") >= 3
    assert not Path(f"/tmp/arbor-escape-{os.getpid()}").exists()


@needs_landlock
def test_candidate_cannot_signal_its_parent(runner):
    res = runner.run(Job([PY, "-c", "import os; os.kill(os.getppid(), 9)"], {}, timeout_s=30))
    assert res.returncode == 1 and "PermissionError" in res.stderr_tail  # and we are still alive


def test_network_is_unreachable(runner):
    import socket

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    srv.settimeout(0.2)
    port = srv.getsockname()[1]
    code = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=3); print('connected')"
    try:
        res = runner.run(Job([PY, "-c", code], {}, timeout_s=30))
        with pytest.raises(socket.timeout):
            srv.accept()
    finally:
        srv.close()
    assert res.returncode == 1 and "connected" not in res.stdout_tail
    assert "Error" in res.stderr_tail


def test_rlimits_open_files_and_cpu(tmp_path):
    r = LocalRunner(max_open_files=64)
    res = r.run(Job([PY, "-c", "fs = [open('f%d' % i, 'w') for i in range(200)]"], {}, timeout_s=30))
    assert res.returncode == 1 and "Too many open files" in res.stderr_tail
    res = r.run(Job([PY, "-c", "while True: pass"], {}, timeout_s=30, cpu_seconds=1))
    assert not res.timed_out and res.signal in (signal.SIGXCPU, signal.SIGKILL)


def test_files_written_collected_and_tempdirs_removed(tmp_path):
    code = ("import os; d = open('in/a.txt').read() + open('b.bin', 'rb').read().decode();"
            "open('out.txt', 'w').write(d.upper()); print(os.getcwd())")
    runner = LocalRunner(base_tmp=str(tmp_path))
    job = Job([PY, "-c", code], {"in/a.txt": "ab", "b.bin": b"cd"}, timeout_s=30,
              collect=["out.txt", "missing.txt"])
    res = runner.run(job)
    assert res.returncode == 0, res.stderr_tail
    assert res.outputs == {"out.txt": b"ABCD"}
    workdir = res.stdout_tail.strip()
    assert workdir.startswith(str(tmp_path))
    assert not os.path.exists(workdir)
    assert list(tmp_path.iterdir()) == []


def test_tempdirs_removed_when_job_is_invalid(tmp_path):
    runner = LocalRunner(base_tmp=str(tmp_path))
    with pytest.raises(ValueError, match="relative path"):
        runner.run(Job([PY, "-c", "pass"], {"../escape.txt": "x"}, timeout_s=5))
    assert list(tmp_path.iterdir()) == []
    assert not (tmp_path.parent / "escape.txt").exists()


def test_memory_limit_fails_large_allocation(runner):
    code = "b = bytearray(512 << 20); print('allocated')"
    res = runner.run(Job([PY, "-c", code], {}, timeout_s=30, memory_bytes=128 << 20))
    assert res.returncode != 0
    assert "allocated" not in res.stdout_tail
    assert "MemoryError" in res.stderr_tail
    ok = runner.run(Job([PY, "-c", code], {}, timeout_s=30, memory_bytes=None))
    assert "allocated" in ok.stdout_tail  # the limit, not the machine, caused the failure


def test_file_size_limit(runner):
    code = "open('big', 'wb').write(b'x' * (4 << 20))"
    res = runner.run(Job([PY, "-c", code], {}, timeout_s=30, max_file_bytes=1 << 20))
    assert res.returncode != 0 and "File too large" in res.stderr_tail


_ORPHAN_SCRIPT = """
import sys
from arbor.sandbox.runners.local import LocalRunner
from arbor.sandbox.runner import Job
code = '''
import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        time.sleep(300)
    os._exit(0)
print(os.getpid(), flush=True)
time.sleep(300)
'''
LocalRunner(base_tmp=sys.argv[1], filesystem="host").run(Job([sys.executable, "-c", code], {}, timeout_s=300))
"""


def test_kill_9_of_arbor_kills_the_child_and_next_start_cleans_up(tmp_path):
    """PR_SET_PDEATHSIG kills the direct child; the setsid daemon it left and the workdir are
    removed by the next runner that starts (cgroup / token scan, owner pid dead)."""
    parent = subprocess.Popen([PY, "-c", _ORPHAN_SCRIPT, str(tmp_path)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not any(tmp_path.iterdir()):
        time.sleep(0.05)
    workdir = next(tmp_path.iterdir())
    child_pid = None
    while time.monotonic() < deadline and child_pid is None:
        for p in Path("/proc").glob("[0-9]*"):
            try:
                if os.readlink(p / "cwd") == str(workdir) and int(p.name) != parent.pid:
                    child_pid = child_pid or int(p.name)
            except OSError:
                pass
        time.sleep(0.05)
    daemons: list[int] = []
    while time.monotonic() < deadline and not daemons:  # the setsid daemon the child starts
        daemons = [int(p.name) for p in Path("/proc").glob("[0-9]*")
                   if _cwd(p) == str(workdir) and _session_leader_child(p)]
        time.sleep(0.05)
    parent.kill()
    parent.wait()
    assert child_pid is not None and _dead(child_pid), "the direct child outlived kill -9 of its parent"
    assert daemons  # pdeathsig cannot reach a daemon in another session: the next start does
    LocalRunner(base_tmp=str(tmp_path))  # (on a shared box another runner's start may beat it to it)
    assert all(_dead(d) for d in daemons)
    assert not workdir.exists()


def _session_leader_child(p: Path) -> bool:
    """The daemon: it left the child's session (setsid) and is not the session leader itself."""
    try:
        f = p.joinpath("stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return False
    state, sid = f[0], int(f[3])
    return state != "Z" and sid != int(p.name)  # the child and the setsid caller lead sessions


def _cwd(p: Path) -> str | None:
    try:
        return os.readlink(p / "cwd")
    except OSError:
        return None


def test_notices_when_isolation_is_missing(monkeypatch):
    monkeypatch.setattr(isolation, "landlock_abi", lambda: 0)
    monkeypatch.setattr(isolation, "netns_available", lambda: False)
    r = LocalRunner()
    text = " ".join(r.notices)
    assert "network" in text and "Landlock unavailable" in text
    assert LocalRunner(network="host", filesystem="host").notices == [] or not cgroup_available()
    with pytest.raises(ValueError, match="network must be"):
        LocalRunner(network="bridge")


class _Hook:
    def __init__(self, refuse: bool = False) -> None:
        self.calls: list[str] = []
        self.refuse = refuse

    def before(self, job: Job) -> None:
        self.calls.append("before")
        if self.refuse:
            raise SandboxError("clocks are off")

    def after(self, job: Job, result: JobResult) -> None:
        self.calls.append("after")
        result.fingerprint["probe"] = 1

    def close(self) -> None:
        self.calls.append("close")


def test_hooks_fingerprint_refuse_and_close(tmp_path):
    r = LocalRunner(base_tmp=str(tmp_path))
    hook = _Hook()
    r.hooks.append(hook)
    res = r.run(Job([PY, "-c", "pass"], {}, timeout_s=30))
    assert res.fingerprint == {"probe": 1} and hook.calls == ["before", "after"]
    hook.refuse = True
    with pytest.raises(SandboxError, match="clocks are off"):
        r.run(Job([PY, "-c", "pass"], {}, timeout_s=30))
    r.close()
    assert hook.calls[-1] == "close"
    assert list(tmp_path.iterdir()) == []


def test_make_runner():
    with make_runner("local", network="host") as r:
        assert isinstance(r, LocalRunner) and r.name == "local"
    with pytest.raises(ValueError, match="unknown sandbox 'x': use one of docker, local"):
        make_runner("x")
