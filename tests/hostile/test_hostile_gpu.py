"""A never-returning CUDA kernel: killed at the time limit, diagnosed ``timeout``, and the GPU is
usable again by the next candidate (the driver tears the context down with the process)."""

from __future__ import annotations

import os

import pytest

from arbor.sandbox.kernel.protocol import KernelRequest, measure_kernel
from arbor.sandbox.runners.local import LocalRunner

from .candidates import CUDA_HANG, PROBLEM, candidate
from .helpers import leftovers

pytestmark = pytest.mark.gpu


def _req(source: str, timeout_s: float) -> KernelRequest:
    return KernelRequest(problem_source=PROBLEM, candidate_source=source, device="cuda", warmup_s=0.02,
                         time_budget_s=0.2, min_repeats=5, max_repeats=20, timeout_s=timeout_s)


def test_never_returning_cuda_kernel_is_killed_and_the_gpu_recovers():
    with LocalRunner(device="cuda") as r:  # the device check picks isolation CUDA starts under
        m = measure_kernel(r, _req(CUDA_HANG, 20))
        assert m.error_class == "timeout", (m.error_class, m.error_text)
        ok = measure_kernel(r, _req(candidate("return torch.clamp_min(x, 0.0)"), 120))
        assert ok.ok, (ok.error_class, ok.error_text)
    assert leftovers(os.getpid()) == {}
