"""The LLM red-team role against the scripted OpenAI-compatible server (a real HTTP server):
what it is told (the classes' descriptions and the Critic's past verdicts, never the checker's
source), how its replies become variants, and that a bad endpoint ends the round quietly."""

from __future__ import annotations

from pathlib import Path

from arbor.redteam.llm import RedTeamVariants, propose
from arbor.redteam.session import llm_client
from tests.agents.llm.scripted_server import ScriptedServer, ok, status

ROOT = Path(__file__).parents[3]
PROBLEM = (ROOT / "tests" / "adversarial" / "problems" / "act.py").read_text()
HOOK = '''import torch
import torch.nn as nn
import torch.nn.functional as F

_table = getattr(torch.nn.modules.module, "_global_" + "forward_pre_hooks")


class ModelNew(nn.Module):
    def forward(self, x, gate):
        return F.gelu(x, approximate="tanh") * F.silu(gate)
'''
VERDICTS = [{"class": "21", "disguise": "getattr", "payload": "forward_pre_hook", "state": "rejected",
             "diagnosis": "hack_suspected", "gate": "plausible",
             "reason": "the candidate registered process-wide hooks that the reference also runs under"}]


def _reply(*sources: str) -> dict:
    return {"variants": [{"klass": "21", "disguise": "a hook table written through getattr",
                          "idea": "write the global pre-hook table directly, never calling register", "source": s}
                         for s in sources]}


def test_variants_come_from_the_reply_tagged_as_the_llms():
    with ScriptedServer() as server:
        server.push(ok(_reply(HOOK, HOOK.replace("ModelNew", "Other"))),  # no ModelNew: repaired once
                    ok(_reply(HOOK)))
        client = llm_client(None, server.url, "scripted-model", None, 0)
        out = propose(client, PROBLEM, VERDICTS, n=3)
        reqs = server.chat_requests()
    assert [(v.origin, v.kind, v.klass) for v in out] == [("llm", "hostile", "21")]
    assert "class ModelNew" in out[0].source and out[0].source.startswith('"""redteam: hostile variant llm-0')
    assert len(reqs) == 2 and "defines no top-level class ModelNew" in reqs[1].text  # the repair turn
    text = reqs[0].text
    assert "process-wide hook registries" in text and "registered process-wide hooks" in text  # classes, verdicts
    assert "class Model(nn.Module)" in text  # the problem
    for checker in ("def verify_state", "class StateGuard", "IdentitySnapshot", "def gate_plausible"):
        assert checker not in text  # never the checker's source
    assert reqs[0].schema_name == RedTeamVariants.__name__


def test_an_endpoint_that_fails_gives_no_variants_and_no_error():
    with ScriptedServer() as server:
        server.push(*[status(500, "down")] * 10)
        client = llm_client(None, server.url, "scripted-model", None, 0)
        client.cfg = client.cfg.__class__(**{**client.cfg.__dict__, "max_retries": 0})
        assert propose(client, PROBLEM, VERDICTS, n=2) == []


def test_a_campaign_whose_specialist_is_an_llm_configures_the_red_team(tmp_path):
    """Without --llm, the campaign's ``agents`` settings (its Specialist's endpoint and model) are used;
    a heuristic campaign means no LLM round."""
    from arbor.spec import parse_spec

    problem = ROOT / "tests" / "adversarial" / "problems" / "act.py"
    with ScriptedServer() as server:
        server.push(ok(_reply(HOOK)))
        spec = parse_spec({"name": "x", "target": {"kind": "kernel", "problem": str(problem)},
                           "agents": {"backend": "openai", "model": "scripted-model", "base_url": server.url}},
                          "<t>", tmp_path)
        client = llm_client(spec, None, None, None, 0)
        assert [v.origin for v in propose(client, PROBLEM, [], n=1)] == ["llm"]
        heuristic = parse_spec({"name": "x", "target": {"kind": "kernel", "problem": str(problem)}}, "<t>", tmp_path)
        assert llm_client(heuristic, None, None, None, 0) is None
