"""Work in flight in the tree index: pending children are a virtual loss on their parent, and a
win awaiting confirmation can be expanded (parallel campaigns only)."""

import pytest

from arbor.search_tree.index import TreeIndex
from arbor.search_tree import open_store


@pytest.fixture
def store(tmp_path):
    s = open_store(f"sqlite:///{tmp_path / 'i.db'}")
    yield s
    s.close()


def _node(store, cid, name, parent=None, move=None):
    return store.add_node(cid, store.put_artifact(name, "kernel_source"), "t", parent_id=parent, move_id=move)


def _finish(store, node, state, value=None):
    store.transition(node.id, "queued")
    store.start_running(node.id, "o")
    m = store.record_measurement(node.id, 1, "primary", {"status": "ok"}, "local")
    store.record_verdict(node.id, m.id, "accept" if state == "accepted" else "reject", "x", "x", [],
                         final_state=state, value=value)


def _scores(idx):
    rows, q, *_ = idx.candidate_arrays()
    return {int(idx._g.cols["id"][r]): float(x) for r, x in zip(rows, q)}


def test_pending_children_lower_their_parent_until_they_finish(store):
    cid = store.get_or_create_campaign("c", "kernel", {}).id
    root = _node(store, cid, "root")
    _finish(store, root, "accepted", 0.0)
    a = _node(store, cid, "a", root.id, "m1")
    _finish(store, a, "accepted", 0.5)
    idx = TreeIndex(cid)
    idx.refresh(store)
    before = _scores(idx)[a.id]
    kids = [_node(store, cid, f"a{i}", a.id, f"m{i}") for i in range(2)]  # two in flight below a
    idx.refresh(store)
    assert idx.pending_children(a.id) == 2
    assert _scores(idx)[a.id] == pytest.approx(before - idx.virtual_loss * 2 / (1 + 2))
    assert {"m0", "m1"} <= idx.tried[idx.row_of[a.id]]  # in flight = tried: never proposed again
    for k in kids:
        _finish(store, k, "rejected")
    idx.refresh(store)
    assert idx.pending_children(a.id) == 0 and _scores(idx)[a.id] == pytest.approx(before)


def test_a_win_being_confirmed_is_expandable_until_it_is_rejected(store):
    cid = store.get_or_create_campaign("c", "kernel", {}).id
    root = _node(store, cid, "root")
    _finish(store, root, "accepted", 0.0)
    b = _node(store, cid, "b", root.id, "m1")
    idx = TreeIndex(cid)
    idx.refresh(store)
    assert b.id not in _scores(idx)
    idx.set_provisional(store.get_node(b.id), 0.7)
    assert _scores(idx)[b.id] == pytest.approx(0.7) and idx.node(idx.row_of[b.id]).id == b.id
    assert _scores(idx)[root.id] < 0.7  # not the parent's Q: a failed confirmation could not undo it
    _finish(store, b, "rejected")  # the confirmation did not hold
    idx.refresh(store)
    assert b.id not in _scores(idx) and idx.node(idx.row_of[b.id]) is None


def test_a_node_in_flight_is_expandable_only_speculatively_valued_as_its_parent_and_discounted(store):
    cid = store.get_or_create_campaign("c", "kernel", {}).id
    root = _node(store, cid, "root")
    _finish(store, root, "accepted", 0.0)
    a = _node(store, cid, "a", root.id, "m1")
    _finish(store, a, "accepted", 0.4)
    b = store.add_node(cid, store.put_artifact("b", "kernel_source"), "t", parent_id=a.id, move_id="m2", prior=0.3)
    idx = TreeIndex(cid)
    idx.keep_pending = True
    idx.refresh(store)
    assert b.id not in _scores(idx)  # by default only judged nodes are expanded
    idx.speculative = True
    rows, q, value, visits, pv, prior = idx.candidate_arrays()
    at = {int(idx._g.cols["id"][r]): i for i, r in enumerate(rows)}
    assert value[at[b.id]] == pytest.approx(0.4)  # valued as what it is measured against
    assert prior[at[b.id]] == pytest.approx(0.3 * idx._g.cols["prior"][idx.row_of[b.id]])
    assert idx.confidence(idx.row_of[b.id]) == pytest.approx(0.3) and idx.confidence(idx.row_of[a.id]) == 1.0
    assert idx.node(idx.row_of[b.id]).id == b.id
    c = store.add_node(cid, store.put_artifact("c", "kernel_source"), "t", parent_id=b.id, move_id="m3", prior=0.9)
    idx.refresh(store)
    assert c.id not in _scores(idx)  # one level of bets only: its parent is itself in flight
    _finish(store, b, "rejected")
    idx.refresh(store)
    assert b.id not in _scores(idx) and idx.node(idx.row_of[b.id]) is None  # rejected: no longer expandable
    assert c.id not in _scores(idx)  # nor is a bet on a rejected parent


def test_focus_leaves_only_the_leading_node_expandable(store):
    cid = store.get_or_create_campaign("c", "kernel", {}).id
    root = _node(store, cid, "root")
    _finish(store, root, "accepted", 0.0)
    a = _node(store, cid, "a", root.id, "m1")
    _finish(store, a, "accepted", 0.3)
    b = _node(store, cid, "b", root.id, "m2")  # its first measurement beats a: a win being confirmed
    idx = TreeIndex(cid)
    idx.refresh(store)
    assert idx.leading_row() == idx.row_of[a.id]
    idx.set_provisional(b, 0.5)
    assert idx.leading_row() == idx.row_of[b.id]  # a win still being confirmed leads
    assert set(_scores(idx)) == {root.id, a.id, b.id}
    idx.focus = idx.row_of[b.id]
    assert set(_scores(idx)) == {b.id}
    idx.focus = None
    assert set(_scores(idx)) == {root.id, a.id, b.id}
