"""Operator-choice graph moves: addmm/baddbmm for a matmul plus an add, hand-written norms as the
native op, channels_last before 2-D convs. Each applies only where the traced graph shows the
pattern, emits plain code with no size baked in, and computes the reference's values."""

from __future__ import annotations

from pathlib import Path

import pytest

from arbor.agents.transforms import apply_move, to_modelnew
from tests.agents.test_graph_moves import _same_values

PROBLEMS = Path(__file__).resolve().parents[2] / "benchmarks" / "problems"


def _problem(forward: str, init: str = "", inputs: str = "torch.randn(batch, n)", args: str = "") -> str:
    return f'''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self{", " + args if args else ""}):
        super().__init__()
{init or "        pass"}

    def forward(self, x):
{forward}

batch = 24
n = 32

def get_inputs():
    return [{inputs}]

def get_init_inputs():
    return [{args and "n"}]
'''


def _move(source: str, *passes: str) -> str | None:
    return apply_move(to_modelnew(source), "graph_rewrite", {"passes": list(passes)})


def _forward(out: str) -> str:
    return out[out.index("def forward"):out.index("batch =")]


ADDMM = _problem("        return x @ self.weight + self.bias",
                 "        self.weight = nn.Parameter(torch.randn(n, 2 * n))\n"
                 "        self.bias = nn.Parameter(torch.randn(2 * n))", args="n")
BADDBMM = _problem("        return torch.bmm(x, self.w) + self.c",
                   "        self.w = nn.Parameter(torch.randn(4, n, n))\n        self.c = nn.Parameter(torch.randn(4, 1, n))",
                   inputs="torch.randn(4, batch, n)", args="n")


def test_matmul_plus_bias_becomes_addmm_and_bmm_plus_add_baddbmm():
    out = _move(ADDMM, "addmm")
    assert out is not None and "torch.addmm(" in _forward(out) and "+" not in _forward(out)
    _same_values(ADDMM, out)
    out = _move(BADDBMM, "addmm")
    assert out is not None and "torch.baddbmm(" in _forward(out)
    _same_values(BADDBMM, out)


@pytest.mark.parametrize("forward", [
    "        y = x @ self.weight\n        return y + y.sum()",  # the product is read twice
    "        y = x @ self.weight\n        return y + self.bias.reshape(1, 1, -1)",  # broadcasts the product up
    "        y = x @ self.weight\n        return y + 1.0",  # a scalar: no tensor to accumulate into
])
def test_addmm_is_refused_where_it_would_change_the_shape_or_the_meaning(forward):
    src = _problem(forward, "        self.weight = nn.Parameter(torch.randn(n, n))\n"
                            "        self.bias = nn.Parameter(torch.randn(n))", args="n")
    out = _move(src, "addmm")
    assert out is None or "addmm" not in out


LAYERNORM = _problem('''        mu = x.mean(dim=-1, keepdim=True)
        d = x - mu
        var = (d * d).mean(-1, keepdim=True)
        return d / torch.sqrt(var + 1e-6) * self.g + self.b''',
                     "        self.g = nn.Parameter(torch.randn(n))\n        self.b = nn.Parameter(torch.randn(n))", args="n")
RMSNORM = _problem('''        rms = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5)
        return self.g * (x * rms)''', "        self.g = nn.Parameter(torch.randn(n))", args="n")


def test_hand_written_layer_and_rms_norms_become_the_native_ops_with_their_eps():
    out = _move(LAYERNORM, "norms")
    assert out is not None and "layer_norm(x, getitem, g, b, 1e-06)" in _forward(out)
    assert "x.shape" in _forward(out) and "32" not in _forward(out)  # the normalised shape is read, not baked
    _same_values(LAYERNORM, out)
    out = _move(RMSNORM, "norms")
    assert out is not None and "rms_norm(x, getitem, g, 1e-05)" in _forward(out)
    _same_values(RMSNORM, out)


