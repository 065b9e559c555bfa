"""benchmarks/family_waste.py: evaluations a campaign spent on a move family after its first
member regressed by more than 10% (the acceptance figure of families as correlated arms)."""

from __future__ import annotations

import pytest

from arbor.search_tree import open_store
from benchmarks.family_waste import campaign_waste, compare, family_of


def test_compile_variants_are_one_family_whatever_skill_declares_them():
    assert family_of("compile-default", "torch-compile") == family_of("compile-freezing", "inductor-cpu") == "compile"
    assert family_of("compile-epilogue-block", "compile-epilogue") == "compile"
    assert family_of("threads-2", "cpu-threads-vectorization") == "threads"
    assert family_of("graph-fold-affine", "graph-algebra") == "graph-algebra"
    assert family_of(None, "x") is None


def _measured(store, camp, source, parent, move, family, speedup, state="rejected", value=None):
    n = store.add_node(camp.id, store.put_artifact(source, "kernel_source"), "t", parent_id=parent,
                       move_id=move, family=family)
    store.transition(n.id, "queued")
    store.start_running(n.id, "me")
    store.record_measurement(n.id, 1, "primary", {"status": "ok", "baseline_samples": [1.0] * 5,
                                                  "candidate_samples": [1.0 / speedup] * 5}, "local")
    if state == "accepted":
        import math

        store.record_verdict(n.id, None, "accept", "improved", "r", [], agent="c", final_state="accepted",
                             value=math.log(speedup), speedup=speedup)
    return n.id


def test_softmax_like_campaign_counts_the_siblings_measured_after_the_first_regression(tmp_path):
    store = open_store(f"sqlite:///{tmp_path / 'w.db'}")
    camp = store.get_or_create_campaign("softmax", "kernel", {})
    root = _measured(store, camp, "root", None, None, None, 1.0, state="accepted")
    _measured(store, camp, "a", root, "compile-default", "torch-compile", 0.763)  # the first regression
    _measured(store, camp, "b", root, "compile-freezing", "inductor-cpu", 0.769)
    _measured(store, camp, "c", root, "compile-max-autotune", "torch-compile", 0.769)
    win = _measured(store, camp, "d", root, "graph-native-norms", "graph-operators", 1.5, state="accepted")
    _measured(store, camp, "e", win, "compile-epilogue-fusion", "torch-compile", 1.6)  # after it: counted
    _measured(store, camp, "f", win, "threads-2", "cpu-threads-vectorization", 1.4)  # 0.93 of its parent: no
    # a node proposed but never measured is not an evaluation
    store.add_node(camp.id, store.put_artifact("g", "kernel_source"), "t", parent_id=root,
                   move_id="compile-coordinate-descent", family="torch-compile")
    w = campaign_waste(store, camp.id)
    assert w["by_family"] == {"compile": 3} and w["total"] == 3
    assert w["first_regression"]["compile"]["move"] == "compile-default"
    assert "threads" not in w["first_regression"]
    store.close()


def test_before_and_after_compare_per_problem_and_judge_the_fall():
    before = {"p": {"total": 4, "by_family": {"compile": 4}}, "q": {"total": 1, "by_family": {"threads": 1}},
              "only_before": {"total": 9, "by_family": {}}}
    after = {"p": {"total": 1, "by_family": {"compile": 1}}, "q": {"total": 0, "by_family": {}}}
    c = compare(before, after)
    assert [r["problem"] for r in c["rows"]] == ["p", "q"]  # problems in both runs only
    assert (c["before_total"], c["after_total"]) == (5, 1) and c["fall"] == pytest.approx(0.8) and c["met"]
    assert not compare(before, {"p": {"total": 3, "by_family": {}}, "q": {"total": 0, "by_family": {}}})["met"]


def test_same_parent_and_wins_are_counted_beside_the_total(tmp_path):
    """l2_05's shape: compile regressed below the collapsed child, then a compile variant at the root
    won. The issue's total counts it; the same-parent count does not, and the win is named."""
    store = open_store(f"sqlite:///{tmp_path / 'w.db'}")
    camp = store.get_or_create_campaign("l2_05", "kernel", {})
    root = _measured(store, camp, "root", None, None, None, 1.0, state="accepted")
    child = _measured(store, camp, "a", root, "graph-algebra-all", "graph-algebra", 90.0, state="accepted")
    _measured(store, camp, "b", child, "compile-default", "torch-compile", 75.0)  # 0.83 of its parent
    _measured(store, camp, "c", child, "compile-freezing", "torch-compile", 74.0)  # same parent: counted
    _measured(store, camp, "d", root, "compile-epilogue-fusion", "torch-compile", 1.09, state="accepted")
    w = campaign_waste(store, camp.id)
    assert w["total"] == 2 and w["same_parent"] == 1 and w["wins"] == 1
    store.close()
    c = compare({"p": {"total": 4, "by_family": {}, "same_parent": 4, "wins": 0}},
                {"p": {"total": 2, "by_family": {}, "same_parent": 1, "wins": 1}})
    assert c["same_parent_fall"] == pytest.approx(0.75) and c["wins_after"] == 1 and not c["met"]
