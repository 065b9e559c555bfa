"""Every agent implementation fills its role's contract: heuristic and LLM, kernel and serving.

Each is built as a campaign builds it (LLM ones talk to a real scripted HTTP endpoint), checked
with ``isinstance`` against the contract, then driven through the contract's methods only: a
Specialist's ``options``/``propose`` give ``Option``/``Directive`` and ``Proposal`` values, an
Orchestrator's ``select`` a ``Selection`` of the baseline, a Critic's ``static_check``/``judge``/
``narrate`` ``Judgement``s whose decisions no narrator changes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from arbor.agents.contracts import Critic, Directive, Judgement, Option, Orchestrator, Proposal, Selection, Specialist
from arbor.agents.critic.critic import HeuristicCritic
from arbor.agents.critic.gates import CriticConfig, Evidence
from arbor.agents.critic.narrator import LLMCritic
from arbor.agents.llm import BudgetConfig, LLMRuntime, RoleConfig
from arbor.agents.orchestrator.heuristic import HeuristicOrchestrator
from arbor.agents.orchestrator.llm import LLMOrchestrator
from arbor.agents.priors import OutcomeIndex
from arbor.agents.skills import MoveSpec, kernel_moves, load_skills
from arbor.agents.specialists.kernel_heuristic import HeuristicKernelSpecialist
from arbor.agents.specialists.kernel_llm import LLMKernelSpecialist
from arbor.agents.specialists.serving_heuristic import HeuristicServingSpecialist
from arbor.agents.specialists.serving_llm import Knob, LLMServingSpecialist
from arbor.agents.transforms import to_modelnew
from arbor.agents.transforms.knobs import canonical_config
from arbor.search_tree import open_store
from arbor.search_tree.index import TreeIndex
from arbor.search_tree.policies import make_policy

from .llm.kernel_script import FAST, NARRATIVE
from .llm.scripted_server import ScriptedServer, ok

SERVING_ROOT = canonical_config({"max_batch_size": 4, "dtype": "float32"})
SERVING_MOVES = [MoveSpec(id="batch-up", transform="knob_scale", params={"knob": "max_batch_size", "factor": 2},
                          prior=0.8, family="batch")]


@dataclass
class World:
    """A store holding one accepted baseline, and an endpoint that answers every schema."""

    store: object
    cid: int
    runtime: LLMRuntime
    root: object
    server: ScriptedServer
    kind: str

    def source(self, sha: str) -> str:
        return self.store.get_artifact(sha)

    def client(self, role: str, agent: str):
        return self.runtime.client(RoleConfig(role=role, model="scripted", base_url=self.server.url, max_retries=0,
                                              timeout_s=5, prompt_tokens=3000), agent)


def _reply(world_root: int):
    def respond(req):
        name = req.schema_name
        if name == "OrchestratorPick":
            return ok({"node_id": world_root, "mode": "draft", "rationale": "the baseline is the only node"})
        if name == "KernelProposals":
            return ok({"candidates": [{"hypothesis": "spell out the SiLU to fuse it", "language": "pytorch",
                                       "predicted_speedup": 1.5, "source": FAST}]})
        if name == "ServingProposals":
            return ok({"candidates": [{"hypothesis": "a larger batch drains the queue", "predicted_gain": 1.2,
                                       "changes": [{"knob": "max_batch_size", "value": 8}]}]})
        return ok(NARRATIVE)
    return respond


@pytest.fixture(params=["kernel", "serving"])
def world(request, tmp_path, campaign_dir):
    kind = request.param
    store = open_store(f"sqlite:///{tmp_path / 'c.db'}")
    cid = store.get_or_create_campaign("c", kind, {}).id
    runtime = LLMRuntime(BudgetConfig())
    runtime.bind(store, cid)
    source = (to_modelnew((campaign_dir / "problems" / "gelu_gate.py").read_text()) if kind == "kernel"
              else SERVING_ROOT)
    sha = store.put_artifact(source, "kernel_source" if kind == "kernel" else "serving_config")
    root = store.add_node(cid, sha, "baseline", hypothesis="the reference")
    store.transition(root.id, "queued")
    store.start_running(root.id, "o")
    m = store.record_measurement(root.id, 1, "primary", {"status": "ok"}, "local")
    store.record_verdict(root.id, m.id, "accept", "baseline", "ok", [], final_state="accepted", value=0.0)
    with ScriptedServer(_reply(root.id)) as server:
        yield World(store, cid, runtime, store.get_node(root.id), server, kind)
    store.close()


# --- implementations, as a campaign builds them ------------------------------------------------
def heuristic_specialist(w: World) -> Specialist:
    if w.kind == "kernel":
        return HeuristicKernelSpecialist(kernel_moves(load_skills(), "cpu"))
    return HeuristicServingSpecialist(SERVING_MOVES, symptoms_of=lambda node: {"queued": 2.0})


def llm_specialist(w: World) -> Specialist:
    if w.kind == "kernel":
        sp = LLMKernelSpecialist(None, w.runtime, [], "gelu_gate on cpu",
                                 problem_source=w.source(w.root.artifact_sha))
    else:
        sp = LLMServingSpecialist(None, w.runtime, [], "toy server",
                                  knobs=[Knob("max_batch_size", "int", min=1, max=64),
                                         Knob("dtype", choices=("float32", "bfloat16"))])
    sp.client = w.client("specialist", sp.name)
    return sp


def heuristic_orchestrator(w: World) -> Orchestrator:
    return HeuristicOrchestrator(make_policy("puct"), heuristic_specialist(w))


def llm_orchestrator(specialist):
    def build(w: World) -> Orchestrator:
        orch = LLMOrchestrator(make_policy("puct"), specialist(w), None, w.runtime, [], "target")
        orch.client = w.client("orchestrator", orch.name)
        return orch
    return build


def heuristic_critic(w: World) -> Critic:
    return HeuristicCritic(CriticConfig(confirm_new_best=False))


def llm_critic(w: World) -> Critic:
    narrator = LLMCritic(heuristic_critic(w), None, w.runtime, [], "target")
    narrator.client = w.client("critic", narrator.agent)
    return narrator


SPECIALISTS = {"heuristic": heuristic_specialist, "llm": llm_specialist}
ORCHESTRATORS = {"heuristic": heuristic_orchestrator, "llm-over-heuristic": llm_orchestrator(heuristic_specialist),
                 "llm-over-llm": llm_orchestrator(llm_specialist)}
CRITICS = {"heuristic": heuristic_critic, "llm-narrator": llm_critic}


# --- the contracts ---------------------------------------------------------------------------
@pytest.mark.parametrize("build", SPECIALISTS.values(), ids=SPECIALISTS.keys())
def test_specialist_contract(world, build):
    sp = build(world)
    assert isinstance(sp, Specialist) and sp.name
    root_source = world.source(world.root.artifact_sha)
    options = sp.options(world.root, root_source, set(), lambda sha: False, OutcomeIndex())
    assert options and all(isinstance(o, (Option, Directive)) for o in options)
    assert [o.prior for o in options] == sorted((o.prior for o in options), reverse=True)  # best first
    proposals = sp.propose(world.root, options, k=1)
    assert len(proposals) == 1
    (p,) = proposals
    assert isinstance(p, Proposal) and isinstance(p.audit, dict)
    assert p.source != root_source and p.move_id and p.hypothesis and 0 < p.prior <= 1
    if isinstance(options[0], Directive):  # a code-writing specialist says which reply wrote it
        assert p.audit["llm_event"] and p.audit["mode"] == "draft"
    if world.kind == "serving":
        assert json.loads(p.source)["max_batch_size"] == 8


@pytest.mark.parametrize("build", ORCHESTRATORS.values(), ids=ORCHESTRATORS.keys())
def test_orchestrator_contract(world, build):
    orch = build(world)
    assert isinstance(orch, Orchestrator) and isinstance(orch.specialist, Specialist) and orch.name
    index = TreeIndex(world.cid)
    index.refresh(world.store)
    sel = orch.select(index, world.source, lambda sha: False, 0)
    assert isinstance(sel, Selection) and sel.parent.id == world.root.id and sel.score_note
    assert sel.options and all(isinstance(o, (Option, Directive)) for o in sel.options)
    # what it selected is what its specialist can propose from
    assert all(isinstance(p, Proposal) for p in orch.specialist.propose(sel.parent, sel.options, 1))


@pytest.mark.parametrize("build", CRITICS.values(), ids=CRITICS.keys())
def test_critic_contract(world, build):
    critic = build(world)
    assert isinstance(critic, Critic) and critic.name == "critic" and critic.config.confirm_new_best is False
    if world.kind == "kernel":
        assert critic.static_check(FAST) is None
        bad = critic.static_check(FAST + "\nimport os\nos.system('true')\n")
        assert isinstance(bad, Judgement) and bad.decision in ("reject", "fail")
    ev = Evidence(is_root=False, attempt=1, purpose="primary", status="ok", error_class=None, error_text=None,
                  correctness=[{"seed": s, "ok": True} for s in range(3)])
    won = critic.judge(ev, [1.0 + 0.001 * (i % 7) for i in range(60)], [0.5 + 0.0005 * (i % 5) for i in range(60)])
    assert isinstance(won, Judgement) and won.decision == "accept" and won.final_state == "accepted"
    node = world.root
    asked = []
    failed = Judgement("fail", "runtime_error", "NameError", "failed", gates=[{"gate": "ran", "passed": False}])
    for j in (won, failed):
        out = critic.narrate(node, j, FAST, lambda: asked.append(1) or None, None)
        assert isinstance(out, Judgement)
        assert (out.decision, out.diagnosis, out.final_state, out.value) == \
            (j.decision, j.diagnosis, j.final_state, j.value)  # a narrative never changes a verdict
        assert out.gates[:len(j.gates)] == j.gates
    narrated = isinstance(critic, LLMCritic)
    assert len(asked) == (1 if narrated else 0)  # the parent's source is read only when narrating
