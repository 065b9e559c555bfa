"""Knowledge on the agents' side: hardware classes, signatures, warm priors (with quarantine and
negative knowledge), calibration and the shrinking of poorly calibrated families."""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import datetime

from arbor.agents.contracts import Proposal
from arbor.agents.knowledge.calibration import Calibration, Tally, shrink, shrink_weight
from arbor.agents.knowledge.signature import bucket, hardware_class, signature_from_profile, similarity
from arbor.agents.knowledge.warm import warm_priors
from arbor.agents.priors import OutcomeIndex
from arbor.search_tree.knowledge import KnowledgeRecord
from arbor.search_tree.records import NodeRecord

HW = "cpu/intel-cpu/1-2"
SIG = {"ops": {"gemm": 0.8, "elementwise": 0.2}, "shapes": [[256, 512]], "dtype": "float32"}


def rec(move: str, diagnosis: str = "improved", decision: str = "accept", speedup: float = 1.5,
        node: int = 1, **kw) -> KnowledgeRecord:
    base = dict(campaign="old", node_id=node, artifact_sha=f"sha{node}", hardware={"class": HW},
                software={}, signature=SIG, move_id=move, family="f", agent="a", diagnosis=diagnosis,
                decision=decision, speedup=speedup, integrity_ok=True, parent_speedup=1.0, path=[])
    base.update(kw)
    return KnowledgeRecord(**base)


def test_hardware_class_is_coarse():
    a = hardware_class({"device": "cpu", "device_name": "Intel(R) Xeon(R) Gold 6230", "cpu_affinity": 2})
    b = hardware_class({"device": "cpu", "cpu_model": "Intel(R) Core(TM) i7", "cpu_count": 2})
    assert a["class"] == b["class"] == "cpu/intel-cpu/1-2"
    h = hardware_class({"device": "cuda:0", "gpu_name": "NVIDIA H100 80GB HBM3", "gpu_sms": 132})
    assert h["class"] == "cuda/nvidia-hopper/33+"


def test_signature_from_a_profile_and_similarity():
    prof = {"categories": {"gemm": 0.7, "elementwise": 0.3},
            "ops": [{"op": "aten::addmm", "shapes": [[1000, 500], [500, 2000]]}]}
    sig = signature_from_profile(prof, "float32")
    assert sig["ops"] == {"gemm": 0.7, "elementwise": 0.3} and sig["shapes"][0] == [1024, 512]
    assert signature_from_profile({"error": "no profiler"}, None) is None
    assert bucket(1000) == 1024 and bucket(1) == 1
    assert similarity(sig, sig) == 1.0
    conv = {"ops": {"conv": 1.0}, "dtype": "float32"}
    assert similarity(sig, conv) == 0.0
    assert similarity(sig, {**sig, "dtype": "float16"}) == 0.5


def test_wins_raise_and_failures_lower_priors():
    recs = [rec("win", node=1), rec("win", node=2), rec("crash", "compile_error", "fail", None, node=3),
            rec("slow", "regression", "reject", 0.8, node=4)]
    p, _ = warm_priors(recs, HW, SIG, {"win": 0.3, "crash": 0.5, "slow": 0.5, "untouched": 0.4})
    assert p["win"].prior > 0.3 and p["win"].wins == 2
    assert p["crash"].prior < 0.5 and p["slow"].prior < 0.5
    assert "untouched" not in p


def test_quarantine_flagged_revoked_and_foreign_records_never_raise_a_prior():
    base = {"m": 0.4}
    hostile = rec("m", "hack_suspected", "fail", 9.0, integrity_ok=False)
    revoked = rec("m", speedup=3.0, revoked="final verification: incorrect")
    for bad in (hostile, revoked, replace(revoked, integrity_ok=False)):
        p, _ = warm_priors([bad], HW, SIG, base)
        assert p["m"].prior < 0.4 and p["m"].wins == 0 and p["m"].flagged == 1
    # other hardware, a dissimilar problem or this very campaign: not used at all
    assert warm_priors([rec("m", hardware={"class": "cuda/nvidia-hopper/33+"})], HW, SIG, base) == ({}, {})
    assert warm_priors([rec("m", signature={"ops": {"conv": 1.0}})], HW, SIG, base) == ({}, {})
    assert warm_priors([rec("m")], HW, SIG, base, exclude_campaign="old") == ({}, {})


