"""Bad reference problems through the real harness: refused with a message that says what is
wrong with the reference, and a hang or crash named by the phase it happened in."""

from __future__ import annotations

from pathlib import Path

from arbor.sandbox.kernel.protocol import KernelRequest, measure_kernel
from arbor.sandbox.runners.local import LocalRunner

DATA = Path(__file__).parent / "data"
PROBLEM = (DATA / "gelu_problem.py").read_text()
GOOD = (DATA / "gelu_candidate.py").read_text()
FAST = dict(time_budget_s=0.2, warmup_s=0.02, min_repeats=3, max_repeats=3, num_threads=1, timeout_s=60)
REF = "        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x.pow(3))))"


def measure(problem: str, candidate: str = GOOD, **kw):
    return measure_kernel(LocalRunner(), KernelRequest(problem, candidate, **{**FAST, **kw}))


def test_reference_returning_none_is_refused():
    m = measure(PROBLEM.replace(REF, "        return None"))
    assert m.error_class == "harness_error"
    assert "reference Model's forward returned None" in m.error_text


def test_non_deterministic_reference_is_diagnosed():
    m = measure(PROBLEM.replace(REF, "        return x + torch.rand_like(x)"))
    assert m.error_class == "harness_error" and "non-deterministic" in m.error_text


def test_hang_in_reference_forward_is_named():
    m = measure(PROBLEM.replace(REF, "        while True:\n            pass"), timeout_s=8)
    assert m.error_class == "timeout" and "phase 'reference forward'" in m.error_text


def test_crash_in_reference_forward_blames_the_reference():
    m = measure(PROBLEM.replace(REF, "        import os; os._exit(3)"))
    assert m.error_class == "harness_error" and "reference Model" in m.error_text
    assert "'reference forward'" in m.error_text


def test_hang_in_candidate_forward_is_named():
    hang = GOOD.replace("def forward(self, x):", "def forward(self, x):\n        while True:\n            pass")
    m = measure(PROBLEM, hang, timeout_s=8)
    assert m.error_class == "timeout" and "phase 'candidate forward'" in m.error_text


def test_derived_size_global_follows_the_override():
    problem = PROBLEM.replace("dim = 256\n", "dim = 256\nbias_shape = (dim,)\n").replace(
        "torch.randn(batch_size, dim)", "torch.randn(batch_size, dim) + torch.zeros(bias_shape)")
    m = measure(problem, sizes={"dim": 64, "batch_size": 4})
    assert m.status == "ok", m.error_text
    assert m.input_shapes == [[4, 64]]
