"""A Triton candidate measured end to end on CPU through Triton's interpreter, so the Triton
plumbing — import inside the sandbox (Landlock), cache directories in the job's workdir, the
guard and the correctness checks — runs in CI without a GPU.

``TRITON_INTERPRET=1`` reaches the job only because it is in Arbor's own environment (a test
setting passed through the runner's allow-list); a candidate that sets it itself is caught.
"""

from __future__ import annotations

import pytest

from arbor.sandbox.runners.jobio import scrubbed_env
from arbor.sandbox.kernel.protocol import KernelRequest, measure_kernel
from arbor.sandbox.runners.local import LocalRunner

triton = pytest.importorskip("triton")  # in the `test` extra: this test must run in CI

PROBLEM = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, y):
        return x + y


N = 4096


def get_inputs():
    return [torch.randn(N), torch.randn(N)]


def get_init_inputs():
    return []
"""

KERNEL = """
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


{decorator}
class ModelNew(nn.Module):
    def forward(self, x, y):
        out = torch.empty_like(x)
        n = x.numel()
        {launch}
        return out
"""

FAST = dict(time_budget_s=0.3, warmup_s=0.05, min_repeats=5, num_threads=1, timeout_s=120, seeds=[0, 1])


def _candidate(launch: str = "add_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)",
               decorator: str = "", header: str = "") -> str:
    return header + KERNEL.format(launch=launch, decorator=decorator)


def test_triton_interpret_is_a_parent_setting_not_a_job_setting(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert scrubbed_env("/w", {})["TRITON_INTERPRET"] == "1"  # from Arbor's environment
    assert scrubbed_env("/w", {})["TRITON_CACHE_DIR"] == "/w/.triton/cache"  # writable under Landlock
    monkeypatch.delenv("TRITON_INTERPRET")
    assert "TRITON_INTERPRET" not in scrubbed_env("/w", {"TRITON_INTERPRET": "1"})  # never from a job


def test_triton_candidate_is_measured_on_cpu_through_the_interpreter(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    m = measure_kernel(LocalRunner(), KernelRequest(PROBLEM, _candidate(), **FAST))
    assert m.status == "ok", (m.error_class, m.error_text)
    assert all(c["ok"] for c in m.correctness) and len(m.candidate_samples) >= 5
    wrong = _candidate().replace("tl.load(y_ptr + offs, mask=mask), mask=mask)",
                                 "2 * tl.load(y_ptr + offs, mask=mask), mask=mask)")
    m = measure_kernel(LocalRunner(), KernelRequest(PROBLEM, wrong, **FAST))
    assert (m.status, m.error_class) == ("error", "incorrect")


def test_a_candidate_cannot_switch_on_the_interpreter_itself(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    sneaky = _candidate(header="import os\nos.environ['TRITON_INTERPRET'] = '1'\n")
    m = measure_kernel(LocalRunner(), KernelRequest(PROBLEM, sneaky, **FAST))
    assert (m.status, m.error_class) == ("error", "hack_suspected") and "TRITON_INTERPRET" in m.error_text


def test_autotune_without_a_driver_is_a_clear_runtime_error(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    tuned = _candidate(launch="add_kernel[(triton.cdiv(n, 1024),)](x, y, out, n)").replace(
        "@triton.jit", "@triton.autotune(configs=[triton.Config({'BLOCK': 1024})], key=['n'])\n@triton.jit")
    m = measure_kernel(LocalRunner(), KernelRequest(PROBLEM, tuned, **FAST))
    assert (m.status, m.error_class) == ("error", "runtime_error")
    assert "no GPU driver" in m.error_text and "Triton" in m.error_text


def test_a_kernel_whose_result_is_discarded_is_flagged_by_the_no_op_test(monkeypatch):
    """Reward hack #15: the kernel runs, but the output comes from PyTorch; replaced by a no-op,
    the candidate still returns the right answer, so the kernel is not its optimisation."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    discarded = _candidate(launch="add_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)\n"
                                  "        out = torch.add(x, y)")
    m = measure_kernel(LocalRunner(), KernelRequest(PROBLEM, discarded, **FAST))
    assert (m.status, m.error_class) == ("error", "hack_suspected"), m.error_text
    assert "add_kernel replaced by a no-op" in m.error_text


def test_an_autotuned_kernel_that_runs_is_live(monkeypatch):
    """The autotuner wraps the kernel: a launch through it counts as the kernel running, and the
    no-op test reaches the kernel inside it (its output is then poisoned memory: live)."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    tuned = _candidate(launch="add_kernel[(triton.cdiv(n, 1024),)](x, y, out, n)").replace(
        "@triton.jit", "@triton.autotune(configs=[triton.Config({'BLOCK': 1024})], key=['n'])\n@triton.jit")
    m = measure_kernel(LocalRunner(), KernelRequest(PROBLEM, tuned, **FAST))
    assert m.status == "ok", (m.error_class, m.error_text)
    assert m.stats["not_run_in_forward"] == []