def test_priors_follow_the_recorded_path():
    recs = [rec("a", node=1, speedup=1.5), rec("b", node=2, speedup=3.0, parent_speedup=1.5, path=["a"]),
            rec("b", "regression", "reject", 0.9, node=3)]
    moves, by_path = warm_priors(recs, HW, SIG, {"a": 0.5, "b": 0.5})
    assert by_path[(("a",), "b")] > by_path[((), "b")]
    idx = OutcomeIndex(warm={k: v.prior for k, v in moves.items()}, warm_by_path=by_path)
    root = node(1, None, None, "accepted", "baseline")
    child = node(2, 1, "a", "accepted", "improved")
    for n in (root, child):
        idx._parents[n.id] = n.parent_id
        idx.observe(n)
    assert idx.adjust("b", None, 0.5, parent_id=2) == by_path[(("a",), "b")]
    assert idx.adjust("b", None, 0.5, parent_id=1) == by_path[((), "b")]
    assert idx.warm_note("b", 2)["source"] == "knowledge"


def node(i, parent, move, state, diagnosis, prior=0.5, family="f") -> NodeRecord:
    return NodeRecord(id=i, campaign_id=1, parent_id=parent, depth=0, state=state, artifact_sha=f"s{i}",
                      specialist="sp", move_id=move, family=family, hypothesis="", prior=prior,
                      predicted_gain=None, value=None, speedup=None, diagnosis=diagnosis, reason=None,
                      step=0, created_at=datetime.now(), finished_at=None)


def test_brier_and_log_error_per_agent_and_family():
    cal = Calibration()
    cal.add("heur", "f", 1.0, True, math.log(1.2), math.log(1.2))
    cal.add("heur", "f", 1.0, False, math.log(1.2), None)
    cal.add("llm", "g", 0.5, True, math.log(2.0), math.log(1.0))
    t = cal.to_json()
    assert t["agents"]["heur"]["brier"] == 0.5 and t["agents"]["llm"]["brier"] == 0.25
    assert t["families"]["g"]["log_mae"] == round(math.log(2.0), 4)
    assert t["agents"]["heur"]["log_n"] == 1


def test_poorly_calibrated_families_are_shrunk():
    good, bad = Tally(), Tally()
    for _ in range(4):
        good.add(0.9, True, None, None)
        bad.add(0.9, False, None, None)
    assert shrink_weight(good) == 1.0 and shrink(0.9, good) == 0.9
    assert shrink_weight(bad) < 1.0 and shrink(0.9, bad) < 0.5
    assert shrink_weight(Tally()) == 1.0
    idx = OutcomeIndex()
    rises = [idx.observe(node(i, 1, f"m{i}", "rejected", "no_gain", prior=0.9)) for i in range(2, 6)]
    assert rises[-1] is not None  # bounds are invalidated once the family is shrunk
    assert idx.adjust("other", "f", 0.9, parent_id=1) < 0.5
    assert idx.adjust("other", "g", 0.9, parent_id=1) == 0.9


def test_every_proposal_carries_p_accept_and_predicted_log_speedup():
    p = Proposal(source="x", move_id="m", family="f", hypothesis="h", prior=1.7, predicted_gain=1.25)
    assert p.p_accept == 1.0 and math.isclose(p.predicted_log_speedup, math.log(1.25))
    assert Proposal("x", "m", None, "h", 0.3, None).predicted_log_speedup is None


def test_a_record_weighs_from_nothing_at_the_threshold_to_a_whole_trial():
    from arbor.agents.knowledge.warm import MIN_SIMILARITY, weight

    assert weight(MIN_SIMILARITY - 0.01) == 0.0 and weight(MIN_SIMILARITY) == 0.0
    assert weight(1.0) == 1.0 and math.isclose(weight((1 + MIN_SIMILARITY) / 2), 0.5)


def test_a_record_counts_once_in_the_prior_after_a_path():
    """One win at the baseline: the prior of the move at the baseline is the skill's prior updated
    by that one win, not updated twice (once per move, again per path)."""
    _, by_path = warm_priors([rec("m", speedup=1.5)], HW, SIG, {"m": 0.3})
    assert by_path[((), "m")] == round((0.3 * 1.0 + 1.0) / (1.0 + 1.0), 4)
    # evidence from other paths still shapes it: a failure after another move lowers it
    _, by_path = warm_priors([rec("m", speedup=1.5), rec("m", "regression", "reject", 0.8, node=2, path=["a"])],
                             HW, SIG, {"m": 0.3})
    assert by_path[((), "m")] < round((0.3 + 1.0) / 2.0, 4)
