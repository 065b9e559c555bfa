"""DockerRunner against a real engine (tests/docker_engine.py starts a private dockerd when needed):
locked-down containers, warm reuse with a fresh process per job, strays and poisoned containers
handled, orphans of dead owners removed, nothing left behind."""

from __future__ import annotations

import json
import sys
import time

import pytest

from arbor.sandbox.runners.docker import LABEL, DockerRunner
from arbor.sandbox.runners.images import SANDBOX_UID
from arbor.sandbox.runner import Job, make_runner

PY = sys.executable
pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def runner(docker_engine):
    r = DockerRunner(campaign="test-docker-runner", memory_gb=1, pids_limit=128, tmpfs_mb=256)
    yield r
    r.close()
    assert _ours(r.client, "test-docker-runner") == []


def _ours(client, campaign: str) -> list[str]:
    return [c.name for c in client.containers.list(all=True, filters={"label": f"arbor.campaign={campaign}"})]


def test_job_runs_locked_down_with_files_in_and_out(runner, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    code = (
        "import json, os, socket\n"
        "r = {'uid': os.getuid(), 'cwd': os.getcwd(), 'env': dict(os.environ), 'in': open('d/in.txt').read()}\n"
        "for path in ('/usr/x', '/etc/x', '/x'):\n"
        "    try:\n        open(path, 'w'); r[path] = 'written'\n"
        "    except OSError as e:\n        r[path] = type(e).__name__\n"
        "try:\n    socket.create_connection(('1.1.1.1', 53), timeout=2); r['net'] = 'up'\n"
        "except OSError as e:\n    r['net'] = str(e)\n"
        "open('out.json', 'w').write(json.dumps(r))\n")
    res = runner.run(Job([PY, "-c", code], {"d/in.txt": "hello"}, timeout_s=60, collect=["out.json", "nope"]))
    assert res.returncode == 0, res.stderr_tail
    r = json.loads(res.outputs["out.json"])
    assert list(res.outputs) == ["out.json"]
    assert r["uid"] == SANDBOX_UID and r["in"] == "hello"
    assert r["cwd"].startswith("/work/") and r["env"]["HOME"] == r["cwd"]
    assert "OPENAI_API_KEY" not in r["env"] and "sk-secret" not in json.dumps(r)
    assert all(r[p] in ("OSError", "PermissionError") for p in ("/usr/x", "/etc/x", "/x"))  # read-only root
    assert "unreachable" in r["net"].lower()  # network_mode none


def test_container_settings_and_labels(runner):
    runner.run(Job([PY, "-c", "pass"], {}, timeout_s=60))
    c = runner._container
    c.reload()
    hc = c.attrs["HostConfig"]
    assert hc["NetworkMode"] == "none" and hc["ReadonlyRootfs"] is True
    assert hc["Memory"] == 1 << 30 and hc["PidsLimit"] == 128 and hc["CapDrop"] == ["ALL"]
    assert "no-new-privileges" in hc["SecurityOpt"] and "/work" in hc["Tmpfs"]
    assert c.labels[LABEL] == "1" and c.labels["arbor.campaign"] == "test-docker-runner"
    assert hc["CapAdd"] == ["SETUID", "SETGID"]  # only the root supervisor uses them, to drop to the job uid
    caps = runner.run(Job([PY, "-c", "print(open('/proc/self/status').read())"], {}, timeout_s=60)).stdout_tail
    assert "CapEff:\t0000000000000000" in caps and "NoNewPrivs:\t1" in caps
    assert f"Uid:\t{SANDBOX_UID}\t" in caps


def test_warm_reuse_fresh_process_per_job(runner):
    started = runner.containers_started
    code = "import os; print(os.getpid(), os.listdir('/work'), os.listdir('/tmp'))"
    a = runner.run(Job([PY, "-c", "open('/tmp/junk', 'w'); " + code], {}, timeout_s=60))
    b = runner.run(Job([PY, "-c", code], {}, timeout_s=60))
    assert runner.containers_started == started  # same container...
    pid_a, pid_b = a.stdout_tail.split()[0], b.stdout_tail.split()[0]
    assert pid_a != pid_b  # ...new process, and nothing left from the previous job
    assert b.stdout_tail.count("'j") == 1 and "junk" not in b.stdout_tail


def test_strays_are_killed_and_container_kept(runner):
    started = runner.containers_started
    code = ("import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(300)\nprint('bye')")
    res = runner.run(Job([PY, "-c", code], {}, timeout_s=60))
    assert res.returncode == 0 and any("left running" in n for n in res.notes)
    ps = runner.run(Job([PY, "-c", "import os; print(len([p for p in os.listdir('/proc') if p.isdigit()]))"],
                        {}, timeout_s=60))
    assert int(ps.stdout_tail) <= 3  # init, this job's process (and its boot python at most)
    assert runner.containers_started == started


def test_timeout_recycles_the_container(runner):
    started = runner.containers_started
    t0 = time.monotonic()
    res = runner.run(Job([PY, "-c", "while True: pass"], {}, timeout_s=1.5))
    assert res.timed_out and res.returncode == -9 and time.monotonic() - t0 < 15
    ok = runner.run(Job([PY, "-c", "print('alive')"], {}, timeout_s=60))
    assert ok.stdout_tail.strip() == "alive" and runner.containers_started == started + 1


def test_memory_limit_and_oom_kill_reported(runner):
    res = runner.run(Job([PY, "-c", "b = bytearray(512 << 20)"], {}, timeout_s=60, memory_bytes=128 << 20))
    assert res.returncode == 1 and "MemoryError" in res.stderr_tail  # per-job RLIMIT_AS
    res = runner.run(Job([PY, "-c", "b = bytearray(2 << 30); print('no')"], {}, timeout_s=60))
    assert res.signal == 9 and "no" not in res.stdout_tail  # the container's 1 GiB cgroup limit
    assert res.oom_killed is True and any("OOM" in n for n in res.notes)


def test_orphans_of_dead_owners_removed_on_start(docker_engine, runner):
    client = runner.client
    orphan = client.containers.create(runner.image.id, ["true"], labels={
        LABEL: "1", "arbor.campaign": "crashed", "arbor.owner": f"{__import__('socket').gethostname()}:999999999"})
    alive = client.containers.create(runner.image.id, ["true"], labels={
        LABEL: "1", "arbor.campaign": "other", "arbor.owner": f"{__import__('socket').gethostname()}:1"})
    try:
        r2 = make_runner("docker", campaign="crashed")
        assert r2.orphans_removed >= 1
        names = [c.id for c in client.containers.list(all=True)]
        assert orphan.id not in names and alive.id in names  # pid 1 is alive: not an orphan
        r2.close()
    finally:
        alive.remove(force=True)


def test_device_requests_for_gpus(runner):
    import docker.types

    r = DockerRunner.__new__(DockerRunner)
    r.device = "cuda:1"
    (req,) = r._device_requests()
    assert isinstance(req, docker.types.DeviceRequest) and req["DeviceIDs"] == ["1"]
    assert req["Capabilities"] == [["gpu"]]
    r.device = "cpu"
    assert r._device_requests() == []


def test_cuda_runner_checks_the_device_in_its_warm_container_before_any_job(docker_engine, monkeypatch):
    """A GPU campaign on an engine that cannot give the container a GPU stops in the runner's
    constructor with the reason and the fix — not at every measurement. With a device job that
    starts (the stand-in), the check passes through the same warm container the jobs then use."""
    from arbor.sandbox.gpu import probe
    from arbor.sandbox.runner import SandboxError

    from arbor.sandbox.runners.docker import gpu_support

    client = DockerRunner(campaign="test-docker-cuda", device_check=False).client
    if gpu_support(client):
        pytest.skip("this engine can start GPU containers")
    with pytest.raises(SandboxError) as exc:
        DockerRunner(campaign="test-docker-cuda", device="cuda", memory_gb=1)
    msg = str(exc.value)
    assert "\n" not in msg and "does not start inside the Docker sandbox container" in msg
    assert "NVIDIA container toolkit" in msg
    assert _ours(client, "test-docker-cuda") == []  # the failed check left no container behind
    monkeypatch.setattr(probe, "DEVICE_JOB", f"print({probe.OK_MARK!r})")
    monkeypatch.setattr(DockerRunner, "_device_requests", lambda self: [])  # a "GPU" the engine can give
    r = DockerRunner(campaign="test-docker-cuda", device="cuda", memory_gb=1)
    try:
        assert r.device_probe is not None and r.device_probe.stop is None and r.containers_started == 1
        assert r.run(Job([PY, "-c", "print('after')"], {}, timeout_s=60)).stdout_tail.strip() == "after"
        assert r.containers_started == 1  # the check's warm container serves the jobs
    finally:
        r.close()
    assert _ours(client, "test-docker-cuda") == []
