"""The incremental tree index must agree with a full rebuild, whatever order writes arrive in."""

import random

import numpy as np
import pytest

from arbor.search_tree.index import TreeIndex
from arbor.search_tree import open_store
from arbor.search_tree.tree import build_stats


@pytest.fixture
def store(tmp_path):
    s = open_store(f"sqlite:///{tmp_path / 'i.db'}")
    yield s
    s.close()


def grow(store, cid, n, rng, accept_p=0.5):
    """A random tree written through the store's public API, finishing nodes as it goes."""
    ids = [n.id for n in store.nodes(cid)]
    for i in range(len(ids), len(ids) + n):
        sha = store.put_artifact(f"node {i}", "kernel_source")
        parent = None if not ids else rng.choice([x for x in ids if store.get_node(x).state == "accepted"] or [ids[0]])
        node = store.add_node(cid, sha, "t", parent_id=parent, move_id=None if parent is None else f"m{i % 5}",
                              family="f")
        store.transition(node.id, "queued")
        store.start_running(node.id, "o")
        m = store.record_measurement(node.id, 1, "primary", {"status": "ok"}, "local")
        if parent is None or rng.random() < accept_p:
            store.record_verdict(node.id, m.id, "accept", "improved", "ok", [], final_state="accepted",
                                 value=0.0 if parent is None else rng.random())
        else:
            store.record_verdict(node.id, m.id, "reject", "no_gain", "no", [], final_state="rejected")
        ids.append(node.id)
    return ids


def test_incremental_matches_full_rebuild(store):
    rng = random.Random(1)
    cid = store.get_or_create_campaign("c", "kernel", {}).id
    live = TreeIndex(cid)
    grow(store, cid, 10, rng)
    live.refresh(store)
    grow(store, cid, 25, rng)
    assert live.refresh(store) >= 25
    fresh = TreeIndex(cid)
    fresh.refresh(store)
    stats = build_stats(store.nodes(cid))
    for idx in (live, fresh):
        for nid, st in stats.items():
            row = idx.row_of[nid]
            assert idx._g.cols["visits"][row] == st.visits
            q = idx._g.cols["q"][row]
            assert (q == st.subtree_best) or (np.isinf(q) and np.isinf(st.subtree_best))
    best = max((n for n in store.nodes(cid) if n.state == "accepted"), key=lambda n: n.value)
    assert live.best().id == fresh.best().id == best.id
    assert live.refresh(store) <= 35  # only the overlap window is re-read, and it changes nothing


def test_candidates_are_accepted_and_expandable(store):
    rng = random.Random(2)
    cid = store.get_or_create_campaign("c", "kernel", {}).id
    grow(store, cid, 20, rng)
    idx = TreeIndex(cid)
    idx.refresh(store)
    rows, q, value, visits, pv, prior = idx.candidate_arrays()
    states = {n.id: n.state for n in store.nodes(cid)}
    assert {int(idx._g.cols["id"][r]) for r in rows} == {i for i, s in states.items() if s == "accepted"}
    idx.set_prior(int(rows[0]), 0.0)
    assert len(idx.candidate_arrays()[0]) == len(rows) - 1
    assert (pv >= visits).all()


def test_recent_outcomes_feed_stop_conditions(store):
    rng = random.Random(3)
    cid = store.get_or_create_campaign("c", "kernel", {}).id
    grow(store, cid, 12, rng, accept_p=0.0)
    idx = TreeIndex(cid)
    idx.refresh(store)
    assert idx.since_last_win == 11
    assert len(idx.recent_finished) == 11 and all(s == "rejected" for s, _ in idx.recent_finished)
