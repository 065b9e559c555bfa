"""Timing inputs both sides share (sandbox/harness/placement.py, issue 41): every side visits every
buffer, no sample finds the previous sample's inputs, and a candidate that changes them is caught."""

from __future__ import annotations

import pytest
import torch

from arbor.sandbox.harness import placement
from arbor.sandbox.kernel.protocol import KernelRequest, build_job

from .kernel.test_protocol import PROBLEM, _candidate, measure


def _pools(mode: str, first: int = 3) -> placement.Pools:
    return placement.Pools(lambda s, k: [torch.full((4, 8), float(100 * s + k))], first, mode)


@pytest.mark.parametrize("inner", [(1, 1), (2, 3), (4, 4)])
def test_a_shared_pool_sends_both_sides_over_every_buffer_and_never_repeats_the_last_samples(inner):
    pools = _pools("shared")
    for side in (0, 1):
        pools.grow(side, inner[side] + 1)
    pools.fit(sum(inner))
    size = len(pools.sets[0])
    assert pools.sets[0] is pools.sets[1] and size >= sum(inner) + 2
    used: list[set] = [set(), set()]
    last: set = set()
    for rnd in range(4 * size):
        for side in ((0, 1) if rnd % 2 == 0 else (1, 0)):  # ABBA, as the harness runs them
            start = pools.start(side, rnd, inner[side])
            sets = {(start + i) % size for i in range(inner[side])}
            assert len(sets) == inner[side] and not sets & last  # no set twice in a row
            used[side] |= sets
            last = sets
    assert used[0] == used[1] == set(range(size))


def test_own_pools_keep_the_old_layout():
    pools = _pools("own")
    pools.grow(0, 4)
    pools.fit(5)
    assert pools.sets[0] is not pools.sets[1] and [len(p) for p in pools.sets] == [4, 3]
    assert pools.start(1, 7, 3) == 21
    assert pools.facts() == {"placement": "own", "pool_sets": [4, 3]}


def test_an_input_changed_by_the_candidate_is_caught_wherever_it_changed():
    pools = _pools("shared")
    caught: list[str] = []
    pools.check(1, 0, 2, caught.append)
    assert not caught
    x = pools.sets[0][1][0]
    x.view(-1)[:] = x.view(-1) + 1.0  # every element: each sampled position sees it
    pools.check(0, 0, 3, caught.append)  # the reference's samples are not the candidate's doing
    assert not caught
    pools.check(1, 0, 3, caught.append)
    assert caught and "modified input 0 in place inside the timing loop" in caught[0]


def test_nan_inputs_are_not_a_change():
    pools = placement.Pools(lambda s, k: [torch.full((64,), float("nan"))], 3, "shared")
    caught: list[str] = []
    pools.check(1, 0, 3, caught.append)
    assert not caught


def test_an_unknown_placement_is_one_clear_line():
    with pytest.raises(ValueError, match="unknown placement 'mine'"):
        build_job(KernelRequest(PROBLEM, PROBLEM, placement="mine"), nonce="n")


def test_a_candidate_that_changes_its_inputs_only_once_timing_runs_is_caught():
    """Right in every checked call, it starts writing into its inputs after 200 calls: with a pool
    per side that only touched its own inputs; shared, it would reach the reference's."""
    body = ("self.n = getattr(self, 'n', 0) + 1\n"
            "        y = 0.5 * x * (1.0 + torch.tanh(0.7978845608028654 * (x + 0.044715 * x.pow(3))))\n"
            "        if self.n > 200:\n            x.mul_(1.5)\n        return y")
    m = measure(_candidate(body), time_budget_s=0.5)
    assert m.error_class == "hack_suspected", (m.status, m.error_text)
    assert "inside the timing loop" in m.error_text


def test_a_real_aa_measurement_reports_its_placement():
    m = measure(PROBLEM, mode="aa")
    assert m.status == "ok", m.error_text
    assert m.stats["placement"] == "shared"
    n = len(m.stats["pool_sets"]) and m.stats["pool_sets"][0]
    assert m.stats["pool_sets"] == [n, n]
