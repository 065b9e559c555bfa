"""The hostile suite against the local runner: every attack contained, diagnosed, and cleaned up."""

from __future__ import annotations

import os
import resource

import pytest

from arbor.sandbox.runners import isolation
from arbor.sandbox.kernel.protocol import KernelRequest, measure_kernel
from arbor.sandbox.runners.local import LocalRunner

from .candidates import PROBLEM, hostiles
from .conftest import SECRET
from .helpers import connections, leftovers

pytestmark = pytest.mark.skipif(isolation.landlock_abi() < 6, reason="needs Landlock ABI >= 6 (Linux >= 6.12)")

CASES = [h.name for h in hostiles("/x", 1)]


@pytest.fixture(scope="module")
def runner():
    # few processes: a contained fork bomb still spins max_processes busy loops until its timeout
    with LocalRunner(max_file_bytes=32 << 20, max_processes=64) as r:
        yield r


def request(source: str, timeout_s: float) -> KernelRequest:
    return KernelRequest(problem_source=PROBLEM, candidate_source=source, warmup_s=0.02, time_budget_s=0.2,
                         min_repeats=5, max_repeats=20, min_sample_s=1e-4, timeout_s=timeout_s,
                         memory_bytes=3 << 30, num_threads=1)


@pytest.mark.parametrize("name", CASES)
def test_hostile_candidate_is_contained(name, runner, bait):
    h = next(h for h in hostiles(bait["path"], bait["port"]) if h.name == name)
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    m = measure_kernel(runner, request(h.source, h.timeout_s))
    what = f"{name}: {m.status} {m.error_class} {m.error_text}"
    if h.diagnosis == "ok":
        assert m.ok, what
    else:
        assert m.error_class == h.diagnosis, what
    assert h.text in (m.error_text or ""), what
    blob = str(m.to_dict())
    assert SECRET not in blob, f"{name} leaked the secret: {what}"
    assert connections(bait["server"]) == 0, f"{name} reached the network"
    # a 1 GiB flood is drained, never held: our peak RSS grows by far less than the flood
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before < 256 << 10  # KiB
    assert leftovers(os.getpid()) == {}, f"{name} left something behind"
