"""Lazy selection on prior bounds must choose exactly what an exhaustive pass would."""

import random

import numpy as np
import pytest

from arbor.agents.orchestrator.heuristic import HeuristicOrchestrator
from arbor.agents.skills import MoveSpec
from arbor.agents.contracts import Option
from arbor.search_tree.index import TreeIndex
from arbor.search_tree.policies import make_policy
from arbor.search_tree import open_store

from tests.store.test_index import grow


class FakeSpecialist:
    """Exact priors that vary by node, and nodes with no option left at all."""

    name = "fake"

    def __init__(self):
        self.calls = 0

    def prior_of(self, node_id):
        r = random.Random(node_id).random()
        return 0.0 if r < 0.2 else r

    def options(self, node, source, tried, is_known, outcomes):
        self.calls += 1
        p = self.prior_of(node.id)
        if p == 0.0:
            return []
        return [Option(MoveSpec(id=f"m{node.id}", transform="set_threads", params={"threads": 1}, prior=p), "src", p)]


@pytest.mark.parametrize("policy", ["puct", "ucb1", "greedy"])
def test_lazy_selection_equals_exhaustive(tmp_path, policy):
    store = open_store(f"sqlite:///{tmp_path / 'o.db'}")
    cid = store.get_or_create_campaign("c", "kernel", {}).id
    grow(store, cid, 60, random.Random(7), accept_p=0.6)
    spec = FakeSpecialist()
    orch = HeuristicOrchestrator(make_policy(policy, 1.0), spec, seed=0)
    idx = TreeIndex(cid)
    idx.refresh(store)
    sel = orch.select(idx, lambda sha: "", lambda sha: False, step=0)

    # exhaustive: exact prior for every accepted node, then the policy's argmax
    full = TreeIndex(cid)
    full.refresh(store)
    rows, q, value, visits, pv, _ = full.candidate_arrays()
    exact = np.array([spec.prior_of(int(full._g.cols["id"][r])) for r in rows])
    keep = exact > 0
    pol = make_policy(policy, 1.0)
    scores = pol.scores(q[keep], value[keep], visits[keep], pv[keep], exact[keep], int(pv.max()), random.Random(0))
    best_ids = {int(full._g.cols["id"][r]) for r in rows[keep][scores >= scores.max() - 1e-12]}
    assert sel.parent.id in best_ids
    assert spec.calls < len(rows) or policy == "greedy"  # lazy: not every node was expanded to find it
    store.close()


def test_exhausted_when_no_options(tmp_path):
    store = open_store(f"sqlite:///{tmp_path / 'o.db'}")
    cid = store.get_or_create_campaign("c", "kernel", {}).id
    grow(store, cid, 5, random.Random(1), accept_p=1.0)

    class Empty(FakeSpecialist):
        def options(self, *a):
            return []

    orch = HeuristicOrchestrator(make_policy("puct"), Empty())
    idx = TreeIndex(cid)
    idx.refresh(store)
    assert orch.select(idx, lambda s: "", lambda s: False, 0) is None
    store.close()
