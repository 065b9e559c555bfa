"""LocalRunner containment: time limits reach grandchildren, output is bounded, env is scrubbed."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

from arbor.sandbox.runner import Job, LocalRunner, make_runner

PY = sys.executable


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


def test_timeout_kills_grandchildren():
    script = "sleep 60 & echo $! > gc.pid; wait"
    t0 = time.monotonic()
    res = LocalRunner().run(Job(["sh", "-c", script], {}, timeout_s=1.0, collect=["gc.pid"]))
    assert res.timed_out
    assert time.monotonic() - t0 < 5
    assert res.signal == 9 and res.returncode == -9
    pid = int(res.outputs["gc.pid"])
    assert _dead(pid), f"grandchild {pid} survived the timeout"


def test_leftover_grandchild_killed_after_child_exits():
    res = LocalRunner().run(Job(["sh", "-c", "sleep 60 & echo $!"], {}, timeout_s=10))
    assert not res.timed_out and res.returncode == 0
    assert _dead(int(res.stdout_tail.strip()))


def test_output_truncated_to_tail():
    code = "import sys; sys.stdout.write('x' * 50_000_000 + 'END'); sys.stderr.write('e' * 10)"
    res = LocalRunner().run(Job([PY, "-c", code], {}, timeout_s=30, max_output_bytes=4096))
    assert res.returncode == 0
    assert res.stdout_tail.endswith("x" * 100 + "END")
    assert len(res.stdout_tail) < 4096 + 100
    assert "discarded" in res.stdout_tail.splitlines()[0]
    assert res.stderr_tail == "e" * 10


def test_env_scrubbed(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp-secret")
    code = "import json, os; print(json.dumps({'env': dict(os.environ), 'cwd': os.getcwd()}))"
    res = LocalRunner().run(Job([PY, "-c", code], {}, timeout_s=30, env={"ARBOR_X": "1"}))
    out = json.loads(res.stdout_tail)
    env = out["env"]
    assert "OPENAI_API_KEY" not in env and "GITHUB_TOKEN" not in env
    assert "secret" not in res.stdout_tail
    assert env["HOME"] == out["cwd"] == env["TMPDIR"]
    assert env["PYTHONHASHSEED"] == "0" and env["ARBOR_X"] == "1"
    allowed = {"PATH", "LANG", "LC_ALL", "HOME", "TMPDIR", "PYTHONHASHSEED", "ARBOR_X",
               "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
               "NUMEXPR_NUM_THREADS", "CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES",
               "ROCR_VISIBLE_DEVICES", "LD_LIBRARY_PATH", "LC_CTYPE"}
    assert set(env) <= allowed


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


def test_memory_limit_fails_large_allocation():
    code = "b = bytearray(512 << 20); print('allocated')"
    res = LocalRunner().run(Job([PY, "-c", code], {}, timeout_s=30, memory_bytes=128 << 20))
    assert res.returncode != 0
    assert "allocated" not in res.stdout_tail
    assert "MemoryError" in res.stderr_tail
    ok = LocalRunner().run(Job([PY, "-c", code], {}, timeout_s=30, memory_bytes=None))
    assert "allocated" in ok.stdout_tail  # the limit, not the machine, caused the failure


def test_file_size_limit():
    code = "open('big', 'wb').write(b'x' * (4 << 20))"
    res = LocalRunner().run(Job([PY, "-c", code], {}, timeout_s=30, max_file_bytes=1 << 20))
    assert res.returncode != 0


def test_make_runner():
    with make_runner("local") as r:
        assert isinstance(r, LocalRunner) and r.name == "local"
    with pytest.raises(ValueError, match="unknown sandbox 'x': use one of local"):
        make_runner("x")
