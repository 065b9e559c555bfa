"""GPU moves are offered only where they can help: on a CUDA campaign, under their ``when:``
condition over the traced reference and the profile, and ranked by the profile's room to win."""

from __future__ import annotations

import ast
from datetime import datetime
from pathlib import Path

import pytest

from arbor.agents.critic.guard import check_source
from arbor.agents.skills import MoveSpec, SkillError, load_skills
from arbor.agents.specialists.kernel_facts import LAUNCH_US, profile_facts, reference_facts
from arbor.agents.specialists.kernel_heuristic import UNKNOWN_FACTOR, HeuristicKernelSpecialist
from arbor.agents.transforms import apply_move, to_modelnew
from arbor.search_tree.records import NodeRecord
from arbor.spec import parse_spec
from arbor.targets.kernel import KernelAdapter

from .gpu_problems import LINEAR_RELU

REPO = Path(__file__).resolve().parents[2]
PROBLEMS = REPO / "benchmarks" / "problems"
GPU_MOVES = {"cuda-graph-forward", "compile-reduce-overhead", "compile-max-autotune-cudagraphs",
             "compile-epilogue-autotune", "cublaslt-epilogue", "cudnn-benchmark", "channels-last-cuda"}

TINY_GEMM = LINEAR_RELU.replace("in_features = 256", "in_features = 8")

LAUNCH_BOUND = {"call_ms": 0.06, "launches": 8.0, "kernel_us": 2.5, "device_ms": 0.02, "gpu_busy": 0.33,
                "categories": {"gemm": 0.5, "elementwise": 0.5},
                "ops": [{"op": "aten::addmm", "category": "gemm", "share": 0.5, "flops_frac_peak": 0.05},
                        {"op": "aten::relu", "category": "elementwise", "share": 0.5, "bytes_frac_peak": 0.05}]}


def gemm_bound(frac: float) -> dict:
    """A busy GPU (no launch overhead) spending 90% of the call in a GEMM at ``frac`` of peak."""
    return {"call_ms": 5.0, "launches": 3.0, "kernel_us": 1600.0, "device_ms": 4.9, "gpu_busy": 0.98,
            "categories": {"gemm": 0.9, "elementwise": 0.1},
            "ops": [{"op": "aten::addmm", "category": "gemm", "share": 0.9, "flops_frac_peak": frac},
                    {"op": "aten::relu", "category": "elementwise", "share": 0.1, "bytes_frac_peak": 0.8}]}


def adapter(tmp_path: Path, problem: str | Path, device: str = "cuda", **target) -> KernelAdapter:
    if isinstance(problem, str):
        path = tmp_path / "problem.py"
        path.write_text(problem)
    else:
        path = problem
    spec = parse_spec({"name": "x", "target": {"problem": str(path), "device": device, **target}},
                      str(tmp_path / "c.yaml"), tmp_path)
    return KernelAdapter(spec)


def root(sha: str = "root") -> NodeRecord:
    return NodeRecord(id=1, campaign_id=1, parent_id=None, depth=0, state="accepted", artifact_sha=sha,
                      specialist="x", move_id=None, family=None, hypothesis="", prior=1.0, predicted_gain=None,
                      value=0.0, speedup=1.0, diagnosis="baseline", reason="", step=0,
                      created_at=datetime.now(), finished_at=datetime.now())


def offered(a: KernelAdapter, profile: dict | None = None) -> dict[str, float]:
    """Move id -> prior of every move offered below the baseline."""
    spec = a.heuristic_specialist(load_skills(), seed=0)
    if profile is not None:
        spec.set_profile(profile)
    return {o.move.id: o.prior for o in spec.options(root(), a.root_source(), set(), lambda sha: False, None)}


def test_a_cpu_campaign_offers_no_gpu_move(tmp_path):
    for problem in ("l2_06_conv_relu_bias.py", "l2_10_gemm_swish_scale_add.py", "l1_01_relu.py"):
        a = adapter(tmp_path, PROBLEMS / problem, device="cpu")
        assert not GPU_MOVES & {m.id for m in a.moves(load_skills())}
        assert not GPU_MOVES & set(offered(a, LAUNCH_BOUND))
    assert GPU_MOVES <= {m.id for m in adapter(tmp_path, PROBLEMS / "l1_01_relu.py").moves(load_skills())}


def test_conv_moves_need_a_convolution(tmp_path):
    conv = offered(adapter(tmp_path, PROBLEMS / "l2_06_conv_relu_bias.py"))
    assert {"cudnn-benchmark", "channels-last-cuda", "compile-max-autotune-cudagraphs"} <= set(conv)
    gemm = offered(adapter(tmp_path, PROBLEMS / "l2_10_gemm_swish_scale_add.py"))
    assert not {"cudnn-benchmark", "channels-last-cuda"} & set(gemm)
    assert "compile-max-autotune-cudagraphs" in gemm and "compile-epilogue-autotune" in gemm
    folds = offered(adapter(tmp_path, PROBLEMS / "l2_02_gemm_scale_residual.py"))
    assert "graph-fold-affine" in folds  # epilogues folded into the GEMM: on GPUs as on CPUs
    elementwise = offered(adapter(tmp_path, PROBLEMS / "l1_02_gelu_tanh_literal.py"))
    assert not {"cudnn-benchmark", "channels-last-cuda", "compile-max-autotune-cudagraphs",
                "compile-epilogue-autotune", "cublaslt-epilogue"} & set(elementwise)


