"""Where a campaign stands against its speed of light: readings capped by physics, what more would
take, the ``budget.sol_margin`` stop, and the run summary and ``arbor show`` saying so."""

from __future__ import annotations

from datetime import datetime

import pytest

from arbor.campaign.speed_of_light import from_measurement
from arbor.campaign.stopping import stop_reason
from arbor.search_tree.index import TreeIndex
from arbor.search_tree.records import NodeRecord
from arbor.spec import Budget
from tests.arbor.helpers import arbor, arbor_json

MB = 1 << 20
CURVE = [[32 << 10, 100e9], [2 * MB, 40e9], [16 * MB, 30e9], [64 * MB, 12e9], [256 * MB, 10e9]]
ONE = {"threads": 1, "bandwidth": CURVE, "bytes_per_s": 10e9, "flops": {"float32": 50e9, "bfloat16": 200e9},
       "flops_per_s": 200e9, "source": "measured"}
ALL = {**ONE, "threads": 2, "bandwidth": [[f, 1.6 * r] for f, r in CURVE], "bytes_per_s": 16e9,
       "flops": {"float32": 100e9, "bfloat16": 400e9}}
FP = {"device": "cpu", "cpu_affinity": 2}


def relu_position(reference_s: float):
    """ReLU on 64 MiB: 128 MiB in and out at one thread's 12 GB/s (the 64 MiB point) = 11.2 ms."""
    stats = {"cost": {"bytes": 128 * MB, "flops": 0, "dtype": "float32"}, "peak": ALL, "sol_peak": ONE}
    return from_measurement(stats, FP, reference_s)


def test_a_memory_bound_reference_reads_its_fraction_and_what_more_would_take():
    pos = relu_position(12.4e-3)
    assert pos.bound == "memory" and pos.seconds == pytest.approx(128 * MB / 12e9)
    shown, note = pos.reading(12.4e-3)
    assert shown == pytest.approx(pos.seconds / 12.4e-3) and 0.85 < shown < 0.95 and note is None
    advice = pos.advice()
    assert "2 cores stream 19.2 GB/s, 1.60x" in advice and "bfloat16" in advice and "fewer bytes" in advice
    line = pos.line(12.4e-3, 12.4e-3)
    assert line.startswith("reference 90% of memory-bound: 134 MB at 12 GB/s") and "at most 1.11x" in line
    assert pos.line(12.4e-3, 11e-3).startswith("reference 90% · best 100%")


def test_readings_are_capped_by_physics():
    pos = relu_position(12e-3)
    assert pos.reading(10.5e-3) == (1.0, None)  # 107%: the peak's measurement noise
    shown, note = pos.reading(3e-3)  # 373%: faster than its bytes can move
    assert shown is None and note.startswith("BUG") and "please report it" in note
    assert pos.line(12e-3, 3e-3).startswith("BUG")  # never printed as a number
    gemm = from_measurement({"cost": {"bytes": 1 * MB, "flops": 2e9, "dtype": "float32"}, "sol_peak": ONE, "peak": ALL},
                            FP, 50e-3)
    assert gemm.bound == "compute" and gemm.seconds == pytest.approx(40e-3)
    shown, note = gemm.reading(1e-3)  # a collapse: far beyond the reference's FLOP bound, not its bytes
    assert shown is not None and "fewer FLOPs" in note
    fast_ref = from_measurement({"cost": {"bytes": 1 * MB, "flops": 2e9, "dtype": "float32"}, "sol_peak": ONE,
                                 "peak": ALL}, FP, 20e-3)
    shown, note = fast_ref.reading(20e-3)  # the reference itself at twice the measured GEMM rate: a low peak
    assert shown == 1.0 and "outran the measured FLOP peak" in note and "fewer FLOPs" not in note
    assert "reference 100% (the measured FLOP peak is low)" in fast_ref.line(20e-3, 20e-3)
    shown, note = fast_ref.reading(5e-3)  # a candidate 4x faster than that reference still reads as less math
    assert shown is not None and "fewer FLOPs" in note
    assert "bfloat16: 4.0x the FLOP rate" in gemm.advice()
    assert from_measurement({"cost": {}}, FP, 1.0) is None  # replayed and serving targets have no cost


