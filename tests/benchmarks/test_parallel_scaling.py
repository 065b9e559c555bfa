"""The parallel-scaling benchmark's logic: the virtual clock and executor, the dependency-chain
lower bound, the wide synthetic landscapes and the goals (seconds, no sleeping)."""

from __future__ import annotations

import math
import time

import pytest

from arbor.targets.landscape import FORMAT, Landscape
from benchmarks.parallel_scaling import goals, lower_bound, run_one, summarize
from benchmarks.synthetic import make_landscape, make_wide
from benchmarks.virtual_time import VirtualClock, VirtualExecutor


def _run(speedup: float, s: float) -> dict:
    return {"b": [1e-3] * 6, "c": [1e-3 / speedup] * 6, "s": s}


def _chain_landscape(tmp_path=None) -> Landscape:
    """A 3x3 grid: A and B each have one good value; the optimum needs both (two moves deep).
    Points with A=a2 measure 10 s, all others 2 s."""
    pts = []
    for a, ga in (("a0", 1.0), ("a1", 0.9), ("a2", 1.5)):
        for b, gb in (("b0", 1.0), ("b1", 1.4), ("b2", 0.8)):
            pts.append({"knobs": {"A": a, "B": b}, "runs": [_run(ga * gb, 10.0 if a == "a2" else 2.0)] * 3})
    return Landscape.model_validate({
        "format": FORMAT, "name": "chain",
        "knobs": [{"name": "A", "values": ["a0", "a1", "a2"], "default": "a0"},
                  {"name": "B", "values": ["b0", "b1", "b2"], "default": "b0"}],
        "points": pts, "campaign": {"critic": {"max_cv": 0.5}}})


def test_lower_bound_is_the_shortest_chain_of_rounds_plus_the_confirmation():
    lb = lower_bound(_chain_landscape(), moves="any")
    # optimum a2/b1 (2.1x); 95% of it needs both moves. Best order: B first (2 s round, beside the
    # 2 s baseline), then A (10 s), then A's confirmation (10 s) = 22 s; A first would be 10+10+10.
    assert lb["rounds"] == 2 and lb["seconds"] == pytest.approx(22.0)
    assert lb["path"][0] == {"A": "a0", "B": "b0"} and lb["path"][-1] == {"A": "a2", "B": "b1"}


def test_lower_bound_is_zero_when_the_default_is_there():
    ls = _chain_landscape()
    ls.points[0].runs[0].c = [1e-3 / 3.0] * 6  # the default point is the optimum
    ls.points[0].runs[1].c = ls.points[0].runs[2].c = [1e-3 / 3.0] * 6
    assert lower_bound(ls, moves="any")["seconds"] == 0.0


def test_virtual_executor_hands_back_measurements_in_order_of_their_end_without_sleeping():
    clock = VirtualClock()
    ex = VirtualExecutor(2, clock)
    t0 = time.monotonic()
    ex.submit("long", lambda runner: {"duration_s": 30.0})
    ex.submit("short", lambda runner: {"duration_s": 5.0})
    assert ex.free_slots() == 0
    first = ex.collect()
    assert [d.key for d in first] == ["short"] and clock.now() == pytest.approx(5.0, abs=0.5)
    ex.submit("next", lambda runner: {"duration_s": 10.0})  # starts at ~5 s, ends at ~15 s
    assert [d.key for d in ex.collect()] == ["next"] and clock.now() == pytest.approx(15.0, abs=0.5)
    assert [d.key for d in ex.collect()] == ["long"] and clock.now() == pytest.approx(30.0, abs=0.5)
    assert ex.collect() == [] and time.monotonic() - t0 < 2.0  # 30 simulated seconds, no sleeping
    assert ex.busy_s == pytest.approx(45.0)


def test_virtual_clock_runs_at_real_speed_between_jumps():
    clock = VirtualClock()
    clock.advance(100.0)
    time.sleep(0.05)
    assert 100.04 < clock.now() < 101.0
    clock.jump_to(50.0)  # never backwards
    assert clock.now() > 100.0


def test_wide_landscape_needs_every_knob_and_is_resampled_from_real_runs():
    ls = make_wide("w", 3, 4, seed=3, recorded=[make_landscape(seed=1)], runs=2, rounds=8)
    assert ls.size() == 64 and len(ls.moves) == 12
    best = max(ls.points, key=lambda p: p.speedup)
    # every knob off its default at the optimum, and dropping any one knob's value falls below 95%
    assert all(v != "v0" for v in best.knobs.values())
    for k in best.knobs:
        cfg = {**best.knobs, k: "v0"}
        assert ls.true_speedup(cfg) < 0.95 * ls.optimum()
    assert lower_bound(ls)["rounds"] == 3
    assert {r.s for p in ls.points for r in p.runs} <= {1.0}  # durations come from the recording


def test_summary_and_goals_compare_with_serial_and_the_bound():
    rows = [{"landscape": "L", "workers": w, "variant": "after", "seed": s, "time_to_95_s": t,
             "evals_to_95": 5, "measurements": 20, "evals_per_hour": 100.0, "utilization": 0.8, "load": 1.0}
            for w, ts in ((1, (100.0, 120.0, 110.0)), (8, (20.0, 25.0, math.inf))) for s, t in enumerate(ts)]
    summ = summarize(rows, [1, 8], ["after"], {"L": {"seconds": 15.0}})
    eight = next(s for s in summ if s["workers"] == 8)
    assert eight["time_to_95_s"] == 25.0 and eight["censored"] == 1
    assert eight["x_serial"] == pytest.approx(25 / 110) and eight["x_bound"] == pytest.approx(25 / 15)
    g = goals(summ, 8, "after")
    # bound 15 s <= 0.2 x serial 110 s: a wide landscape; 0.23x serial is met, 1.67x the bound is not
    assert g["landscapes"]["L"]["wide"] and g["met_serial"] and not g["met_bound"]


@pytest.mark.slow
def test_a_replayed_campaign_reaches_the_optimum_on_the_virtual_clock(tmp_path):
    path = tmp_path / "chain.json"
    _chain_landscape().dump(path)
    t0 = time.monotonic()
    serial = run_one(path, 1, 0, 9)
    fleet = run_one(path, 4, 0, 9)
    assert serial["time_to_95_s"] < math.inf and fleet["time_to_95_s"] < math.inf
    assert fleet["time_to_95_s"] >= 22.0 - 1.0  # the lower bound, up to a bet's luck within a round
    assert time.monotonic() - t0 < 60  # minutes of measurements, simulated
