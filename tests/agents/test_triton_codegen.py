"""Generated Triton kernels (agents/transforms/triton): which traced graphs get a kernel and which
do not (with the reason), what the emitted module looks like, and where the move is offered.

Correctness of every kernel under Triton's interpreter is in test_triton_interpret.py."""

from __future__ import annotations

import ast

import pytest

from arbor.agents.skills import MoveSpec, kernel_moves, load_skills
from arbor.agents.specialists.applicability import cannot_run, drop_noops
from arbor.agents.transforms import apply_move, to_modelnew, validate_params
from arbor.agents.transforms.graph.trace import trace
from arbor.agents.transforms.triton import explain, generate
from arbor.agents.transforms.triton.region import match

MOVE = {"block": 1024, "num_warps": 4}


def problem(forward: str, init: str = "", inputs: str = "torch.randn(batch_size, dim)", init_args: str = "",
            sizes: str = "batch_size = 32\ndim = 64") -> str:
    """A KernelBench-format problem; ``init_args`` names module globals passed to the model."""
    return f'''
import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    def __init__(self{", " + init_args if init_args else ""}):
        super().__init__()
{init or "        pass"}

    def forward(self, x):
{forward}

{sizes}

def get_inputs():
    return [{inputs}]

def get_init_inputs():
    return [{init_args}]
'''


def modelnew(source: str) -> str:
    return to_modelnew(source)


def matched(source: str):  # type: ignore[no-untyped-def]
    return match(trace(modelnew(source)).gm)


SOFTMAX = problem("        return torch.softmax(x, dim=1)")
LAYERNORM = problem("        return self.ln(x)", init="        self.ln = nn.LayerNorm(dim)", init_args="dim")
RMS_CHANNELS = problem("        return x / torch.sqrt(torch.mean(x ** 2, dim=1, keepdim=True) + 1e-5)",
                       inputs="torch.randn(batch_size, dim, 16, 16)")
GEMM_LSE_RELU = problem("        x = self.linear(x)\n        return torch.relu(torch.logsumexp(x, dim=1, keepdim=True))",
                        init="        self.linear = nn.Linear(dim, dim)", init_args="dim")
CONV_BIAS = problem("        return torch.relu(self.conv(x)) + self.bias",
                    init="        self.conv = nn.Conv2d(3, dim, 3)\n        self.bias = nn.Parameter(torch.randn(dim, 1, 1))",
                    init_args="dim", inputs="torch.randn(batch_size, 3, 20, 20)")
SUM_DROP = problem("        return torch.sum(x * 2.0, dim=-1)")


@pytest.mark.parametrize("source, mode, levels, out_level", [
    (SOFTMAX, "row", ["full"], "full"),
    (LAYERNORM, "row", ["full", "full", "full"], "full"),  # x, ln.weight, ln.bias (per column)
    (RMS_CHANNELS, "column", ["full"], "full"),
    (GEMM_LSE_RELU, "row", ["full"], "row"),
    (CONV_BIAS, "flat", ["full", "full"], "full"),
    (SUM_DROP, "row", ["full"], "row"),
])
def test_supported_regions_are_matched_with_their_layout(source, mode, levels, out_level):
    m = matched(source)
    assert m.mode == mode
    assert [o.level for o in m.plan.operands] == levels
    assert m.output.level == out_level


def test_the_region_keeps_the_gemm_in_torch_and_reads_its_result():
    m = matched(GEMM_LSE_RELU)
    assert [n.op for n in m.nodes] == ["call_function"] * 2 or all(n.op != "call_module" for n in m.nodes)
    assert m.externals[0].op == "call_module"  # the Linear's output is the kernel's input
    out = generate(modelnew(GEMM_LSE_RELU), 1024, 4)
    fwd = next(f for c in ast.parse(out).body if isinstance(c, ast.ClassDef) for f in c.body
               if isinstance(f, ast.FunctionDef) and f.name == "forward")
    assert "self.linear(x)" in ast.unparse(fwd) and "_arbor_fused(linear)" in ast.unparse(fwd)


def test_a_per_channel_bias_is_indexed_through_its_run_of_dims():
    m = matched(CONV_BIAS)
    bias = m.plan.operands[1]
    assert (bias.lo, bias.hi) == (1, 2)  # (C, 1, 1) against (N, C, H, W): varies along C only
    src = generate(modelnew(CONV_BIAS), 1024, 4)
    assert "in1_div = in0.shape[2:].numel()" in src and "in1_span = in0.shape[1:2].numel()" in src