def _index(root_state: str = "accepted") -> TreeIndex:
    idx = TreeIndex(1)
    now = datetime(2026, 1, 1)
    idx.apply(NodeRecord(1, 1, None, 0, root_state, "0" * 64, "baseline", None, None, "h", 1.0, None, 0.0, 1.0,
                         "baseline", None, 0, now, now))
    return idx


def test_the_sol_margin_stop_says_where_the_reference_stands_and_what_to_do():
    budget = Budget(max_evaluations=12, sol_margin=0.15)
    near = relu_position(12.4e-3)  # 90%
    reason = stop_reason(budget, _index(), 1, 1.0, 0.0, near)
    assert reason.startswith("speed of light: the reference runs at 90% of its speed of light")
    assert "budget.sol_margin=0.15" in reason and "at most 1.11x" in reason and "more needs more threads" in reason
    assert "lower sol_margin" in reason
    assert stop_reason(budget, _index(), 1, 1.0, 0.0, relu_position(30e-3)) is None  # 37%: headroom left
    assert stop_reason(Budget(max_evaluations=12), _index(), 1, 1.0, 0.0, near) is None  # off by default
    assert stop_reason(budget, _index(), 1, 1.0, 0.0, relu_position(3e-3)) is None  # a bug never stops a run
    gemm = from_measurement({"cost": {"bytes": 1 * MB, "flops": 2e9, "dtype": "float32"}, "sol_peak": ONE, "peak": ALL},
                            FP, 41e-3)  # 98% of its FLOP bound: algebra may still collapse it
    assert gemm.bound == "compute" and stop_reason(budget, _index(), 1, 1.0, 0.0, gemm) is None


@pytest.mark.slow
def test_a_campaign_near_its_speed_of_light_stops_and_says_so(campaign_dir):
    """A real kernel campaign: the baseline's measurement brings the cost and this machine's peaks
    at one thread; a generous margin stops it after the baseline, and summary and show say how far
    the reference is from its speed of light. A LayerNorm: memory-bound (a gated GELU, its tanh and
    sigmoid counted at the measured vector rates, is compute-bound, and only a memory-bound position
    stops a campaign)."""
    spec = campaign_dir / "sol.yaml"
    spec.write_text("""name: sol
target:
  problem: problems/chunked_layernorm.py
  sizes: {batch_size: 1024, dim: 1024}
  num_threads: 1
budget:
  max_evaluations: 4
  max_wall_s: 300
  sol_margin: 0.995
measurement: {seeds: [0, 1, 2], warmup_s: 0.05, time_budget_s: 0.4, min_repeats: 10, min_sample_s: 0.001}
critic: {max_cv: 3.0, final_measurements: 1}
sandbox: {timeout_s: 120}
skills: {exclude: [torch-compile, inductor-cpu, compile-epilogue]}
""")
    summary = arbor_json("run", str(spec))
    assert summary["stop_reason"].startswith("speed of light: the reference runs at"), summary["stop_reason"]
    assert summary["speed_of_light"].startswith("reference ") and "more needs" in summary["speed_of_light"]
    root = arbor_json("show", "1", str(spec))
    sol = root["speed_of_light"]
    assert 0 < sol["fraction"] <= 1.0 and sol["bound"] == "memory" and sol["note"] is None
    shown = arbor("show", "1", str(spec))
    assert shown.returncode == 0 and "speed of light: " in shown.stdout and "BUG" not in shown.stdout
    assert "profile:" in shown.stdout and "read against" in shown.stdout
    run = arbor("run", str(spec))  # resumed: already stopped; the summary repeats the position
    assert "speed of light reference" in run.stdout