def test_gemm_moves_need_a_gemm_big_enough_and_a_tail(tmp_path):
    moves = offered(adapter(tmp_path, LINEAR_RELU))
    assert {"cublaslt-epilogue", "compile-max-autotune-cudagraphs"} <= set(moves)
    assert "compile-epilogue-autotune" not in moves  # one tail op: nothing to compile beside the GEMM
    assert "compile-max-autotune-cudagraphs" not in offered(adapter(tmp_path, TINY_GEMM))  # K = 8 < 16
    # the campaign's sizes are what counts: the same file scaled down below a tile
    assert "compile-max-autotune-cudagraphs" not in offered(adapter(tmp_path, LINEAR_RELU, sizes={"in_features": 8}))


def test_cuda_graph_moves_follow_the_launch_profile(tmp_path):
    a = adapter(tmp_path, LINEAR_RELU)
    bound = offered(a, LAUNCH_BOUND)
    assert bound["cuda-graph-forward"] == pytest.approx(0.85) and "compile-reduce-overhead" in bound
    busy = offered(a, gemm_bound(0.4))
    assert "cuda-graph-forward" not in busy and "compile-reduce-overhead" not in busy
    unknown = offered(a)  # no profile yet: offered, at half the prior
    assert unknown["cuda-graph-forward"] == pytest.approx(0.85 * UNKNOWN_FACTOR)


def test_launch_facts_from_a_profile():
    assert profile_facts(LAUNCH_BOUND)["launch_bound"] is True
    assert profile_facts({**LAUNCH_BOUND, "kernel_us": LAUNCH_US * 4, "gpu_busy": 0.9})["launch_bound"] is False
    assert profile_facts({**LAUNCH_BOUND, "kernel_us": LAUNCH_US * 4, "gpu_busy": 0.2})["launch_bound"] is True
    assert "launch_bound" not in profile_facts({"call_ms": 1.0, "categories": {"gemm": 1.0}})  # a CPU profile
    assert profile_facts({"error": "x"}) == {} and profile_facts(None) == {}


def test_gpu_moves_rank_by_the_profiles_room_to_win(tmp_path):
    a = adapter(tmp_path, LINEAR_RELU)
    bound = offered(a, LAUNCH_BOUND)
    # launch-bound: the GPU idles two thirds of the call; only launch-removing moves can win that back
    assert bound["cuda-graph-forward"] > bound["cublaslt-epilogue"]
    folds = offered(adapter(tmp_path, PROBLEMS / "l2_10_gemm_swish_scale_add.py"), LAUNCH_BOUND)
    assert folds["cuda-graph-forward"] > folds["graph-algebra-all"]  # the CPU-style rewrite ranked first before
    assert max(folds, key=folds.get) == "cuda-graph-forward"
    low, high = offered(a, gemm_bound(0.2)), offered(a, gemm_bound(0.95))
    # a GEMM far from peak leaves the template search room; one at 95% of peak hardly any
    assert low["compile-max-autotune-cudagraphs"] == pytest.approx(0.75)
    assert high["compile-max-autotune-cudagraphs"] < low["compile-max-autotune-cudagraphs"] / 2


def test_reference_facts_read_the_traced_reference():
    conv = reference_facts(to_modelnew((PROBLEMS / "l2_06_conv_relu_bias.py").read_text()))
    assert conv["kinds"] == ("conv", "elementwise") and conv["conv2d"] == 1 and conv["conv_channels"] == 16
    assert conv["epilogue_ops"] == 2
    gemm = reference_facts(to_modelnew(LINEAR_RELU))
    assert gemm["gemm_min_dim"] == 64 and gemm["ops"] == 2
    assert reference_facts(to_modelnew(LINEAR_RELU), scale=0.125)["gemm_min_dim"] == 8
    assert reference_facts("not python") == {}


def test_a_condition_naming_an_unknown_fact_fails_at_start():
    bad = MoveSpec(id="m", transform="cuda_graph", prior=0.5, when="lanch_bound")
    with pytest.raises(SkillError, match="lanch_bound"):
        HeuristicKernelSpecialist([bad])


def test_cudnn_benchmark_declines_a_module_without_a_convolution():
    """Even where the reference cannot be traced (its condition unknown), the transform itself
    finds no convolution to tune and the move is not offered."""
    params = {"switch": "cudnn_benchmark"}
    assert apply_move(to_modelnew(LINEAR_RELU), "scoped_switch", params) is None
    conv = apply_move(to_modelnew((PROBLEMS / "l2_06_conv_relu_bias.py").read_text()), "scoped_switch", params)
    assert "torch.backends.cudnn.benchmark = True" in conv and "finally:" in conv
    assert apply_move(conv, "scoped_switch", params) is None  # already scoped


@pytest.mark.parametrize("problem, move", [
    (PROBLEMS / "l2_06_conv_relu_bias.py", "cudnn-benchmark"),
    (PROBLEMS / "l2_06_conv_relu_bias.py", "channels-last-cuda"),
    (PROBLEMS / "l2_10_gemm_swish_scale_add.py", "compile-max-autotune-cudagraphs"),
    (PROBLEMS / "l2_10_gemm_swish_scale_add.py", "compile-epilogue-autotune"),
    (PROBLEMS / "l2_10_gemm_swish_scale_add.py", "compile-reduce-overhead"),
    (PROBLEMS / "l2_10_gemm_swish_scale_add.py", "cuda-graph-forward"),
    (LINEAR_RELU, "cublaslt-epilogue"),
])
def test_each_gpu_move_writes_a_modelnew_that_parses_and_passes_the_guard(tmp_path, problem, move):
    source = to_modelnew(problem.read_text() if isinstance(problem, Path) else problem)
    spec = next(m for s in load_skills() for m in s.moves if m.id == move)
    out = apply_move(source, spec.transform, spec.params)
    assert out is not None
    tree = ast.parse(out)
    assert any(isinstance(n, ast.ClassDef) and n.name == "ModelNew" for n in tree.body)
    for precision in ("fp32", "bf16"):
        assert check_source(out, precision=precision) == [], (move, precision)
