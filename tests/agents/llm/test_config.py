"""The ``agents:`` and ``budget:`` sections for LLM roles: inheritance, one-line errors, and
API keys that can only ever be named, never written down."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from arbor.cli import app
from arbor.campaign.llm_setup import llm_roles, role_config
from arbor.spec import SpecError, parse_spec

BASE = {"name": "x", "target": {"problem": "problems/gelu_gate.py"}}


def spec(**sections):
    return parse_spec({**BASE, **sections}, "c.yaml", Path("."))


def test_roles_inherit_shared_settings_and_override_them():
    s = spec(agents={"base_url": "http://127.0.0.1:8000/v1", "model": "big", "temperature": 0.5,
                     "orchestrator": {"backend": "openai", "model": "small", "structured_output": "tools"},
                     "specialist": {"backend": "openai"}},
             budget={"prices": {"*": {"prompt_per_1k": 0.001, "completion_per_1k": 0.002}}})
    assert llm_roles(s) == ["orchestrator", "specialist"]
    o, sp = role_config(s, "orchestrator"), role_config(s, "specialist")
    assert (o.model, o.structured_output, o.temperature) == ("small", "tools", 0.5)
    assert (sp.model, sp.structured_output, sp.base_url) == ("big", "auto", "http://127.0.0.1:8000/v1")
    assert sp.price.completion_per_1k == 0.002


@pytest.mark.parametrize("agents,budget,needle", [
    ({"backend": "openai"}, {}, "names no model"),
    ({"backend": "openai", "model": "m", "api_key_env": "sk-proj-abcdef0123456789"}, {}, "NAME of an environment"),
    ({"specialist": {"backend": "openai", "model": "m", "api_key_env": "abcdefghijklmnopqrstuvwxyz0123"}}, {},
     "NAME of an environment"),
    ({"backend": "openai", "model": "m"}, {"max_cost_usd": 1.0}, "no price for model 'm'"),
    ({"structured_output": "xml"}, {}, "structured_output"),
    ({"critic": {"base_url": "https://bob:abcdefghijklmnopqrstuvwxyz0123@llm.example/v1"}}, {}, "must not carry"),
])
def test_bad_llm_settings_are_one_line_errors_without_the_value(agents, budget, needle):
    with pytest.raises(SpecError) as err:
        spec(agents=agents, budget=budget)
    assert len(err.value.problems) == 1 and needle in str(err.value)
    assert "sk-proj-abcdef" not in str(err.value) and "abcdefghijklmnopqrstuvwxyz0123" not in str(err.value)


def test_missing_key_variable_stops_the_run_with_exit_2(campaign_dir, monkeypatch):
    monkeypatch.delenv("ARBOR_MISSING_KEY", raising=False)
    path = campaign_dir / "k.yaml"
    path.write_text("name: k\ntarget:\n  problem: problems/gelu_gate.py\nagents:\n  specialist:\n"
                    "    backend: openai\n    model: m\n    base_url: http://127.0.0.1:9/v1\n"
                    "    api_key_env: ARBOR_MISSING_KEY\n")
    r = CliRunner().invoke(app, ["run", str(path)])
    assert r.exit_code == 2
    assert "agents.specialist.api_key_env: environment variable ARBOR_MISSING_KEY is not set" in r.output
    assert "Traceback" not in r.output
