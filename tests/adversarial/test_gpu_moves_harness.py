"""GPU moves pass the real guard and harness honestly (on the CPU: the harness's integrity checks
are the same on both devices). ``cudnn.benchmark`` set inside forward and put back is the
candidate's own setting, not a process-wide switch; the CUDA-graph trampoline runs its forward
eagerly on CPU tensors; the cuBLASLt epilogue with a ReLU is exact on either device."""

from __future__ import annotations

from pathlib import Path

import pytest

from arbor.agents.critic.guard import check_source
from arbor.agents.skills import load_skills
from arbor.agents.transforms import apply_move, to_modelnew
from arbor.sandbox.kernel.protocol import KernelRequest, measure_kernels
from arbor.sandbox.runners.local import LocalRunner

from tests.agents.gpu_problems import LINEAR_RELU

PROBLEMS = Path(__file__).resolve().parents[2] / "benchmarks" / "problems"
FAST = dict(warmup_s=0.02, time_budget_s=0.1, min_repeats=4, max_repeats=20, min_sample_s=1e-3, num_threads=1,
            timeout_s=120, seeds=[0, 1, 2], size_scale=0.25)
CASES = [((PROBLEMS / "l2_06_conv_relu_bias.py").read_text(), "cudnn-benchmark"),
         ((PROBLEMS / "l2_06_conv_relu_bias.py").read_text(), "cuda-graph-forward"),
         (LINEAR_RELU, "cublaslt-epilogue")]


@pytest.fixture(scope="module")
def measured() -> list:
    moves = {m.id: m for s in load_skills() for m in s.moves}
    reqs = []
    for problem, move in CASES:
        source = apply_move(to_modelnew(problem), moves[move].transform, moves[move].params)
        assert source is not None and check_source(source) == [], move
        reqs.append(KernelRequest(problem, source, **FAST))
    return measure_kernels(LocalRunner(), reqs)


@pytest.mark.parametrize("index", range(len(CASES)), ids=[m for _, m in CASES])
def test_the_move_is_measured_not_flagged(measured, index):
    m = measured[index]
    assert (m.status, m.error_class) == ("ok", None), m.error_text
    assert all(c["ok"] for c in m.correctness) and m.candidate_samples