@pytest.mark.parametrize("forward, inputs, reason", [
    ("        return x @ x.T", "torch.randn(batch_size, dim)", "no kernel computes"),
    ("        return torch.sum(x)", "torch.randn(batch_size, dim)", "every dim"),
    ("        return x.sum(1, keepdim=True) + x.sum(0, keepdim=True)", "torch.randn(batch_size, dim)",
     "different tensors or dims"),
    ("        return x.t() * 2.0", "torch.randn(batch_size, dim)", "non-contiguous"),
    ("        return F.relu(x * 2.0, inplace=True)", "torch.randn(batch_size, dim)", "in-place"),
    ("        return torch.softmax(x, dim=1, dtype=torch.float64)", "torch.randn(batch_size, dim)", ""),
    ("        return x - x.mean(0)", "torch.randn(dim, dim)", "without keepdim"),
    ("        return torch.max(x, dim=1)[1].float()", "torch.randn(batch_size, dim)", ""),
    ("        return x.clone().detach()", "torch.randn(batch_size, dim)", "computes nothing"),
    ("        return torch.sum(x, dim=(0, 2), keepdim=True) * 2.0", "torch.randn(batch_size, dim, 8)",
     "not contiguous"),
    ("        return x * 2.0, x", "torch.randn(batch_size, dim)", "more than one tensor"),
    ("        return x * self.n", "torch.randn(batch_size, dim)", "sizes"),
])
def test_regions_the_kernels_do_not_model_are_refused_with_the_reason(forward, inputs, reason):
    init_args, init = ("dim", "        self.n = dim") if "self.n" in forward else ("", "")
    source = modelnew(problem(forward, init=init, init_args=init_args, inputs=inputs))
    why = explain(source)
    assert why is not None and reason in why, why
    assert apply_move(source, "triton_codegen", MOVE) is None


def test_norms_written_by_the_native_norms_move_are_matched_through_their_shape_slice():
    manual = problem("        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.w",
                     init="        self.w = nn.Parameter(torch.ones(dim))", init_args="dim")
    native = apply_move(modelnew(manual), "graph_rewrite", {"passes": ["norms"]})
    assert native is not None and "rms_norm(x, getitem" in native  # normalized_shape = x.shape[1:]
    m = match(trace(native).gm)
    assert (m.mode, m.plan.reduce_lo, m.plan.reduce_hi) == ("row", 1, 2)
    sliced = modelnew(problem("        return F.layer_norm(x, x.shape[0:])", inputs="torch.randn(batch_size, dim)"))
    assert "every dim" in explain(sliced)  # x.shape[0:]: all dims, refused like any full reduction


def test_a_mean_without_keepdim_used_on_its_own_is_fine():
    """keepdim=False is refused only where it would broadcast against the full tensor."""
    source = modelnew(problem("        return torch.relu(x.mean(dim=1))"))
    assert explain(source) is None


def test_a_candidate_that_already_has_triton_or_cannot_be_traced_gets_nothing():
    out = apply_move(modelnew(SOFTMAX), "triton_codegen", MOVE)
    assert out is not None and apply_move(out, "triton_codegen", MOVE) is None  # triton: not traced
    branchy = modelnew(problem("        if x.sum() > 0:\n            return x * 2.0\n        return x"))
    assert apply_move(branchy, "triton_codegen", MOVE) is None


def test_emitted_module_defines_modelnew_one_kernel_and_always_launches_it():
    out = apply_move(modelnew(LAYERNORM), "triton_codegen", MOVE)
    tree = ast.parse(out)
    kernels = [f for f in tree.body if isinstance(f, ast.FunctionDef)
               and any(ast.unparse(d) == "triton.jit" for d in f.decorator_list)]
    assert [k.name for k in kernels] == ["_arbor_fused_kernel"]
    cls = next(c for c in tree.body if isinstance(c, ast.ClassDef))
    assert cls.name == "ModelNew" and "Model" not in {b.id for b in cls.bases if isinstance(b, ast.Name)}
    fwd = next(f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "forward")
    # no branch and no reference op in forward or the launcher: the kernel is the only path
    launcher = next(f for f in tree.body if isinstance(f, ast.FunctionDef) and f.name == "_arbor_fused")
    for fn in (fwd, launcher):
        assert not any(isinstance(n, (ast.If, ast.IfExp, ast.Try)) for n in ast.walk(fn))
    assert "layer_norm" not in ast.unparse(launcher) and "self.ln(" not in ast.unparse(fwd)
    assert "self.ln.weight" in ast.unparse(fwd) and "self.ln.bias" in ast.unparse(fwd)
    # __init__ is the reference's: the same parameters, drawn in the same order
    init = next(f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "__init__")
    assert "nn.LayerNorm(dim)" in ast.unparse(init)


