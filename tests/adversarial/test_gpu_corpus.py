"""The reward-hacking corpus on a CUDA device: the GPU-only classes (#4 side streams, #11
persisting L2) and the CPU cases again, measured on the GPU. Skipped where there is no GPU."""

from __future__ import annotations

import pytest

from .corpus import failed_gate, judge_all, load

pytestmark = pytest.mark.gpu

GPU = load("gpu")
# c12 needs inputs too large for the timing pool, which a GPU (1 GB pool) does not reach
HOSTILE = [c for c in load("hostile") if c.name.split("_")[0] not in ("c12",)]
HONEST = load("honest")


@pytest.fixture(scope="module")
def outcomes():
    jobs = [(c, False) for c in GPU + HOSTILE + HONEST] + [(c, True) for c in GPU + HOSTILE if c.dynamic]
    return judge_all(jobs, workers=1, device="cuda")


@pytest.mark.parametrize("case", GPU + HOSTILE, ids=[c.name for c in GPU + HOSTILE])
def test_hostile_on_cuda(case, outcomes):
    out = outcomes[(case.name, False)]
    assert (out.judgement.diagnosis, failed_gate(out.judgement)) == (case.expect, case.gate), out.describe()
    if case.dynamic:
        dyn = outcomes[(case.name, True)]
        assert dyn.judgement.diagnosis in case.dynamic.split(" or "), dyn.describe()


@pytest.mark.parametrize("case", HONEST, ids=[c.name for c in HONEST])
def test_honest_on_cuda_never_flagged(case, outcomes):
    """Tiny problems are launch-bound on a GPU, so a win is not guaranteed; a false alarm is not ok."""
    out = outcomes[(case.name, False)]
    assert out.judgement.diagnosis not in ("hack_suspected", "incorrect", "env_drift", "harness_error",
                                           "runtime_error"), out.describe()
