"""Every GPU move on a real GPU, through the real harness: it runs, it is correct, and nothing in
it reads as a reward hack (no cached or aliased outputs, no precision switch in fp32 mode). Skipped
without a CUDA device (``gpu`` marker); the CPU tests of the same moves are ``test_gpu_moves.py``
and ``test_cuda_graphs.py``."""

from __future__ import annotations

import types
from pathlib import Path

import pytest

from arbor.agents.skills import load_skills
from arbor.agents.transforms import apply_move, to_modelnew
from arbor.sandbox.kernel.protocol import KernelRequest, measure_kernels
from arbor.sandbox.runners.local import LocalRunner

from .gpu_problems import LINEAR_RELU

pytestmark = pytest.mark.gpu

PROBLEMS = Path(__file__).resolve().parents[2] / "benchmarks" / "problems"
FAST = dict(warmup_s=0.5, time_budget_s=0.5, min_repeats=10, max_repeats=200, min_sample_s=1e-3,
            timeout_s=600, seeds=[0, 1, 2], device="cuda")
CASES = [
    (PROBLEMS / "l2_10_gemm_swish_scale_add.py", "cuda-graph-forward"),
    (PROBLEMS / "l2_10_gemm_swish_scale_add.py", "compile-reduce-overhead"),
    (PROBLEMS / "l2_10_gemm_swish_scale_add.py", "compile-max-autotune-cudagraphs"),
    (PROBLEMS / "l2_10_gemm_swish_scale_add.py", "compile-epilogue-autotune"),
    (LINEAR_RELU, "cublaslt-epilogue"),
    (PROBLEMS / "l2_06_conv_relu_bias.py", "cudnn-benchmark"),
    (PROBLEMS / "l2_06_conv_relu_bias.py", "channels-last-cuda"),
    (PROBLEMS / "l2_06_conv_relu_bias.py", "cuda-graph-forward"),
]


def _source(problem) -> str:  # type: ignore[no-untyped-def]
    return problem.read_text() if isinstance(problem, Path) else problem


@pytest.fixture(scope="module")
def measured() -> dict:
    moves = {m.id: m for s in load_skills() for m in s.moves}
    reqs = []
    for problem, move in CASES:
        source = apply_move(to_modelnew(_source(problem)), moves[move].transform, moves[move].params)
        assert source is not None, move
        for dtype in ("float32", "bfloat16"):
            reqs.append(((problem, move, dtype), KernelRequest(_source(problem), source, dtype=dtype, **FAST)))
    results = measure_kernels(LocalRunner(), [r for _, r in reqs])
    return {key: m for (key, _), m in zip(reqs, results)}


@pytest.mark.parametrize("problem, move", CASES)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_each_gpu_move_runs_correctly_and_honestly_in_both_modes(measured, problem, move, dtype):
    m = measured[(problem, move, dtype)]
    assert m.status == "ok", (move, dtype, m.error_class, m.error_text)
    assert m.fingerprint.get("precision") == {"float32": "fp32", "bfloat16": "bf16"}[dtype]
    assert all(c["ok"] for c in m.correctness)


def test_the_graph_runtime_on_a_real_device():
    """Captured once per shape, replayed with fresh inputs, outputs never in the graph's pool."""
    import torch

    source = apply_move(to_modelnew(LINEAR_RELU), "cuda_graph", {})
    mod = types.ModuleType("candidate")
    exec(compile(source, "<candidate>", "exec"), mod.__dict__)  # noqa: S102 - our own transform's output
    ns: dict = {}
    exec(LINEAR_RELU, ns)  # noqa: S102
    torch.manual_seed(0)
    model = mod.ModelNew(256, 512).cuda()
    torch.manual_seed(0)
    ref = ns["Model"](256, 512).cuda()
    with torch.no_grad():
        outs = []
        for seed in range(3):
            x = torch.randn(64, 256, device="cuda", generator=torch.Generator("cuda").manual_seed(seed))
            out = model(x)
            torch.testing.assert_close(out, ref(x), rtol=1e-4, atol=1e-4)
            outs.append((out, out.clone()))
        (_graph, _static_in, static_out), = model._graphed_forward.graphs.values()
        for out, kept in outs:
            assert out.data_ptr() != static_out.data_ptr() and torch.equal(out, kept)
        model(torch.randn(32, 256, device="cuda"))
        assert len(model._graphed_forward.graphs) == 2