@pytest.mark.parametrize("change", [
    ("(d * d).mean(-1, keepdim=True)", "x.var(-1, keepdim=True)"),  # unbiased variance: not layer_norm
    ("var + 1e-6", "var + 1e-6 + 1e-3"),  # another eps
    ("mu = x.mean(dim=-1, keepdim=True)", "mu = x.mean(dim=-1, keepdim=True) * 0.5"),  # half centred
])
def test_a_near_miss_is_not_taken_for_a_norm(change):
    src = LAYERNORM.replace(*change)
    assert src != LAYERNORM
    out = _move(src, "norms")
    assert out is None or "norm(" not in _forward(out)


def test_rms_norm_over_the_channel_dim_of_the_dev_problem_drops_the_division():
    src = (PROBLEMS / "l1_07_rmsnorm_manual.py").read_text()
    out = _move(src, "norms")
    assert out is not None
    fwd = out[out.index("def forward"):out.index("batch_size =")]
    assert "torch.rsqrt(" in fwd and "sqrt(" not in fwd.replace("rsqrt(", "") and "/" not in fwd
    small = src.replace("dim1 = 128", "dim1 = 8").replace("dim2 = 128", "dim2 = 8")
    _same_values(small, out.replace("dim1 = 128", "dim1 = 8").replace("dim2 = 128", "dim2 = 8"))
    # a native LayerNorm module is already the native op
    assert _move((PROBLEMS / "l1_05_layernorm.py").read_text(), "norms") is None


@pytest.mark.parametrize("name", ["l2_06_conv_relu_bias", "l2_07_conv_scale_mean_channels",
                                  "l2_09_conv_groupnorm_scale_clamp", "l2_12_conv_avgpool_hardswish"])
def test_conv_inputs_go_channels_last_once(name):
    src = (PROBLEMS / f"{name}.py").read_text()
    out = _move(src, "channels_last")
    assert out is not None
    fwd = out[out.index("def forward"):out.index("batch_size =")]
    assert fwd.count("contiguous(memory_format=torch.channels_last)") == 1
    assert apply_move(out, "graph_rewrite", {"passes": ["channels_last"]}) is None  # already NHWC
    shrink = {"height = 64": "height = 12", "width = 64": "width = 12", "batch_size = 16": "batch_size = 2"}
    for a, b in shrink.items():
        src, out = src.replace(a, b), out.replace(a, b)
    _same_values(src, out)


@pytest.mark.parametrize("name", ["l2_02_gemm_scale_residual", "l2_05_gemm_divide_sum_scale",
                                  "l1_11_batched_matmul", "l1_05_layernorm"])
def test_operator_moves_refuse_graphs_without_their_pattern(name):
    src = (PROBLEMS / f"{name}.py").read_text()
    for passes in (["addmm"], ["channels_last"], ["norms"]):
        assert _move(src, *passes) is None, passes


@pytest.mark.parametrize("name,passes,sizes", [
    ("l1_07_rmsnorm_manual", ["norms"], {"batch_size": 4, "dim1": 16, "dim2": 16}),
    ("l2_06_conv_relu_bias", ["channels_last"], {"batch_size": 2, "height": 16, "width": 16}),
])
def test_the_rewrites_pass_the_harness_correctness_check(name, passes, sizes):
    """End to end: the real harness (seeds, determinism re-run, default fp32 tolerance) accepts
    the rewritten dev problem as correct and times it."""
    from arbor.sandbox.kernel.protocol import KernelRequest, measure_kernel
    from arbor.sandbox.runners.local import LocalRunner

    src = (PROBLEMS / f"{name}.py").read_text()
    out = _move(src, *passes)
    assert out is not None
    m = measure_kernel(LocalRunner(), KernelRequest(src, out, sizes=sizes, time_budget_s=0.2, warmup_s=0.02,
                                                    min_repeats=3, num_threads=1, timeout_s=120))
    assert m.status == "ok", m.error_text
    assert m.correctness and all(c["ok"] for c in m.correctness)
    assert len(m.candidate_samples) >= 3
