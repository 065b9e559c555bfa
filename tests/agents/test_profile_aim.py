"""Aiming at the bottleneck: moves that cannot touch the dominant op kinds rank low."""

from __future__ import annotations

import pytest

from arbor.agents.profile_aim import HEADROOM_FULL, OFF_TARGET, aim_factor, headroom, reachable_share
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


def test_on_a_gpu_a_move_ranks_by_the_room_its_ops_leave():
    """Busy GPU, GEMM at 95% of peak: a GEMM move has 5% to win and ranks low; a CUDA graph, with
    no launch overhead to remove, too. Idle GPU (launch-bound): the graph keeps its prior."""
    near_peak = {"gpu_busy": 1.0, "categories": {"gemm": 0.9, "elementwise": 0.1},
                 "ops": [{"category": "gemm", "share": 0.9, "flops_frac_peak": 0.95},
                         {"category": "elementwise", "share": 0.1, "bytes_frac_peak": 0.1}]}
    autotune = move("wrap_compile", mode="max-autotune", dynamic=False)
    graph = move("cuda_graph")
    assert headroom(graph, near_peak) == 0.0 and aim_factor(graph, near_peak) == OFF_TARGET
    assert headroom(autotune, near_peak) == pytest.approx(0.9 * 0.05 + 0.1 * 0.9)
    assert aim_factor(autotune, near_peak) == pytest.approx(max(OFF_TARGET, (0.045 + 0.09) / HEADROOM_FULL))
    idle = {**near_peak, "gpu_busy": 0.2}
    assert aim_factor(graph, idle) == 1.0
    assert aim_factor(move("wrap_compile", dynamic=False), near_peak) == 1.0  # default compile: any op
    assert headroom(graph, {"categories": {"gemm": 1.0}}) is None  # a CPU profile: the share rule only
