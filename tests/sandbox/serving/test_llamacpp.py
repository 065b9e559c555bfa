"""llama.cpp's server with SmolLM2-135M: the install step's promises, and the real engine through
Arbor's server lifecycle (one session-scoped server, see conftest.llamacpp)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import httpx
import pytest

from arbor.sandbox.serving import llamacpp_install as inst
from arbor.sandbox.serving.leases import LEASE_ENV
from arbor.sandbox.serving.lifecycle import ServerConfig, ServerStartError, start_servers

from .conftest import llamacpp_argv


# --- install step (no build needed) ---------------------------------------------------------------
def test_the_cache_is_keyed_on_version_and_cpu(tmp_path, monkeypatch):
    monkeypatch.setenv("ARBOR_CACHE_DIR", str(tmp_path))
    where = inst.install_dir()
    assert where.parent == tmp_path / "llamacpp"
    assert where.name == f"{inst.VERSION}-{inst.cpu_key()}" and len(inst.cpu_key()) == 12
    assert inst.server_binary() is None  # nothing built in an empty cache
    assert "python -m arbor.sandbox.serving.llamacpp_install" in inst.missing_reason()


def test_a_missing_cmake_is_one_line_naming_the_fix(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ARBOR_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))  # no cmake, no compiler
    assert inst.main(["--sdist", str(tmp_path / "unused.tar.gz")]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "`cmake` is not on PATH" in err and "apt-get install cmake" in err
    assert not (inst.install_dir() / "bin").exists()


def test_a_built_binary_is_reused_without_building(tmp_path, monkeypatch):
    monkeypatch.setenv("ARBOR_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))  # a rebuild would fail: cmake is missing
    binary = inst.install_dir() / "bin" / "llama-server"
    binary.parent.mkdir(parents=True)
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    assert inst.build_server(sdist=tmp_path / "unused.tar.gz") == (binary, 0.0)


# --- the real engine ------------------------------------------------------------------------------
def test_chat_completion_is_constrained_to_a_json_schema(llamacpp):
    schema = {"type": "object", "properties": {"city": {"type": "string"}, "country": {"type": "string"}},
              "required": ["city", "country"]}
    body = {"model": "smollm2", "max_tokens": 48, "temperature": 0,
            "messages": [{"role": "user", "content": "Name a famous city and its country."}],
            "response_format": {"type": "json_schema", "json_schema": {"name": "Place", "schema": schema}}}
    r = httpx.post(llamacpp.base_url + "/v1/chat/completions", json=body, timeout=60, trust_env=False)
    assert r.status_code == 200, r.text[:300]
    reply = json.loads(r.json()["choices"][0]["message"]["content"])
    assert set(reply) >= {"city", "country"} and all(isinstance(v, str) for v in reply.values())


def test_the_server_reports_queue_and_slots_on_its_metrics_page(llamacpp):
    from arbor.sandbox.serving.metrics import SERVER_SIGNALS, parse_prometheus

    page = parse_prometheus(httpx.get(llamacpp.base_url + "/metrics", timeout=10, trust_env=False).text)
    assert SERVER_SIGNALS["queued"][-1] in page and SERVER_SIGNALS["running"][-1] in page


def test_an_unknown_flag_is_a_clear_startup_error_not_a_hang(tmp_path):
    cfg = ServerConfig(argv=llamacpp_argv("--no-such-flag"), lease_dir=tmp_path, startup_timeout_s=60,
                       stop_grace_s=1, label="llamacpp")
    started: list = []
    t0 = time.monotonic()
    with pytest.raises(ServerStartError) as info:
        start_servers([cfg], started)
    for s in started:
        s.stop()
    assert info.value.error_class == "startup_failed" and "--no-such-flag" in str(info.value)
    assert time.monotonic() - t0 < 20
    assert all(s.pid is None for s in started) and not list(tmp_path.glob("*.json"))


def _lease_holders(token: str) -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                env = open(f"/proc/{entry}/environ", "rb").read()
            except OSError:
                continue
            if f"{LEASE_ENV}={token}".encode() in env.split(b"\0"):
                pids.append(int(entry))
    return pids


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT])
def test_no_server_outlives_a_killed_or_interrupted_owner(tmp_path, sig):
    """The owner starts llama-server, reports its lease token, and is killed (kill -9) or
    interrupted (Ctrl-C): the server must be gone either way."""
    argv = llamacpp_argv("-np", "1", "-c", "1024")
    owner = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import signal, sys, time
        from pathlib import Path
        from arbor.sandbox.serving.lifecycle import ServerConfig, start_servers, stop_all
        signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal, even when this test
        # runs in a background job (a non-interactive shell's `&` starts it with SIGINT ignored)
        started = []
        try:
            (s,) = start_servers([ServerConfig(argv={argv!r}, lease_dir=Path({str(tmp_path)!r}),
                                               startup_timeout_s=60, stop_grace_s=1)], started)
            print(s.token, flush=True)
            time.sleep(120)
        finally:
            stop_all(started)
        """)], stdout=subprocess.PIPE, text=True)
    try:
        token = owner.stdout.readline().strip()
        assert token and _lease_holders(token), "the server did not start"
        owner.send_signal(sig)
        owner.wait(timeout=30)
        deadline = time.monotonic() + 10
        while _lease_holders(token) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _lease_holders(token)
    finally:
        owner.kill()
        owner.wait()


def test_the_llm_client_gets_schema_constrained_replies_from_smollm2(llamacpp):
    """The agents' client against the real model: llama-server takes the json_schema mode (no
    step-down), and every exchange is recorded; a reply the schema's semantics refuse gets one
    repair request, then a diagnosed error, never a traceback."""
    from arbor.agents.llm import BudgetConfig, LLMRuntime, RoleConfig
    from arbor.agents.llm.errors import LLMInvalidOutput
    from arbor.agents.llm.schemas import ServingProposals

    rt = LLMRuntime(BudgetConfig())
    client = rt.client(RoleConfig(role="specialist", model="smollm2", base_url=llamacpp.base_url + "/v1",
                                  temperature=0.0, max_retries=1, timeout_s=120, max_output_tokens=200,
                                  prompt_tokens=2000), "specialist")
    messages = [{"role": "user", "content": "Knobs of a llama.cpp server: parallel (int, 1..16), ubatch_size "
                 "(int, 32..512). Eight users wait for four slots. Propose one knob change as JSON."}]
    try:
        reply = client.call(messages, ServingProposals, purpose="propose")
        assert reply.mode == "json_schema" and reply.value.candidates[0].changes
    except LLMInvalidOutput as err:
        assert "after one repair request" in str(err)
    calls = [e.payload for e in rt.memory_events if e.kind == "llm_call"]
    assert calls and {c["mode"] for c in calls} == {"json_schema"}
    assert all(c["status"] in ("ok", "invalid") for c in calls)
