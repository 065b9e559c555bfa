"""LLM agents on a real store and a scripted server, without measuring anything: what the
Orchestrator may pick (debug candidates, heuristic moves), its fallback, the kernel Specialist's
checks on replies, and the Critic narrator that can never change a verdict."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from arbor.agents.contracts import Critic, Directive, Judgement
from arbor.agents.critic.narrator import LLMCritic
from arbor.agents.llm import BudgetConfig, LLMRuntime, RoleConfig
from arbor.agents.orchestrator.llm import LLMOrchestrator
from arbor.agents.skills import kernel_moves, load_skills
from arbor.agents.specialists.kernel_heuristic import HeuristicKernelSpecialist
from arbor.agents.specialists.kernel_llm import LLMKernelSpecialist
from arbor.agents.transforms import to_modelnew
from arbor.search_tree import open_store
from arbor.search_tree.policies import make_policy

from .kernel_script import FAST, NARRATIVE, SYNTAX
from .scripted_server import ScriptedServer, ok


@dataclass
class Tree:
    store: object
    cid: int
    runtime: LLMRuntime
    ids: dict = field(default_factory=dict)

    def add(self, name, source, parent=None, state="accepted", value=0.0, diagnosis="improved", move=None):
        sha = self.store.put_artifact(source, "kernel_source")
        node = self.store.add_node(self.cid, sha, "t", parent_id=self.ids.get(parent), move_id=move,
                                   hypothesis=f"{name} hypothesis")
        self.store.transition(node.id, "queued")
        self.store.start_running(node.id, "o")
        m = self.store.record_measurement(node.id, 1, "primary",
                                          {"status": "ok" if state != "failed" else "error",
                                           "error_text": "NameError: name 'gate_tensor' is not defined"}, "local")
        if state == "accepted":
            self.store.record_verdict(node.id, m.id, "accept", diagnosis, "ok", [], final_state="accepted",
                                      value=value)
        else:
            self.store.record_verdict(node.id, m.id, "fail", diagnosis, "runtime error: NameError", [],
                                      final_state=state)
        self.ids[name] = node.id
        return node.id


@pytest.fixture
def tree(tmp_path, campaign_dir):
    store = open_store(f"sqlite:///{tmp_path / 't.db'}")
    cid = store.get_or_create_campaign("c", "kernel", {}).id
    rt = LLMRuntime(BudgetConfig())
    rt.bind(store, cid)
    t = Tree(store, cid, rt)
    t.problem = (campaign_dir / "problems" / "gelu_gate.py").read_text()
    t.add("root", to_modelnew(t.problem))
    yield t
    store.close()


def cfg(url, role="orchestrator", retries=2):
    return RoleConfig(role=role, model="scripted-model", base_url=url, max_retries=retries, backoff_s=0.01,
                      max_backoff_s=0.02, timeout_s=5, prompt_tokens=3000)


def kernel_specialist(tree, url):
    sp = LLMKernelSpecialist(None, tree.runtime, load_skills(), "gelu_gate on cpu", problem_source=tree.problem)
    sp.client = tree.runtime.client(cfg(url, "specialist"), sp.name)
    return sp


def source_of(tree):
    return tree.store.get_artifact


def test_llm_orchestrator_picks_a_heuristic_move(tree):
    skills = load_skills()
    heuristic = HeuristicKernelSpecialist(kernel_moves(skills, "cpu"))
    with ScriptedServer(lambda r: ok({"node_id": 1, "mode": "draft", "move_id": "silu-manual",
                                      "rationale": "the SiLU is spelled out"})) as server:
        orch = LLMOrchestrator(make_policy("puct"), heuristic, None, tree.runtime, skills, "gelu_gate on cpu")
        orch.client = tree.runtime.client(cfg(server.url), orch.name)
        sel = orch.select(None, source_of(tree), lambda sha: False, step=0)
        prompt = server.chat_requests()[0].text
    assert sel.parent.id == tree.ids["root"] and sel.options[0].move.id == "silu-manual"
    assert "untried moves:" in prompt and "silu-manual" in prompt and "the SiLU is spelled out" in sel.score_note


def test_failed_nodes_are_debug_candidates_and_a_bad_pick_is_repaired(tree):
    tree.add("a", FAST, "root", value=0.8)
    tree.add("b", FAST + "# broken\n", "a", state="failed", diagnosis="runtime_error")
    with ScriptedServer() as server:
        server.push(ok({"node_id": 99, "mode": "improve", "rationale": "not a candidate"}),
                    ok({"node_id": tree.ids["b"], "mode": "debug", "rationale": "fix the NameError"}))
        sp = kernel_specialist(tree, server.url)
        orch = LLMOrchestrator(make_policy("puct"), sp, None, tree.runtime, [], "gelu_gate on cpu")
        orch.client = tree.runtime.client(cfg(server.url), orch.name)
        sel = orch.select(None, source_of(tree), None, step=3)
        listed = server.chat_requests()[0].text
        repair = server.chat_requests()[1].messages[-1]["content"]
    assert f"node {tree.ids['b']}: mode=debug" in listed and "diagnosis=runtime_error" in listed
    assert "node_id 99 is not one of the candidates" in repair
    assert sel.parent.id == tree.ids["b"] and sel.options == [Directive("debug", 0.6, "fix the NameError")]


def test_orchestrator_falls_back_to_debug_first_when_the_endpoint_is_down(tree):
    tree.add("a", FAST, "root", value=0.8)
    tree.add("b", FAST + "# broken\n", "a", state="failed", diagnosis="runtime_error")
    server = ScriptedServer().start()
    url = server.url
    server.stop()
    sp = kernel_specialist(tree, url)
    orch = LLMOrchestrator(make_policy("puct"), sp, None, tree.runtime, [], "gelu_gate on cpu")
    orch.client = tree.runtime.client(cfg(url, retries=0), orch.name)
    sel = orch.select(None, source_of(tree), None, step=0)
    assert sel.parent.id == tree.ids["b"] and "debug first" in sel.score_note and "LLM unavailable" in sel.score_note
    kinds = [e.kind for e in tree.store.events(tree.cid)]
    assert "llm_fallback" in kinds
    # a failed node gets one debug child, then it is no longer a candidate
    b = tree.store.get_node(tree.ids["b"])
    assert sp.directive(b, 0, {}) is not None and sp.directive(b, 1, {}) is None


def test_specialist_sends_back_sources_that_repeat_the_tree_or_lack_modelnew(tree):
    tree.add("a", FAST, "root", value=0.8)
    a = tree.store.get_node(tree.ids["a"])

    def reply(src):
        return ok({"candidates": [{"hypothesis": "a hypothesis long enough", "language": "pytorch",
                                   "predicted_speedup": 1.5, "source": src}]})

    new = FAST.replace("F.silu(gate)", "gate * torch.sigmoid(gate)")
    with ScriptedServer() as server:
        server.push(reply(FAST), reply("```python\n" + new + "```"))
        sp = kernel_specialist(tree, server.url)
        (prop,) = sp.propose(a, [Directive("improve", 0.5)], k=1)
        server.push(reply("print('there is no model in this module at all')"), reply("import torch\n"))
        assert sp.propose(a, [Directive("improve", 0.5)], k=1) == []
        texts = [r.messages[-1]["content"] for r in server.chat_requests()]
        first_prompt = server.chat_requests()[0].text
    assert "identical to a candidate already in the tree" in texts[1]
    assert prop.source == new and prop.move_id.startswith("llm-improve-pytorch-") and prop.predicted_gain == 1.5
    assert "defines no class ModelNew" in texts[3]
    assert FAST.splitlines()[-1].strip() in first_prompt  # the parent's source is in the prompt
    kinds = [e.kind for e in tree.store.events(tree.cid)]
    assert kinds.count("llm_no_proposal") == 1


class FakeGateCritic(Critic):
    name = "critic"
    config = "cfg"

    def judge(self, *a):
        raise AssertionError("not used")

    def static_check(self, *a):
        raise AssertionError("not used")


@pytest.mark.parametrize("final", ["failed", "accepted"])
def test_critic_narrative_never_changes_the_verdict(tree, final):
    tree.add("b", SYNTAX, "root", state="failed", diagnosis="runtime_error")
    node = tree.store.get_node(tree.ids["b"])
    decision = "fail" if final == "failed" else "accept"
    j = Judgement(decision, "runtime_error", "runtime error: NameError", final,
                  gates=[{"gate": "ran", "passed": final == "accepted", "reason": "x"}], value=None)
    with ScriptedServer(lambda r: ok({**NARRATIVE, "decision": "accept", "final_state": "accepted"})) as server:
        critic = LLMCritic(FakeGateCritic(), None, tree.runtime, load_skills(), "gelu_gate on cpu")
        critic.client = tree.runtime.client(cfg(server.url, "critic"), critic.agent)
        out = critic.narrate(node, j, SYNTAX, lambda: FAST, tree.runtime.last_measurement(node.id))
        n_calls = len(server.chat_requests())
        prompt = server.chat_requests()[0].text if n_calls else ""
    assert (out.decision, out.diagnosis, out.final_state, out.value, out.reason) == \
        (j.decision, j.diagnosis, j.final_state, j.value, j.reason)
    assert critic.name == "critic" and critic.config == "cfg"  # verdicts stay the gate Critic's
    if final == "failed":
        assert n_calls == 1 and "gate_tensor" in out.gates[-1]["narrative"] and out.gates[:-1] == j.gates
        assert "-    def forward(self, x, gate):" in prompt and "NameError" in prompt  # diff and error
    else:
        assert n_calls == 0 and out is j


def test_narrator_failure_leaves_the_verdict_alone(tree):
    tree.add("b", SYNTAX, "root", state="failed", diagnosis="runtime_error")
    node = tree.store.get_node(tree.ids["b"])
    j = Judgement("fail", "runtime_error", "boom", "failed", gates=[])
    with ScriptedServer(lambda r: ok({"root_cause": 5})) as server:  # never valid
        critic = LLMCritic(FakeGateCritic(), None, tree.runtime, [], "t")
        critic.client = tree.runtime.client(cfg(server.url, "critic"), critic.agent)
        assert critic.narrate(node, j, SYNTAX, lambda: None, None) is j
    ev = [e for e in tree.store.events(tree.cid) if e.kind == "llm_no_narrative"]
    assert ev and "invalid output" in ev[0].payload["error"]
    assert tree.runtime.state().failures_in_row == 1
