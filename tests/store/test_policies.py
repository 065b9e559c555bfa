import random

import pytest

from arbor.search_tree.policies import Candidate, make_policy
from arbor.search_tree.records import NodeRecord
from arbor.search_tree.tree import best_path, build_stats


def cand(i, q, visits, parent_visits, prior, value=None):
    return Candidate(i, q, q if value is None else value, visits, parent_visits, prior, 1)


def test_puct_prefers_value_when_explored():
    p = make_policy("puct", exploration=1.0)
    good = cand(1, 1.0, 10, 20, 0.5)
    bad = cand(2, 0.1, 10, 20, 0.5)
    assert p.choose([bad, good], random.Random(0)).node_id == 1


def test_puct_explores_unvisited_high_prior():
    p = make_policy("puct", exploration=2.0)
    explored = cand(1, 0.3, 12, 12, 0.1)
    fresh = cand(2, 0.2, 0, 12, 0.9)
    assert p.choose([explored, fresh], random.Random(0)).node_id == 2


def test_zero_prior_removes_exploration_bonus():
    p = make_policy("puct", exploration=5.0)
    a = cand(1, 0.2, 0, 10, 0.0)
    b = cand(2, 0.25, 0, 10, 0.0)
    assert p.choose([a, b], random.Random(0)).node_id == 2


def test_greedy_and_ucb1_and_random():
    cs = [cand(1, 0.1, 0, 5, 0.9), cand(2, 0.5, 4, 5, 0.1), cand(3, 0.0, 0, 5, 0.5)]
    assert make_policy("greedy").choose(cs, random.Random(0)).node_id == 2
    assert make_policy("ucb1", 0.0).choose(cs, random.Random(0)).node_id == 2
    assert make_policy("ucb1", 10.0).choose(cs, random.Random(0)).node_id in (1, 3)
    picks = {make_policy("random").choose(cs, random.Random(s)).node_id for s in range(30)}
    assert picks == {1, 2, 3}


def test_unknown_policy():
    with pytest.raises(ValueError, match="unknown policy 'nope'"):
        make_policy("nope")


def _n(i, parent, state="accepted", value=None):
    from datetime import datetime

    return NodeRecord(i, 1, parent, 0, state, f"{i:064d}", "t", None, None, "", 1.0, None, value, None,
                      None, None, 0, datetime(2020, 1, 1), None)


def test_tree_stats_propagate_best_and_visits():
    nodes = [_n(1, None, value=0.0), _n(2, 1, value=0.2), _n(3, 2, value=0.7), _n(4, 1, "rejected"),
             _n(5, 3, "failed")]
    st = build_stats(nodes)
    assert st[1].visits == 4 and st[2].visits == 2 and st[3].visits == 1
    assert st[1].subtree_best == pytest.approx(0.7)
    assert st[4].subtree_best == float("-inf")
    assert best_path(st, 3) == [1, 2, 3]
