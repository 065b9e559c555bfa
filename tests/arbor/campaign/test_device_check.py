"""A ``device: cuda`` campaign checks, before its baseline, that the device starts inside its
sandbox: a replaced layer is one printed line and a stored ``sandbox_notice``; a device that cannot
start inside a safe plan (or at all) stops the campaign before the baseline with the reason and the
fix, exit code 2 — never a campaign whose every measurement fails with a driver error."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from arbor.cli import app
from arbor.sandbox.runners import isolation
from arbor.sandbox.gpu import probe as probe_mod
from arbor.search_tree import open_store

from tests.arbor.helpers import arbor
from tests.sandbox.fakes.device_job import fake_device_host


PROBLEM = """import torch
class Model(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x)
def get_inputs():
    return [torch.randn(64)]
def get_init_inputs():
    return []
"""


@pytest.fixture
def host():
    h = fake_device_host()
    yield h
    h.close()


def _campaign(tmp_path, sandbox: str = "{clocks: ignore}") -> str:
    (tmp_path / "p.py").write_text(PROBLEM)
    (tmp_path / "c.yaml").write_text(f"name: dev\ntarget: {{problem: p.py, device: cuda}}\nsandbox: {sandbox}\n"
                                     "budget: {max_evaluations: 1}\n")
    return str(tmp_path / "c.yaml")


def _events(tmp_path, kind: str) -> list:
    store = open_store(f"sqlite:///{tmp_path / 'arbor.db'}")
    try:
        (camp,) = store.list_campaigns()
        return [(e.payload, camp) for e in store.events(camp.id, kinds=(kind,))], store.nodes(camp.id)
    finally:
        store.close()


def test_a_replaced_layer_is_one_line_and_a_stored_notice(tmp_path, host, monkeypatch):
    if not (isolation.netns_available() and isolation.seccomp_available()):
        pytest.skip("needs root (network namespace) and seccomp")
    from arbor.campaign.sandbox_setup import open_sandbox
    from arbor.spec import load_spec

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(probe_mod, "DEVICE_JOB", host.job({"netns"}))
    spec = load_spec(_campaign(tmp_path))
    store = open_store(f"sqlite:///{tmp_path / 'arbor.db'}")
    seen: list = []
    try:
        cid = store.get_or_create_campaign("dev", "kernel", {}).id
        runner = open_sandbox(spec, store, cid, lambda k, d: seen.append((k, d)))
        try:
            assert runner.plan.seccomp_net and not runner.plan.netns
        finally:
            runner.close()
        (ev,) = [e for e in store.events(cid, kinds=("sandbox_notice",)) if "device_probe" in e.payload]
    finally:
        store.close()
    warnings = [d["text"] for k, d in seen if k == "sandbox_warning"]
    assert ev.payload["text"] in warnings and "\n" not in ev.payload["text"]
    assert "private network namespace replaced by the seccomp network filter" in ev.payload["text"]
    attempts = {a["label"]: a["ok"] for a in ev.payload["device_probe"]["attempts"]}
    assert attempts["only netns"] is False and attempts["chosen"] is True  # the probe's record, kept


def test_nothing_safe_stops_before_the_baseline_with_the_fix(tmp_path, host, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(probe_mod, "DEVICE_JOB", host.job({"landlock_fs"}))
    r = CliRunner().invoke(app, ["run", _campaign(tmp_path), "--quiet"])
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in r.output, r.output
    assert "does not start inside the local sandbox under the Landlock filesystem rules" in lines[0]
    assert "fix: sandbox.kind: docker, or sandbox.filesystem: host" in lines[0]
    events, nodes = _events(tmp_path, "sandbox_notice")
    assert any(p.get("stopped") for p, _ in events)
    assert all(n.state == "queued" or n.state.value == "queued" for n in nodes)  # the baseline never ran
    assert not _events(tmp_path, "baseline")[0]
    # the lease went with the stop: the next run is not told it took over from a live run
    monkeypatch.setattr(probe_mod, "DEVICE_JOB", host.job({"landlock_fs"}))
    again = CliRunner().invoke(app, ["run", _campaign(tmp_path), "--quiet"])
    assert again.exit_code == 2 and "busy" not in again.output and "taken over" not in again.output


def test_device_absent_even_bare_stops_through_the_real_cli(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine's torch starts CUDA")
    r = arbor("run", _campaign(tmp_path), "--quiet")  # the real probe and its real CUDA job
    assert r.returncode == 2, r.stdout + r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in r.stderr
    assert "cuda does not start on this machine even outside the sandbox" in lines[0]
    assert "fix: check the driver and torch" in lines[0]
