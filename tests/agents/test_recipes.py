"""Warm-start recipes: a similar problem's winning move sequence, offered whole at the baseline."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from arbor.agents.knowledge.recipes import Recipe, expand, recipe_id, recipes
from arbor.agents.priors import OutcomeIndex
from arbor.agents.skills import kernel_moves, load_skills
from arbor.agents.specialists.kernel_heuristic import HeuristicKernelSpecialist
from arbor.agents.transforms import apply_move
from arbor.search_tree.knowledge import KnowledgeRecord
from arbor.search_tree.store import artifact_sha

from .test_knowledge import HW, SIG, node

CONV = {"ops": {"conv": 0.99, "layout": 0.01}, "shapes": [[8, 32, 64, 64], [64, 32, 4, 4]], "dtype": "float32"}
CONV_B = {**CONV, "shapes": [[16, 16, 128, 128], [64, 16, 4, 4]]}
KNOWN = {"compile-default", "inference-mode", "channels-last", "cpp-fused", "compile-freezing"}


def rec(campaign, move, path, speedup, sig=CONV, node_id=1, **kw) -> KnowledgeRecord:
    base = dict(campaign=campaign, node_id=node_id, artifact_sha=f"{campaign}{node_id}", hardware={"class": HW},
                software={}, signature=sig, move_id=move, family="f", agent="a", diagnosis="improved",
                decision="accept", speedup=speedup, integrity_ok=True, parent_speedup=1.0, path=list(path))
    base.update(kw)
    return KnowledgeRecord(**base)


def test_the_best_multi_move_path_of_each_similar_problem_most_similar_first():
    recs = [rec("near", "compile-default", [], 1.19, CONV, 1),
            rec("near", "channels-last", ["compile-default", "inference-mode"], 1.46, CONV, 3),
            rec("far", "channels-last", ["compile-freezing"], 1.31, CONV_B, 2),
            rec("single", "cpp-fused", [], 4.4, CONV, 1),  # its best took one move: a warm prior's job
            rec("single", "compile-default", ["cpp-fused"], 4.2, CONV, 2),
            rec("gemm", "compile-default", ["inference-mode"], 3.0, SIG, 1)]  # not similar
    out = recipes(recs, HW, CONV, KNOWN)
    assert [r.campaign for r in out] == ["near", "far"]
    assert out[0].moves == ("compile-default", "inference-mode", "channels-last") and out[0].speedup == 1.46
    assert out[0].similarity > out[1].similarity
    assert recipes(recs, HW, CONV, KNOWN, exclude_campaign="near")[0].campaign == "far"
    assert recipes(recs, "cuda/nvidia-hopper/33+", CONV, KNOWN) == []
    assert len(recipes(recs, HW, CONV, KNOWN, limit=1)) == 1


def test_a_campaigns_verified_final_makes_its_recipe_not_its_highest_reading():
    recs = [rec("n", "compile-default", [], 1.3, node_id=1),
            rec("n", "channels-last", ["compile-default"], 1.5, node_id=2),
            rec("n", "inference-mode", ["compile-default", "channels-last"], 1.56, node_id=3)]
    assert recipes(recs, HW, CONV, KNOWN)[0].moves == ("compile-default", "channels-last", "inference-mode")
    recs[1] = replace(recs[1], extra={"verified_final": 1.48})  # the final verification's choice
    (r,) = recipes(recs, HW, CONV, KNOWN)
    assert r.moves == ("compile-default", "channels-last") and r.speedup == 1.48
    recs[1], recs[0] = replace(recs[1], extra={}), replace(recs[0], extra={"verified_final": 1.31})
    assert recipes(recs, HW, CONV, KNOWN) == []  # a final of one move is a warm prior's job


def test_flagged_revoked_and_unknown_moves_never_make_a_recipe():
    good = rec("n", "channels-last", ["compile-default"], 1.5, node_id=2)
    for bad in (replace(good, revoked="final verification: incorrect"), replace(good, integrity_ok=False),
                replace(good, diagnosis="hack_suspected", decision="fail")):
        assert recipes([bad], HW, CONV, KNOWN) == []
    # a path through a move this campaign lacks is cut there: what was built on it may not hold
    cut = rec("n", "channels-last", ["compile-default", "triton-fused-b1024-w4"], 1.5)
    assert recipes([cut], HW, CONV, KNOWN) == []
    assert recipes([rec("n", "channels-last", ["compile-default", "channels-last"], 1.5)], HW, CONV, KNOWN)
    # a recipe node recorded by a warm campaign stands for its moves
    nested = rec("n", "inference-mode", [recipe_id(("compile-default", "channels-last"))], 1.6)
    assert recipes([nested], HW, CONV, KNOWN)[0].moves == ("compile-default", "channels-last", "inference-mode")
    assert expand(recipe_id(("a", "b"))) == ["a", "b"] and expand("a") == ["a"] and expand(None) == []


CONV_PROBLEM = Path(__file__).resolve().parents[2] / "benchmarks" / "problems" / "l1_08_conv2d.py"


def _baseline_source():
    from arbor.agents.transforms import to_modelnew

    return to_modelnew(CONV_PROBLEM.read_text())


def test_a_recipe_is_offered_first_at_the_baseline_applied_move_after_move():
    moves = kernel_moves(load_skills(), "cpu")
    spec = HeuristicKernelSpecialist(moves)
    src = _baseline_source()
    recipe = Recipe(("compile-default", "no-such-move", "channels-last"), "cold-conv", 0.9, 1.46)
    idx = OutcomeIndex(recipes=[recipe])
    root = node(1, None, None, "accepted", "baseline")
    opts = spec.options(root, src, set(), lambda sha: False, idx)
    first = opts[0]
    assert first.move.id == "recipe:compile-default:channels-last"  # the move it lacks is left out
    by_id = {m.id: m for m in moves}
    step = apply_move(src, by_id["compile-default"].transform, by_id["compile-default"].params)
    assert first.source == apply_move(step, by_id["channels-last"].transform, by_id["channels-last"].params)
    own = max(o.prior for o in opts if o.move.id in ("compile-default", "channels-last"))
    assert first.prior > own and first.knowledge["recipe"]["campaign"] == "cold-conv"
    prop = spec.propose(root, opts)[0]
    assert prop.move_id == first.move.id and prop.family == "knowledge-recipe" and "cold-conv" in prop.hypothesis
    # tried, known, below another node, or reduced to one move: not offered
    assert all(o.move.id != first.move.id for o in spec.options(root, src, {first.move.id}, lambda s: False, idx))
    known = artifact_sha(first.source)
    assert all(o.move.id != first.move.id for o in spec.options(root, src, set(), lambda s: s == known, idx))
    child = node(2, 1, "compile-default", "accepted", "improved")
    assert not any(o.move.id.startswith("recipe:") for o in spec.options(child, step, set(), lambda s: False, idx))
    lone = OutcomeIndex(recipes=[Recipe(("channels-last", "no-such-move"), "c", 0.9, 1.4)])
    assert not any(o.move.id.startswith("recipe:") for o in spec.options(root, src, set(), lambda s: False, lone))


def test_below_a_recipe_node_the_recorded_paths_see_its_moves():
    idx = OutcomeIndex(warm={"m": 0.2}, warm_by_path={(("channels-last", "compile-default"), "m"): 0.9})
    for n in (node(1, None, None, "accepted", "baseline"),
              node(2, 1, recipe_id(("compile-default", "channels-last")), "accepted", "improved")):
        idx._parents[n.id] = n.parent_id
        idx.observe(n)
    assert idx.warm_prior("m", 2) == 0.9 and idx.warm_prior("m", 1) == 0.2


def test_a_warm_start_measures_the_skills_first_choice_at_the_baseline_second_at_worst():
    moves = kernel_moves(load_skills(), "cpu")
    spec = HeuristicKernelSpecialist(moves)
    src = _baseline_source()
    root = node(1, None, None, "accepted", "baseline")
    cold = [o.move.id for o in spec.options(root, src, set(), lambda s: False, OutcomeIndex())]
    skill_first = cold[0]
    assert skill_first == max(cold, key=lambda m: spec.by_id[m].prior)
    # the knowledge puts another move far ahead of it
    other = next(m for m in cold if m != skill_first)
    idx = OutcomeIndex(warm={other: 0.99, skill_first: 0.05})
    warm = spec.options(root, src, set(), lambda s: False, idx)
    assert warm[0].move.id == other  # knowledge reorders the first evaluation
    after = spec.options(root, src, {other}, lambda s: False, idx)
    assert after[0].move.id == skill_first  # but the skill's first choice is measured next
    assert any("skill's first choice" in st["why"] for st in after[0].trace.to_json()["steps"])
    # once measured, the knowledge orders the rest; a cold campaign is never reordered
    rest = spec.options(root, src, {other, skill_first}, lambda s: False, idx)
    assert all("skill's first choice" not in st["why"] for o in rest for st in o.trace.to_json().get("steps", []))
    cold_after = spec.options(root, src, {other}, lambda s: False, OutcomeIndex())
    assert all("skill's first choice" not in st["why"] for o in cold_after for st in o.trace.to_json().get("steps", []))
