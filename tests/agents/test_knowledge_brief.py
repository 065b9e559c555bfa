"""The knowledge brief: what the most similar problems taught, in words, for an LLM Specialist."""

from __future__ import annotations

from dataclasses import replace

from arbor.agents.knowledge.brief import Neighbour, neighbours, render
from arbor.agents.knowledge.recipes import recipe_id

from .test_knowledge import HW, SIG
from .test_recipes import CONV, CONV_B, rec


def _recs():
    return [rec("near", "compile-default", [], 1.19, CONV, 1),
            rec("near", "channels-last", [recipe_id(("compile-default", "inference-mode"))], 1.46, CONV, 3),
            rec("near", "cpp-fused", [], 0.8, CONV, 4, diagnosis="regression", decision="reject"),
            rec("near", "compile-max-autotune", [], 1.0, CONV, 5, diagnosis="no_gain", decision="reject"),
            rec("near", "llm-draft-cuda-1234abcd", [], 9.0, CONV, 6, diagnosis="hack_suspected", decision="fail",
                integrity_ok=False, extra={"hypothesis": "cache the output  across calls"}),
            rec("far", "llm-draft-triton-5678", [], 2.2, CONV_B, 2,
                extra={"hypothesis": "one Triton kernel:\n implicit GEMM with the bias fused"}),
            rec("far", "compile-default", [], 3.5, CONV_B, 7, revoked="final verification: incorrect"),
            rec("gemm", "compile-default", [], 3.0, SIG, 1)]  # not similar


def test_most_similar_first_with_the_best_honest_path_and_what_did_not_help():
    found = neighbours(_recs(), HW, CONV)
    assert [n.campaign for n in found] == ["near", "far"] and found[0].similarity > found[1].similarity
    near, far = found
    assert near.best_speedup == 1.46 and near.best_path == ("compile-default", "inference-mode", "channels-last")
    assert near.no_gain == (("cpp-fused", "regression"), ("compile-max-autotune", "no_gain"))
    assert near.flagged == (("cache the output across calls", "hack_suspected"),)
    # a revoked win is never a best: the written candidate is, in its author's words
    assert far.best_speedup == 2.2 and far.best_hypothesis == "one Triton kernel: implicit GEMM with the bias fused"
    assert far.flagged == (("compile-default", "final verification: incorrect"),)
    assert neighbours(_recs(), HW, CONV, exclude_campaign="near")[0].campaign == "far"
    assert neighbours(_recs(), "cuda/nvidia-hopper/33+", CONV) == []
    assert len(neighbours(_recs(), HW, CONV, limit=1)) == 1
    assert [Neighbour.from_json(n.to_json()) for n in found] == found


def test_rendered_in_the_skills_words_and_empty_without_neighbours():
    words = {"compile-default": "torch.compile the model", "channels-last": "NHWC memory format"}.get
    text = render(neighbours(_recs(), HW, CONV), words)
    assert "- near (similarity 1.00): best 1.46x by compile-default (torch.compile the model) then inference-mode " \
           "then channels-last (NHWC memory format)" in text
    assert "without a gain: cpp-fused: regression; compile-max-autotune: no_gain" in text
    assert "flagged by the Critic there (never do this): cache the output across calls: hack_suspected" in text
    assert "best 2.2x by a written candidate: one Triton kernel" in text
    assert render([], words) == ""
    nothing = replace(neighbours(_recs(), HW, CONV)[0], best_speedup=None, best_path=())
    assert "nothing beat its baseline" in render([nothing], words)
