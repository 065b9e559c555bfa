"""A family that gained nothing right after another family's win is that win's untested
alternative at the win's parent (agents/priors.py ``OutcomeIndex.overlap``): its prior there is
restored, and when it is expected to gain more than the win did, the heuristic Orchestrator
measures it there next (``HeuristicOrchestrator._overlap_test``). The case behind it: a warm
Conv+Mish+GroupNorm campaign (graph-algebra-all 1.16x at the root, compile-default 1.002x after
it) never measured compile-default alone at the root, where the cold campaign found 1.30x."""

from __future__ import annotations

import math

from arbor.agents.orchestrator.heuristic import HeuristicOrchestrator
from arbor.agents.priors import OutcomeIndex
from arbor.agents.skills import MoveSpec
from arbor.agents.specialists.heuristic import HeuristicSpecialist
from arbor.search_tree.index import TreeIndex
from arbor.search_tree.policies import make_policy

from tests.agents.test_priors import _Store, node

GRAPH = "graph-algebra"


def _won_then_nothing(after: float = 1.002, compile_state: str = "accepted") -> list:
    """Root; graph-algebra-all wins 1.16x; compile-default after it gains ``after``."""
    return [node(1, None, None),
            node(2, 1, "graph-algebra-all", "accepted", "improved", 1.16, family=GRAPH),
            node(3, 2, "compile-default", compile_state, "improved" if compile_state == "accepted" else "regression",
                 1.16 * after)]


def _index(nodes: list, warm: dict | None = None, warm_log: dict | None = None) -> OutcomeIndex:
    idx = OutcomeIndex(warm=dict(warm or {}), warm_log=dict(warm_log or {}))
    idx.set_win_bar(1.011)
    for n in nodes:
        idx._parents[n.id] = n.parent_id
        idx.observe(n)
    return idx


def test_a_no_gain_after_a_win_restores_the_family_at_the_wins_parent():
    idx = _index(_won_then_nothing(), warm={"compile-default": 0.315})
    t = idx.trace("compile-default", "torch-compile", 0.5, parent_id=1)
    assert t.value == 0.5 and t.source == "knowledge"  # the neighbours' 0.315 and the 1.002x both set aside
    assert any("overlap" in s["why"] and "graph-algebra-all" in s["why"] for s in t.steps)
    over = idx.overlap("torch-compile", 1)
    assert (over.parent, over.child, over.won_by, over.move) == (1, 2, "graph-algebra-all", "compile-default")
    assert math.isclose(over.won, 1.16) and math.isclose(over.gain, 1.002)
    below = idx.trace("compile-freezing", "torch-compile", 0.3, parent_id=2)  # after the win: the evidence stands
    assert below.value < 0.3 and not any("overlap" in s["why"] for s in below.steps)


def test_no_overlap_without_a_win_or_after_real_harm_or_once_measured_at_the_parent():
    base = OutcomeIndex()
    base.set_win_bar(1.011)
    harm = _index(_won_then_nothing(after=0.8, compile_state="rejected"))
    assert harm.overlap("torch-compile", 1) is None  # a 0.8x after the win is harm of its own
    assert harm.adjust("compile-default", "torch-compile", 0.5, 1) < 0.5
    flat = _index([node(1, None, None), node(2, 1, "graph-algebra-all", "accepted", "improved", 1.005, family=GRAPH),
                   node(3, 2, "compile-default", "accepted", "improved", 1.006)])
    assert flat.overlap("torch-compile", 1) is None  # the "win" was under the Critic's bar
    measured = _index(_won_then_nothing() + [node(4, 1, "compile-freezing", "rejected", "regression", 0.97)])
    assert measured.overlap("torch-compile", 1) is None  # the family alone was measured at the root
    same = _index([node(1, None, None), node(2, 1, "compile-default", "accepted", "improved", 1.16),
                   node(3, 2, "compile-freezing", "accepted", "improved", 1.16)])
    assert same.overlap("torch-compile", 1) is None  # a sibling of the win itself: not an alternative to it


def test_the_no_gain_is_reported_as_a_rise_so_the_tree_index_bounds_are_recomputed():
    idx = _index(_won_then_nothing()[:2])
    assert idx.observe(node(3, 2, "compile-default", "accepted", "improved", 1.16 * 1.002)) > 1.0


def test_an_overlap_is_tested_only_when_the_move_could_beat_the_win():
    assert _index(_won_then_nothing()).overlap_tests() == []  # expected 1.1x when it wins: cannot beat 1.16x
    knowing = _index(_won_then_nothing(), warm_log={"compile-default": math.log(1.9)})
    assert [(o.parent, o.move) for o in knowing.overlap_tests()] == [(1, "compile-default")]
    # its family won 1.3x elsewhere in this campaign: that is reach enough too
    won_elsewhere = _index(_won_then_nothing() + [node(4, 3, "compile-freezing", "accepted", "improved",
                                                       1.16 * 1.002 * 1.3)])
    assert [o.move for o in won_elsewhere.overlap_tests()] == ["compile-default"]


SRC = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x\n"


def _specialist() -> HeuristicSpecialist:
    moves = [MoveSpec(id="graph-algebra-all", transform="set_threads", params={"threads": 1}, prior=0.95, family=GRAPH),
             MoveSpec(id="compile-default", transform="set_threads", params={"threads": 2}, prior=0.5,
                      family="torch-compile"),
             MoveSpec(id="inference-mode", transform="set_threads", params={"threads": 3}, prior=0.9,
                      family="autograd-off")]
    return HeuristicSpecialist(moves)


def _select(nodes: list, warm_log: dict) -> object:
    orch = HeuristicOrchestrator(make_policy("puct"), _specialist())
    orch.outcomes.warm_log.update(warm_log)
    orch.outcomes.set_win_bar(1.011)
    index = TreeIndex(1)
    orch.follow(index)
    index.refresh(_Store(nodes))
    return orch.select(index, lambda sha: SRC, lambda sha: False, step=len(nodes))


def test_the_orchestrator_measures_the_expected_alternative_at_the_parent_next():
    nodes = _won_then_nothing()
    tested = _select(nodes, {"compile-default": math.log(1.9)})
    assert tested.parent.id == 1 and tested.options[0].move.id == "compile-default"
    assert tested.score_note.startswith("overlap test: compile-default gained 1.002x after graph-algebra-all")
    plain = _select(nodes, {})  # no reason to expect it to beat the win: PUCT decides as before
    assert not plain.score_note.startswith("overlap test")
    done = _select(nodes + [node(4, 1, "compile-default", "accepted", "improved", 1.3)],
                   {"compile-default": math.log(1.9)})
    assert not done.score_note.startswith("overlap test")  # measured at the root: tested once
