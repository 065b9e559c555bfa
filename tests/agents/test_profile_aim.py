"""Aiming at the bottleneck: moves that cannot touch the dominant op kinds rank low."""

from __future__ import annotations

from arbor.agents.profile_aim import OFF_TARGET, aim_factor, reachable_share
from arbor.agents.skills import MoveSpec

GEMM_BOUND = {"categories": {"gemm": 0.9, "elementwise": 0.1}}


def move(transform: str, **params) -> MoveSpec:
    return MoveSpec(id=f"m-{transform}", transform=transform, params=params, prior=0.5)


def test_an_activation_rewrite_ranks_low_when_a_gemm_dominates():
    act = move("graph_rewrite", passes=["activations"])
    assert reachable_share(act, GEMM_BOUND) == 0.1
    assert aim_factor(act, GEMM_BOUND) == OFF_TARGET


def test_moves_that_reach_the_dominant_kind_or_everything_keep_their_prior():
    assert aim_factor(move("graph_rewrite", passes=["linear_reduction"]), GEMM_BOUND) == 1.0
    assert aim_factor(move("wrap_compile", dynamic=False), GEMM_BOUND) == 1.0


def test_no_profile_or_a_failed_one_changes_nothing():
    act = move("graph_rewrite", passes=["activations"])
    assert aim_factor(act, None) == 1.0 and aim_factor(act, {"error": "x"}) == 1.0
