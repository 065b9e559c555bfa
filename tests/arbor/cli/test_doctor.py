"""``arbor doctor``: a row per check, a fix for every failure, exit 1 on failure, 2 on a bad spec."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from typer.testing import CliRunner

from arbor.cli import app


def _doctor(*args: str, env: dict | None = None):
    r = CliRunner().invoke(app, ["doctor", *args], env=env)
    return r.exit_code, r.output


def test_machine_checks_json():
    code, out = _doctor("--json")
    assert code in (0, 1), out
    data = json.loads(out)
    names = [c["name"] for c in data["checks"]]
    for expected in ("torch", "cuda", "landlock", "network isolation", "process containment", "store"):
        assert expected in names
    assert any(n.startswith("docker") for n in names) and any(n.startswith("gpu") for n in names)
    for c in data["checks"]:
        assert c["status"] in ("ok", "warn", "fail", "skip")
        if c["status"] == "fail":
            assert c["fix"], c
    assert data["ok"] == (code == 0)


def test_docker_campaign_without_engine_fails_with_fix(tmp_path):
    (tmp_path / "p.py").write_text("x = 1\n")
    (tmp_path / "c.yaml").write_text("name: d\ntarget: {problem: p.py}\n"
                                     "sandbox: {kind: docker, docker: {base_url: 'unix:///nonexistent/docker.sock'}}\n")
    code, out = _doctor(str(tmp_path / "c.yaml"), "--json")
    assert code == 1
    rows = {c["name"]: c for c in json.loads(out)["checks"]}
    assert rows["docker engine"]["status"] == "fail" and "dockerd" in rows["docker engine"]["fix"]
    assert rows["store"]["status"] == "ok" and "not created yet" in rows["store"]["detail"]
    assert not (tmp_path / "arbor.db").exists()  # doctor never creates a store


class _Models(BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802
        body = json.dumps({"object": "list", "data": [{"id": "tiny", "object": "model", "created": 0,
                                                         "owned_by": "me"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


@pytest.fixture
def models_server():
    srv = HTTPServer(("127.0.0.1", 0), _Models)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/v1"
    srv.shutdown()
    srv.server_close()


def test_llm_endpoint_checked(tmp_path, models_server):
    (tmp_path / "p.py").write_text("x = 1\n")
    spec = (f"name: l\ntarget: {{problem: p.py}}\nagents: {{backend: openai, base_url: '{models_server}', "
            "model: tiny, api_key_env: ARBOR_DOCTOR_KEY}\n")
    (tmp_path / "c.yaml").write_text(spec)
    code, out = _doctor(str(tmp_path / "c.yaml"), "--json", env={"ARBOR_DOCTOR_KEY": "k"})
    rows = {c["name"]: c for c in json.loads(out)["checks"]}
    llm = [r for n, r in rows.items() if n.startswith("llm")]
    assert llm and llm[0]["status"] == "ok" and "1 model" in llm[0]["detail"], llm
    (tmp_path / "c.yaml").write_text(spec.replace("model: tiny", "model: huge"))
    _code, out = _doctor(str(tmp_path / "c.yaml"), "--json", env={"ARBOR_DOCTOR_KEY": "k"})
    llm = [c for c in json.loads(out)["checks"] if c["name"].startswith("llm")]
    assert llm[0]["status"] == "warn" and "tiny" in llm[0]["fix"]
    code, out = _doctor(str(tmp_path / "c.yaml"), "--json", env={"ARBOR_DOCTOR_KEY": ""})
    llm = [c for c in json.loads(out)["checks"] if c["name"].startswith("llm")]
    assert code == 1 and llm[0]["status"] == "fail" and "export ARBOR_DOCTOR_KEY" in llm[0]["fix"]


def test_table_and_bad_spec(tmp_path):
    code, out = _doctor()
    assert "check" in out and "status" in out and "fix" in out and "landlock" in out
    (tmp_path / "bad.yaml").write_text("name: x\ntarget: {problem: p.py}\nsandbox: {clocks: maybe}\n")
    code, out = _doctor(str(tmp_path / "bad.yaml"))
    assert code == 2 and "sandbox.clocks" in out and "Traceback" not in out


from tests.sandbox.fakes.fixtures import machine, nvml  # noqa: E402,F401  (fixtures)


def _cuda_campaign(tmp_path, clocks: str = "verify") -> str:
    (tmp_path / "p.py").write_text("x = 1\n")
    (tmp_path / "c.yaml").write_text(f"name: g\ntarget: {{problem: p.py, device: cuda}}\nsandbox: {{clocks: {clocks}}}\n")
    return str(tmp_path / "c.yaml")


def test_cuda_campaign_on_cpu_only_torch_fails_naming_the_fix(tmp_path, machine, nvml):
    import torch

    if torch.version.cuda or torch.cuda.is_available():
        pytest.skip("this torch can run CUDA")
    nvml(machine())  # a driver answers, so only torch is wrong
    code, out = _doctor(_cuda_campaign(tmp_path), "--json", "--skip-llm")
    assert code == 1, out
    rows = {c["name"]: c for c in json.loads(out)["checks"]}
    assert rows["torch device"]["status"] == "fail" and "CPU-only build" in rows["torch device"]["detail"]
    assert "CUDA build of torch" in rows["torch device"]["fix"]
    assert {"triton", "nvcc", "ninja"} <= set(rows)  # what GPU candidates compile with
    assert rows["gpu 0"]["status"] == "ok" and "GPU-00000000" in rows["gpu 0"]["detail"]  # the fake's GPUs


def test_clock_permission_is_not_ok_just_because_euid_is_0(tmp_path, machine, nvml, monkeypatch):
    import arbor.cli.doctor_gpu as dg

    nvml(machine())
    status = tmp_path / "status"
    status.write_text("Name:\tpython\nCapEff:\t00000000a80425fb\n")  # Docker's default set: no CAP_SYS_ADMIN
    monkeypatch.setattr(dg, "STATUS_PATH", str(status))
    monkeypatch.setattr(dg.os, "geteuid", lambda: 0)
    code, out = _doctor(_cuda_campaign(tmp_path, "lock"), "--json", "--skip-llm")
    rows = {c["name"]: c for c in json.loads(out)["checks"]}
    assert code == 1 and rows["clock permission"]["status"] == "fail"
    assert "without CAP_SYS_ADMIN" in rows["clock permission"]["detail"] and "-acp" not in out
    status.write_text("CapEff:\t000001ffffffffff\n")  # all capabilities, but inside a container
    monkeypatch.setattr(dg, "_in_container", lambda: True)
    rows = {c["name"]: c for c in json.loads(_doctor(_cuda_campaign(tmp_path, "lock"), "--json", "--skip-llm")[1])["checks"]}
    assert rows["clock permission"]["status"] == "warn" and "container" in rows["clock permission"]["detail"]


def test_device_that_cannot_start_inside_the_sandbox_fails_with_the_fix(tmp_path, monkeypatch):
    """The runner's own device probe, with a stand-in device job that breaks under the Landlock
    filesystem rules: doctor says fail (exit 1) and names the fix; a replaced layer is a warning."""
    from arbor.sandbox.runners import isolation
    from arbor.sandbox.gpu import probe

    from tests.sandbox.fakes.device_job import fake_device_host

    host = fake_device_host()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    try:
        monkeypatch.setattr(probe, "DEVICE_JOB", host.job({"landlock_fs"}))
        code, out = _doctor(_cuda_campaign(tmp_path), "--json", "--skip-llm")
        rows = {c["name"]: c for c in json.loads(out)["checks"]}
        row = rows["device in sandbox"]
        assert code == 1 and row["status"] == "fail", row
        assert "Landlock filesystem rules" in row["detail"] and "sandbox.kind: docker" in row["fix"]
        assert "sandbox.filesystem: host" in row["fix"]
        if isolation.netns_available() and isolation.seccomp_available():
            monkeypatch.setattr(probe, "DEVICE_JOB", host.job({"netns"}))
            rows = {c["name"]: c for c in json.loads(_doctor(_cuda_campaign(tmp_path), "--json", "--skip-llm")[1])["checks"]}
            row = rows["device in sandbox"]
            assert row["status"] == "warn" and "seccomp network filter" in row["detail"], row
        monkeypatch.setattr(probe, "DEVICE_JOB", host.job(()))
        rows = {c["name"]: c for c in json.loads(_doctor(_cuda_campaign(tmp_path), "--json", "--skip-llm")[1])["checks"]}
        assert rows["device in sandbox"]["status"] == "ok"
    finally:
        host.close()
