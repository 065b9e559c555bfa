"""When the fixed moves are spent, the Orchestrator goes on into a generated kernel's schedule
space while the speed of light shows headroom, and the exhausted stop says why in numbers.

The tree is written through the store's public API (a baseline, its generated C++ candidate
rejected at 0.97x, as ReLU's ``cpp-fused`` was); the Specialist is the real kernel Specialist with
the real skills' moves, so the schedule points offered are the ones a campaign would measure."""

from __future__ import annotations

import math

import pytest

from arbor.agents.orchestrator import schedule_space
from arbor.agents.orchestrator.heuristic import HeuristicOrchestrator
from arbor.agents.skills import load_skills
from arbor.agents.specialists.kernel_heuristic import HeuristicKernelSpecialist
from arbor.agents.transforms import to_modelnew
from arbor.agents.transforms.cpp import generate
from arbor.campaign.stopping import exhausted_reason
from arbor.search_tree import open_store
from arbor.search_tree.index import TreeIndex
from arbor.search_tree.policies import make_policy
from arbor.spec.sections import Budget

RELU = '''import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)

def get_inputs():
    return [torch.randn(256, 1024)]

def get_init_inputs():
    return []
'''


def _node(store, cid, source, parent, move, state, speedup, diagnosis):
    sha = store.put_artifact(source, "kernel_source")
    node = store.add_node(cid, sha, "t", parent_id=parent, move_id=move, family=move or "baseline")
    store.transition(node.id, "queued")
    store.start_running(node.id, "o")
    m = store.record_measurement(node.id, 1, "primary", {"status": "ok"}, "local")
    store.record_verdict(node.id, m.id, "accept" if state == "accepted" else "reject", diagnosis, "x", [],
                         final_state=state, value=math.log(speedup) if state == "accepted" else None, speedup=speedup)
    return node.id


def _campaign(tmp_path):
    store = open_store(f"sqlite:///{tmp_path / 's.db'}")
    cid = store.get_or_create_campaign("c", "kernel", {}).id
    moves = [m for s in load_skills() if s.name in ("cpp-codegen", "cpp-schedule") for m in s.moves]
    orch = HeuristicOrchestrator(make_policy("puct"), HeuristicKernelSpecialist(moves))
    idx = TreeIndex(cid)
    orch.attach(idx)
    root = _node(store, cid, to_modelnew(RELU), None, None, "accepted", 1.0, "baseline")
    fused = _node(store, cid, generate(to_modelnew(RELU)), root, "cpp-fused", "rejected", 0.97, "no_gain")
    idx.refresh(store)
    return store, idx, orch, root, fused


def test_spent_moves_and_headroom_go_into_the_schedule_space_of_the_rejected_kernel(tmp_path):
    store, idx, orch, root, fused = _campaign(tmp_path)
    source_of, known = store.get_artifact, (lambda sha: idx.has_artifact(sha))
    assert orch.select(idx, source_of, known, 1) is None  # the fixed move is spent: this was "exhausted"
    sel, note = orch.schedule_space(idx, source_of, known, 2.5, "memory")
    assert sel is not None and sel.parent.id == fused and "2.50x left" in note
    assert {o.move.transform for o in sel.options} == {"cpp_schedule"} and len(sel.options) == 8
    # memory-bound: a point that streams ranks above the unroller alone
    ids = [o.move.id for o in sel.options]
    assert ids.index("cpp-sched-b4096-nt") < ids.index("cpp-sched-unroll")
    # a measured point informs its neighbours: 16384-with-streams lost, 16384-with-prefetch drops
    before = {o.move.id: o.prior for o in sel.options}
    lost = next(o for o in sel.options if o.move.id == "cpp-sched-b16384-nt")
    _node(store, store.get_node(fused).campaign_id, lost.source, fused, lost.move.id,
          "rejected", 0.97 * 0.6, "regression")
    idx.refresh(store)
    sel2, _ = orch.schedule_space(idx, source_of, known, 2.5, "memory")
    after = {o.move.id: o.prior for o in sel2.options}
    assert after["cpp-sched-b16384-nt-pf4096"] < before["cpp-sched-b16384-nt-pf4096"]
    assert sel2.parent.id == fused and "cpp-sched-b16384-nt" not in after
    store.close()


def test_no_headroom_no_search_and_the_stop_says_why_in_numbers(tmp_path):
    store, idx, orch, root, fused = _campaign(tmp_path)
    sel, why = orch.schedule_space(idx, store.get_artifact, lambda sha: idx.has_artifact(sha), 1.2, "compute")
    assert sel is None and "1.20x" in why and "1.3x" in why
    reason = exhausted_reason(Budget(max_evaluations=12, max_wall_s=240), 71.0, 3, 1.2, why)
    assert reason.startswith("exhausted: no untried move left on any accepted node")
    for number in ("3 of max_evaluations=12", "71 s of max_wall_s=240 (70% left)", "1.20x left"):
        assert number in reason
    store.close()


def test_ranking_reads_the_bound_and_the_neighbours():
    assert schedule_space.bound_fit({"unroll": 1}, "memory") < schedule_space.bound_fit({"block": 4096, "stream": 1}, "memory")
    assert schedule_space.bound_fit({"unroll": 1}, "compute") == 1.0
    measured = [({"block": 4096, "stream": 1}, 1.4), ({"block": 1024, "stream": 0}, 0.5)]
    assert schedule_space.neighbour_factor({"block": 4096, "stream": 1, "prefetch": 1024}, measured) == pytest.approx(1.4)
    assert schedule_space.neighbour_factor({"block": 16384, "stream": 1, "prefetch": 1024}, measured) == 1.0
    assert schedule_space.neighbour_factor({"block": 1024, "stream": 1}, measured) == pytest.approx((0.5 * 1.4) ** 0.5)


def test_a_rejected_kernel_far_below_the_best_is_not_refined(tmp_path):
    """A schedule is not expected to gain more than 2x: with a 3x best elsewhere, the 0.97x
    kernel's points cannot matter, and the stop says so."""
    store, idx, orch, root, fused = _campaign(tmp_path)
    other = to_modelnew(RELU).replace("return torch.relu(x)", "return torch.clamp_min(x, 0.0)")
    _node(store, store.get_node(root).campaign_id, other, root, "some-win", "accepted", 3.0, "improved")
    idx.refresh(store)
    sel, why = orch.schedule_space(idx, store.get_artifact, lambda sha: idx.has_artifact(sha), 2.5, "memory")
    assert sel is None and "within 2x of the best" in why
    store.close()
