"""Bottleneck profiles: op kinds, shares, position against peaks, the plain-text form, and a real
profile job through the local runner."""

from __future__ import annotations

from arbor.agents.transforms import to_modelnew
from arbor.sandbox.kernel_protocol import KernelRequest
from arbor.sandbox.profiling import category, format_profile, run_profile, summarize
from arbor.sandbox.runner import make_runner

RAW = {"call_ms": 2.0, "iters": 4, "ops": [
    {"name": "aten::addmm", "calls": 1, "self_us": 1500.0, "shapes": [[64], [32, 128], [128, 64]], "flops": 2 * 32 * 128 * 64},
    {"name": "aten::gelu", "calls": 1, "self_us": 400.0, "shapes": [[32, 64]], "flops": None},
    {"name": "aten::sum", "calls": 1, "self_us": 100.0, "shapes": [[32, 64]], "flops": None},
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
    assert 0 < gemm["flops_frac_peak"] < 1 and gemm["bytes_in"] == 4 * (64 + 32 * 128 + 128 * 64)
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
