"""The hostile suite against the Docker runner: every attack contained by the container, no process
left in it and no container left behind.

Containment is the runner's job and the diagnosis the protocol's (runner-agnostic, covered for
every attack in test_hostile_local.py), so here each attack runs as a plain job — no torch import,
a fraction of a second — and two go through the full kernel protocol to show the diagnoses
survive the trip through Docker.
"""

from __future__ import annotations

import sys

import pytest

from arbor.sandbox.runners.docker import DockerRunner
from arbor.sandbox.kernel.protocol import measure_kernel
from arbor.sandbox.runner import Job, JobResult

from .candidates import hostiles
from .conftest import SECRET
from .helpers import connections, containers
from .test_hostile_local import request

pytestmark = pytest.mark.docker

CAMPAIGN = "hostile-docker"
PY = sys.executable


@pytest.fixture(scope="module")
def runner(docker_engine):
    r = DockerRunner(campaign=CAMPAIGN, memory_gb=4, pids_limit=64, tmpfs_mb=512, max_file_bytes=32 << 20)
    yield r
    r.close()
    assert containers(f"arbor.campaign={CAMPAIGN}") == [], "a sandbox container outlived the runner"


def _attacks(secret_path: str, port: int) -> dict[str, tuple[str, float, object]]:
    """name -> (python code, time limit, check(result) -> bool)."""
    return {
        "infinite_loop": ("while True: pass", 2, lambda r: r.timed_out and r.signal == 9),
        "fork_bomb": ("import os\nwhile True:\n    try: os.fork()\n    except OSError: pass", 3,
                      lambda r: r.timed_out),
        "memory_hog": ("b = bytearray(6 << 30)", 60, lambda r: "MemoryError" in r.stderr_tail),
        "disk_filler": ("import os\nfd = os.open('f', os.O_WRONLY | os.O_CREAT)\nwhile True: os.write(fd, bytes(1 << 20))",
                        60, lambda r: "File too large" in r.stderr_tail),
        # network_mode none: the container's own loopback refuses, the host's listener hears nothing
        "network_call": (f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=3)", 60,
                         lambda r: r.returncode == 1 and "ConnectionRefusedError" in r.stderr_tail),
        "env_secret": ("import os; print(os.environ.get('ARBOR_HOSTILE_SECRET', 'no-secret-visible'))", 60,
                       lambda r: r.stdout_tail.strip() == "no-secret-visible"),
        "file_outside_workdir": (f"print(open({secret_path!r}).read())", 60,
                                 lambda r: "FileNotFoundError" in r.stderr_tail),
        "kill_parent": ("import os; os.kill(os.getppid(), 9)", 60, lambda r: "PermissionError" in r.stderr_tail),
        "stdout_1gb": ("import os\nfor _ in range(64): os.write(1, b'x' * (1 << 24))", 120,
                       lambda r: r.returncode == 0 and r.stdout_bytes == 1 << 30 and len(r.stdout_tail) < 2 << 20),
    }


def _no_strays(runner: DockerRunner) -> str:
    left = runner.run(Job([PY, "-c", "import os; print([p for p in os.listdir('/proc') if p.isdigit()"
                           " and int(p) not in (1, os.getpid(), os.getppid())])"], {}, timeout_s=60))
    return left.stdout_tail.strip()


@pytest.mark.parametrize("name", list(_attacks("/x", 1)))
def test_attack_is_contained_in_docker(name, runner, bait):
    code, limit, check = _attacks(bait["path"], bait["port"])[name]
    res: JobResult = runner.run(Job([PY, "-c", code], {}, timeout_s=limit, memory_bytes=3 << 30))
    what = f"{name}: rc={res.returncode} timed_out={res.timed_out} notes={res.notes} err={res.stderr_tail[-300:]}"
    assert check(res), what
    assert SECRET not in res.stdout_tail + res.stderr_tail, f"{name} leaked the secret"
    assert connections(bait["server"]) == 0, f"{name} reached the network"
    assert _no_strays(runner) == "[]", f"{name} left processes in the container"


@pytest.mark.parametrize("name", ["memory_hog", "kill_parent"])
def test_diagnosis_through_docker(name, runner, bait):
    h = next(h for h in hostiles(bait["path"], bait["port"]) if h.name == name)
    m = measure_kernel(runner, request(h.source, h.timeout_s))
    assert m.error_class == h.diagnosis, f"{name}: {m.status} {m.error_class} {m.error_text}"
