"""A kernel problem's signature without a profile: traced in a child process, GEMM-dominated
problems look alike, and a problem that cannot be traced falls back to its source text."""

from __future__ import annotations

from pathlib import Path

from arbor.agents.knowledge.signature import similarity
from arbor.targets.signature import from_source, problem_signature

PROBLEMS = Path(__file__).resolve().parents[3] / "benchmarks" / "problems"


def test_traced_signatures_weight_op_kinds_by_flops():
    a = problem_signature(PROBLEMS / "l2_02_gemm_scale_residual.py", {}, 0.25, None)
    b = problem_signature(PROBLEMS / "l2_10_gemm_swish_scale_add.py", {}, 0.25, None)
    assert a["source"] == b["source"] == "trace", (a, b)
    assert max(a["ops"], key=a["ops"].get) == "gemm" and a["ops"]["gemm"] > 0.9
    assert similarity(a, b) > 0.8
    relu = from_source(PROBLEMS / "l1_01_relu.py", None)
    assert relu["source"] == "source-text" and similarity(a, relu) < 0.5


def test_a_problem_that_cannot_be_traced_falls_back_to_its_source(tmp_path):
    p = tmp_path / "p.py"
    p.write_text("import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n"
                 "        if x.sum() > 0:\n            return torch.softmax(x, 0)\n        return x\n"
                 "def get_inputs():\n    return [torch.randn(8)]\ndef get_init_inputs():\n    return []\n")
    sig = problem_signature(p, {}, None, None)
    assert sig["source"] == "source-text" and "reduction" in sig["ops"]
    assert "error" in problem_signature(tmp_path / "missing.py", {}, None, None)
