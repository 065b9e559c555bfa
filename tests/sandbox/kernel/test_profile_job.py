"""Bottleneck profiles: op kinds, shares, each op's own bytes and FLOPs (a parent never credited
with its children's), readings capped by physics, the plain-text form, and real profile jobs
through the local runner."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from arbor.agents.transforms import to_modelnew
from arbor.sandbox.harness import cost
from arbor.sandbox.harness import profile_harness as harness
from arbor.sandbox.kernel.protocol import KernelRequest
from arbor.sandbox.kernel.profile_job import category, format_profile, run_profile, summarize
from arbor.sandbox.runner import make_runner

MB = 1 << 20
RAW = {"call_ms": 2.0, "iters": 4, "ops": [
    {"name": "aten::addmm", "calls": 1, "self_us": 1500.0, "shapes": [[64], [32, 128], [128, 64]],
     "flops": 2 * 32 * 128 * 64, "bytes": 4 * (64 + 32 * 128 + 128 * 64 + 32 * 64), "footprint": 50_000},
    {"name": "aten::gelu", "calls": 1, "self_us": 400.0, "shapes": [[32, 64]], "flops": None,
     "bytes": 2 * 4 * 32 * 64, "footprint": 2 * 4 * 32 * 64},
    {"name": "aten::sum", "calls": 1, "self_us": 100.0, "shapes": [[32, 64]], "flops": None, "bytes": None},
]}


def test_ops_fall_into_kinds():
    assert category("aten::addmm") == "gemm"
    assert category("aten::mkldnn_convolution") == "conv"
    assert category("aten::native_layer_norm") == "norm"
    assert category("aten::_softmax") == "reduction"
    assert category("aten::copy_") == "layout"
    assert category("aten::gelu") == "elementwise"
    assert category("Torch-Compiled Region: 0/0") == "compiled"


def test_summary_has_shares_positions_and_a_dominant_op():
    p = summarize(RAW, "float32", {"flops_per_s": 1e10, "bytes_per_s": 1e10})
    assert p["dominant"] == "aten::addmm" and p["dominant_bound"] in ("compute", "memory")
    assert abs(sum(p["categories"].values()) - 1.0) < 1e-9
    assert p["categories"]["gemm"] == 0.75
    gemm = p["ops"][0]
    assert 0 < gemm["flops_frac_peak"] < 1 and gemm["bytes"] == RAW["ops"][0]["bytes"]
    assert p["anomalies"] == []
    text = format_profile(p)
    assert "gemm 75%" in text and "aten::addmm" in text and "of peak FLOP/s" in text


def test_a_gpu_profile_says_how_launch_bound_a_call_is():
    """The GPU's own rows (kernels, copies) give launches per call and the GPU's busy share."""
    gpu = {**RAW, "call_ms": 0.1, "launches": 4.0, "device_us": 20.0}
    p = summarize(gpu, "float32", None)
    assert p["launches"] == 4.0 and p["kernel_us"] == 5.0 and abs(p["gpu_busy"] - 0.2) < 1e-9
    assert "4 kernels per call, 5.0 us each" in format_profile(p)
    assert "launches" not in summarize(RAW, "float32", None)  # a CPU profile has no launch facts


def test_a_failed_profile_is_data():
    assert format_profile({"error": "profile failed: boom"}) == "profile: profile failed: boom"


# --- bytes of one op, and who gets them ---------------------------------------------------
def test_bytes_of_known_ops():
    x = [256, 4096]  # 4 MiB of float32
    # relu's worker: reads x, writes (allocates) a tensor like it; the Scalar argument counts nothing
    assert cost.op_bytes("aten::clamp_min", [x, []], ["float", "Scalar"], 4 * MB) == 8 * MB
    assert cost.op_bytes("aten::copy_", [[256, 4096], [256, 4096], []], ["c10::BFloat16", "float", "Scalar"], 0) \
        == 2 * MB + 4 * MB  # a bf16 destination and a float source
    assert cost.op_bytes("aten::transpose", [x, [], []], ["float", "Scalar", "Scalar"], 0) == 0  # a view
    assert cost.op_bytes("aten::index", [x, []], ["float", ""], 10 * 4096 * 4) == 10 * 4096 * 4  # rows it picked
    assert cost.op_bytes("aten::relu_", [x], ["float"], 0) == 4 * MB  # in place: a lower bound
    assert cost.op_bytes("aten::mul", [x, x], None, 4 * MB, default_size=2) == 2 * 2 * MB + 4 * MB


def test_a_parent_is_not_credited_with_its_childrens_bytes():
    # linear -> (t -> transpose -> as_strided), addmm -> (expand, copy_, resolve_conj); relu -> clamp_min
    own = [(32.25e3, 0), (0, 0), (0, 0), (0, 0), (32.25e3, 262144), (0, 0), (16e3, 0), (0, 0),
           (8 * MB, 0), (8 * MB, 0)]
    kids = [[1, 4], [2], [3], [], [5, 6, 7], [], [], [], [9], []]
    mine = cost.attribute(own, kids)
    assert mine[0] == (0.0, 0.0)  # linear only dispatches
    assert mine[4] == (16.25e3, 262144)  # addmm keeps its GEMM (and what its bias copy did not move)
    assert mine[6] == (16e3, 0)
    assert mine[8] == (0.0, 0.0) and mine[9] == (8 * MB, 0)  # relu: nothing; clamp_min: all of it
    assert sum(b for b, _ in mine) == own[0][0] + own[8][0]  # every byte counted once


def _event(name, shapes, dtypes, alloc, self_us, children=(), flops=0):
    ev = SimpleNamespace(name=name, input_shapes=shapes, input_dtypes=dtypes, cpu_memory_usage=alloc,
                         device_memory_usage=0, flops=flops, self_cpu_time_total=self_us,
                         cpu_children=list(children), device_type="DeviceType.CPU", is_async=False)
    return ev


def test_profile_events_aggregate_per_op_with_self_bytes(monkeypatch):
    monkeypatch.setattr(harness, "cost", cost)
    x = [512, 4096]  # 8 MiB
    evs = []
    for _ in range(2):  # two profiled iterations of the model
        clamp = _event("aten::clamp_min", [x, []], ["float", "Scalar"], 8 * MB, 1000.0)
        relu = _event("aten::relu", [x], ["float"], 8 * MB, 5.0, [clamp])
        evs += [relu, clamp, _event("[memory]", [], None, -8 * MB, 0.0)]
    ops = {o["name"]: o for o in harness.aggregate(evs, cuda=False, iters=2)}
    assert set(ops) == {"aten::relu", "aten::clamp_min"}
    assert ops["aten::relu"]["bytes"] is None  # its self time moved nothing
    assert ops["aten::clamp_min"]["bytes"] == 16 * MB and ops["aten::clamp_min"]["calls"] == 1
    assert ops["aten::clamp_min"]["self_us"] == 1000.0 and ops["aten::clamp_min"]["footprint"] == 16 * MB


def test_an_ops_transcendentals_go_to_the_op_that_evaluates_them(monkeypatch):
    monkeypatch.setattr(harness, "cost", cost)
    x = [512, 4096]
    inner = _event("aten::_softmax", [x, [], []], ["float", "Scalar", "Scalar"], 8 * MB, 3000.0)
    outer = _event("aten::softmax", [x, [], []], ["float", "Scalar", "Scalar"], 0, 5.0, [inner])
    ops = {o["name"]: o for o in harness.aggregate([outer, inner], cuda=False, iters=1)}
    assert ops["aten::_softmax"]["transcendentals"] == {"exp": 512 * 4096}
    assert ops["aten::_softmax"]["flops"] == 4 * 512 * 4096 and ops["aten::softmax"]["transcendentals"] is None


def test_an_op_with_transcendentals_reads_its_fraction_of_its_arithmetics_bound():
    n = 1 << 20  # erf at 0.35 G/s is slower than the generated erf's 46 FLOPs at 50 GFLOP/s (op_math)
    raw = {"call_ms": 4.0, "iters": 1, "ops": [{"name": "aten::gelu", "calls": 1, "self_us": 4000.0, "shapes": [],
                                                "bytes": 8 * n, "footprint": 8 * n, "flops": 4 * n,
                                                "transcendentals": {"erf": n}}]}
    p = summarize(raw, "float32", {**PEAK, "vector": {"erf": 0.35e9}})
    assert p["ops"][0]["compute_frac"] == pytest.approx((n * 46 / 50e9 + 4 * n / 50e9) / 4e-3)
    assert "of its arithmetic's bound (erf)" in format_profile(p)


# --- readings capped by physics -------------------------------------------------------------
PEAK = {"threads": 1, "bytes_per_s": 10e9, "flops": {"float32": 50e9, "bfloat16": 100e9}, "flops_per_s": 100e9,
        "bandwidth": [[32 << 10, 100e9], [2 * MB, 40e9], [16 * MB, 30e9], [64 * MB, 12e9], [256 * MB, 10e9]]}


def _raw(nbytes, self_us, footprint, flops=None, name="aten::clamp_min"):
    return {"call_ms": 1.0, "iters": 1, "ops": [{"name": name, "calls": 1, "self_us": self_us, "shapes": [],
                                                  "bytes": nbytes, "footprint": footprint, "flops": flops}]}


def test_an_op_is_read_against_the_bandwidth_of_its_working_set():
    big = summarize(_raw(128 * MB, 14_000.0, 128 * MB), "float32", PEAK)["ops"][0]  # 9.6 GB/s, beyond the LLC
    assert big["peak_bytes_per_s"] == 12e9 and big["bytes_frac_peak"] == pytest.approx(128 * MB / 14e-3 / 12e9)
    small = summarize(_raw(4 * MB, 130.0, 4 * MB), "float32", PEAK)["ops"][0]  # 32 GB/s from a cache
    assert small["peak_bytes_per_s"] == 40e9 and 0.7 < small["bytes_frac_peak"] < 1.0


def test_a_reading_above_the_peak_is_reported_as_a_bug_not_a_number():
    noisy = summarize(_raw(128 * MB, 10_500.0, 128 * MB), "float32", PEAK)  # 106%: the peak's noise
    assert noisy["ops"][0]["bytes_frac_peak"] == 1.0 and noisy["anomalies"] == []
    p = summarize(_raw(128 * MB, 1_000.0, 128 * MB), "float32", PEAK)  # 1118%: impossible
    assert p["ops"][0].get("bytes_frac_peak") is None
    assert len(p["anomalies"]) == 1 and "a bug" in p["anomalies"][0] and "aten::clamp_min" in p["anomalies"][0]
    text = format_profile(p)
    assert "BUG:" in text and "1118% of peak bandwidth" not in text.split("BUG:")[0]
    gemm = summarize(_raw(None, 1000.0, None, flops=60e6), "float32", PEAK)  # 60 GFLOP/s vs 50 (float32)
    assert gemm["ops"][0]["flops_frac_peak"] == 1.0
    ops_too_short = summarize(_raw(128 * MB, 1.0, 128 * MB), "float32", PEAK)  # 1 us: not rated
    assert "bytes_frac_peak" not in ops_too_short["ops"][0] and not ops_too_short["anomalies"]


def test_a_compiled_call_that_did_not_read_its_arguments_is_not_rated_and_is_no_bug():
    """A compiled graph's bytes are its arguments, which it need not read: around a generated C++
    extension, the graph hands its 128 MB of inputs on in microseconds (seen at "1124% of peak
    bandwidth", a BUG line, in a quickstart best's profile). Its rate is an upper bound: shown as
    "at most" when below the peak, not rated (a note, no bug) above it."""
    graph = "## Call CompiledFxGraph fp2xp ##"
    p = summarize(_raw(128 * MB, 1_000.0, 128 * MB, name=graph), "float32", PEAK)  # 1118% on its arguments
    row = p["ops"][0]
    assert row["category"] == "compiled" and p["anomalies"] == []
    assert row.get("bytes_frac_peak") is None and row.get("bytes_frac_peak_at_most") is None
    assert len(p["notes"]) == 1 and "need not read its inputs" in p["notes"][0] and "BUG" not in format_profile(p)
    slow = summarize(_raw(128 * MB, 20_000.0, 128 * MB, name=graph), "float32", PEAK)  # 6.7 GB/s of 12
    assert slow["ops"][0]["bytes_frac_peak_at_most"] == pytest.approx(128 * MB / 20e-3 / 12e9)
    assert "at most 56% of peak bandwidth" in format_profile(slow) and slow["ops"][0].get("bytes_frac_peak") is None


def test_an_op_the_anchoring_scaled_below_its_real_time_is_read_on_its_profiled_time_not_called_a_bug():
    """A CI VM's 1-thread pow read 125% of the peak on its share of the measured call: the profiler
    slowed the other ops (fresh outputs' page faults), the anchoring scaled every op down by the
    same factor, and the cheap op the profiler did not slow came out faster than it ran. Only a
    reading impossible on the op's own profiled time too is a bug."""
    def raw(pow_us):
        return {"call_ms": 1.0, "iters": 1, "ops": [
            {"name": "aten::mul", "calls": 1, "self_us": 900.0, "shapes": [], "bytes": 1 * MB, "footprint": 1 * MB},
            {"name": "aten::pow", "calls": 1, "self_us": pow_us, "shapes": [], "bytes": 128 * MB,
             "footprint": 128 * MB}]}
    # the profile ran twice as long as the measured call: pow, 80% of its level (12 GB/s) on its own
    # profiled time, is scaled to half of it and would read 160%
    p = summarize(raw(128 * MB / 12e9 * 1e6 / 0.8), "float32", PEAK, call_s=(900 + 128 * MB / 12e9 * 1e6 / 0.8) / 2e6)
    pow_row = p["ops"][1] if p["ops"][1]["op"] == "aten::pow" else p["ops"][0]
    assert pow_row["bytes_frac_peak"] == pytest.approx(0.8) and p["anomalies"] == []
    assert len(p["notes"]) == 1 and "160% of peak bandwidth on its share" in p["notes"][0] and "80% on its own" in p["notes"][0]
    assert "note: aten::pow read 160%" in format_profile(p) and "BUG" not in format_profile(p)
    # the same op impossible on its own profiled time too (250% of 12 GB/s): a bug, as without anchoring
    fast = 128 * MB / 30e9 * 1e6
    bug = summarize(raw(fast), "float32", PEAK, call_s=(900 + fast) / 2e6)
    assert bug["anomalies"] and "aten::pow" in bug["anomalies"][0] and not bug["notes"]
    assert summarize(raw(fast), "float32", PEAK)["anomalies"]  # not anchored: read on the profiled time alone


# --- real jobs -------------------------------------------------------------------------------
def test_stream_and_fma_rates_are_measured_per_working_set():
    peak = cost.measure_cpu_peak(1)
    fps = [f for f, _ in peak["bandwidth"]]
    assert fps == sorted(fps) and fps[-1] >= 2 * peak["llc_bytes"] and fps[0] <= 64 << 10
    assert all(r > 0.1e9 for _, r in peak["bandwidth"]) and peak["bytes_per_s"] == peak["bandwidth"][-1][1]
    assert peak["threads"] == 1 and peak["flops"]["float32"] > 1e8 and peak["source"] == "measured"
    assert 0.2e9 < peak["bytes_per_s"] < 2e12  # a DRAM stream rate, not a cache's nor a typo's


def test_profile_job_runs_in_the_sandbox():
    src = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(64, 64)

    def forward(self, x):
        return torch.relu(self.linear(x))

def get_inputs():
    return [torch.randn(32, 64)]

def get_init_inputs():
    return []
'''
    runner = make_runner("local")
    try:
        p = run_profile(runner, KernelRequest(problem_source=src, candidate_source=to_modelnew(src), num_threads=1))
    finally:
        runner.close()
    assert "error" not in p, p
    assert any(o["op"] == "aten::addmm" for o in p["ops"]) and "gemm" in p["categories"]


def test_a_real_relu_profile_credits_clamp_min_and_stays_below_the_peak():
    src = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)

def get_inputs():
    return [torch.randn(1024, 4096)]

def get_init_inputs():
    return []
'''
    before = cost.measure_cpu_peak(1)
    runner = make_runner("local")
    try:
        p = run_profile(runner, KernelRequest(problem_source=src, candidate_source=to_modelnew(src), num_threads=1),
                        before)
    finally:
        runner.close()
    assert "error" not in p, p
    ops = {o["op"]: o for o in p["ops"]}
    x = 1024 * 4096 * 4
    assert ops["aten::clamp_min"]["bytes"] == 2 * x  # read once, written once
    assert not ops.get("aten::relu", {}).get("bytes")  # the parent keeps nothing
    assert p["anomalies"] == [], p["anomalies"]  # load only ever lowers a reading
    assert 0 < ops["aten::clamp_min"]["bytes_frac_peak"] <= 1.0