def test_reductions_accumulate_in_fp32_with_masked_tails():
    out = generate(modelnew(SOFTMAX), 1024, 4)
    kernel = out[out.index("@triton.jit"):out.index("def _arbor_fused(")]
    assert "tl.full([BLOCK], float('-inf'), tl.float32)" in kernel  # running max, masked lanes -inf
    assert "mask=mask, other=0.0).to(tl.float32)" in kernel
    assert "to(out_ptr.dtype.element_ty), mask=mask)" in kernel  # stored in the output dtype
    assert "if SINGLE:" in kernel and "for start in range(0, R, BLOCK):" in kernel
    assert "SINGLE=R <= BLOCK" in out and "num_warps=4" in out and "min(1024," in out


def test_the_block_and_warps_are_the_moves_params():
    a = apply_move(modelnew(SOFTMAX), "triton_codegen", {"block": 4096, "num_warps": 8})
    assert "min(4096," in a and "num_warps=8" in a
    with pytest.raises(ValueError, match="power of two"):
        validate_params("triton_codegen", {"block": 1000, "num_warps": 4})
    with pytest.raises(ValueError, match="num_warps"):
        validate_params("triton_codegen", {"block": 1024, "num_warps": 3})
    with pytest.raises(ValueError, match="unknown params"):
        validate_params("triton_codegen", {"block": 1024, "num_warps": 4, "stages": 2})


def test_the_generated_code_does_not_depend_on_the_sizes():
    """The launcher reads every size from the tensors: the source is the same at any size."""
    small = SOFTMAX.replace("batch_size = 32\ndim = 64", "batch_size = 16\ndim = 32")
    a, b = generate(modelnew(SOFTMAX), 1024, 4), generate(modelnew(small), 1024, 4)
    strip = lambda s: s[:s.index("class ModelNew")]  # noqa: E731 - the module's own size globals differ
    assert strip(a) == strip(b)


# ----------------------------------------------------------------------------- where it is offered

def _triton_moves() -> list[MoveSpec]:
    return [m for m in kernel_moves(load_skills(), "cuda") if m.transform == "triton_codegen"]


def test_the_skill_declares_a_family_of_block_and_warp_variants():
    moves = _triton_moves()
    assert len(moves) >= 3 and len({m.family for m in moves}) == 1
    assert len({(m.params["block"], m.params["num_warps"]) for m in moves}) == len(moves)


def test_on_cpu_the_moves_need_tritons_interpreter_and_on_cuda_nothing(monkeypatch):
    move = _triton_moves()[0]
    assert not cannot_run(move, "cuda", env={}) and not cannot_run(move, "cuda:1", env={})
    assert cannot_run(move, "cpu", env={}) and not cannot_run(move, "cpu", env={"TRITON_INTERPRET": "1"})
    other = MoveSpec(id="x", transform="graph_rewrite", params={"passes": ["size1"]}, prior=0.5)
    assert not cannot_run(other, "cpu", env={})
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    cpu = [m.id for m in drop_noops(kernel_moves(load_skills(), "cpu"), 1, "cpu")]
    assert move.id not in cpu
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert move.id in [m.id for m in drop_noops(kernel_moves(load_skills(), "cpu"), 1, "cpu")]
    assert move.id in [m.id for m in drop_noops(kernel_moves(load_skills(), "cuda"), 1, "cuda")]


@pytest.mark.parametrize("dim, offered", [
    (512, {1024, 4096, 16384}),  # a row fits every block
    (8192, {16384}),  # only the block that holds a row: the shorter ones read it three times
    (16384, {16384}),
    (65536, {1024, 4096, 16384}),  # no block holds it: every move walks it in column blocks
])
def test_a_block_shorter_than_a_row_that_another_block_holds_is_not_offered(dim, offered):
    """On an H100 the suite's softmax (rows of 8192) ran 0.78x eager with the first move tried,
    blocks of 1024: three passes over each row where a block of 16384 holds it in registers."""
    source = modelnew(problem("        return torch.softmax(x, dim=1)", sizes=f"batch_size = 8\ndim = {dim}"))
    got = {b for b in (1024, 4096, 16384)
           if apply_move(source, "triton_codegen", {"block": b, "num_warps": 8}) is not None}
    assert got == offered
    if 1024 not in offered:
        assert "holds a row in registers" in explain(source, 1024)
    assert explain(source) is None  # the graph itself is one the kernels model
    assert "@triton.jit" in generate(source, 1024, 4)  # the generator still writes the looped kernel for any block
