"""Warm-up and calibration for the kernel harness: how many calls one timed sample holds (``inner``),
how they are timed on CUDA (one event pair per call, or per batch), and how many input sets each
side's pool needs.

Standalone (stdlib only): shipped beside the harness and loaded by path. The harness hands in its
sampling function, so the logic runs (and is tested) without a GPU.

Why batches on CUDA: a call shorter than a millisecond, timed alone between its own events after
a cache flush and a device synchronize, starts on an idle device and ends waiting for the host's
next launch. Its time is mostly launch latency and host jitter — the quickstart problem (0.17 ms a
call, launch bound) had an A/A noise floor of 10.5% that way, against 0.1-0.2% for ms-scale
kernels. Timing ``inner`` back-to-back calls between one event pair (the cache flushed before the
batch, each call on its own input set, the device synchronize after it) measures the steady
stream of calls a real workload runs, and averages the per-call jitter away. Calls of a
millisecond or more keep their own events: the device never starves between them, and each starts
with a cold cache as before. The mode is chosen from the *reference's* per-call time and applies
to both sides, so the two are always timed the same way.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable

MAX_SAMPLE_S = 0.25  # no side's sample may take longer, whatever the other side's speed
POOL_SIZE = 3  # distinct input sets rotated per sample at least: fresh pointers defeat pointer-keyed caches
CUDA_MAX_INNER = 64  # per-call mode: each call has its own event pair after a flush; inner only averages
BATCH_BELOW_S = 1e-3  # CUDA: a reference call shorter than this is timed in batches (sub-millisecond)
# A batch lasts at least this long: host jitter per launch averages over >= 50 calls of a 0.2 ms
# kernel, while a 2 s budget still holds ~90 ABBA rounds.
BATCH_MIN_SAMPLE_S = 0.01

Sample = Callable[[int, int, int], float]  # (side, first input set, calls) -> seconds per call


def inner_for(per_call_s: float, min_sample_s: float, cap: int | None = None) -> int:
    """Calls per sample so that a sample lasts at least ``min_sample_s`` and at most
    ``MAX_SAMPLE_S``, never more than ``cap``."""
    per_call_s = max(per_call_s, 1e-9)
    n = max(1, math.ceil(min_sample_s / per_call_s))
    n = min(n, max(1, int(MAX_SAMPLE_S / per_call_s)))
    return min(n, cap) if cap else n


def pool_sets(inner: int, set_bytes: int, budget_bytes: int) -> int:
    """Input sets per side: one per call of a sample plus one (no call of a sample reuses another's
    inputs, so a result cached across calls is never a hit), as far as ``budget_bytes`` allows.
    Where the budget caps it, the sets still total about the budget (1 GB on a GPU) — far beyond
    any L2 — so a set met again within a batch was evicted long before."""
    return min(inner + 1, max(POOL_SIZE, budget_bytes // max(1, set_bytes)))


def steady_per_call(durations: list[float]) -> float:
    """The median warm-up call, the first one left out (it pays for lazy initialisation)."""
    steady = sorted(durations[1:] or durations)
    return max(steady[len(steady) // 2], 1e-9)


@dataclass
class Plan:
    cuda: bool = False
    inner: list = field(default_factory=lambda: [0, 0])
    per_call_s: list = field(default_factory=lambda: [0.0, 0.0])  # warm-up, one call at a time
    batch: bool = False  # CUDA: one event pair around the sample's calls
    batch_per_call_s: list = field(default_factory=lambda: [None, None])  # the refining batch's

    def facts(self) -> dict:
        """What the measurement's facts say about the plan (CUDA only: the CPU path has one mode)."""
        if not self.cuda:
            return {}
        return {"cuda_batch": self.batch, "warmup_call_s": [round(x, 9) for x in self.per_call_s],
                "batch_call_s": [None if x is None else round(x, 9) for x in self.batch_per_call_s]}


def calibrate(sample: Sample, grow_pool: Callable[[int, int], None], *, warmup_s: float,
              min_sample_s: float, cuda: bool, set_bytes: int, budget_bytes: int,
              set_batch: Callable[[bool], None] = lambda on: None,
              clock: Callable[[], int] = time.perf_counter_ns) -> Plan:
    """Per side (the reference first): calls one at a time until ``warmup_s`` has passed, ``inner``
    from the steady per-call time, the pool grown to fit. On CUDA the reference's per-call time
    picks the mode (``set_batch``); in batch mode one batch of the calibrated size is timed and
    ``inner`` re-derived from it, because calls that follow each other back to back take less
    than one call alone (launches overlap work) and the sample must still last long enough."""
    plan = Plan(cuda=cuda)
    for side in (0, 1):
        durations: list[float] = []
        t_end = clock() + warmup_s * 1e9
        while not durations or clock() < t_end:
            durations.append(sample(side, len(durations), 1))
        per_call = plan.per_call_s[side] = steady_per_call(durations)
        if cuda and side == 0:
            plan.batch = per_call < BATCH_BELOW_S
            set_batch(plan.batch)
        floor = max(min_sample_s, BATCH_MIN_SAMPLE_S) if plan.batch else min_sample_s
        cap = CUDA_MAX_INNER if cuda and not plan.batch else None
        n = inner_for(per_call, floor, cap)
        grow_pool(side, pool_sets(n, set_bytes, budget_bytes))
        if plan.batch:
            t = plan.batch_per_call_s[side] = sample(side, len(durations), n)
            n = max(n, inner_for(t, floor))
            grow_pool(side, pool_sets(n, set_bytes, budget_bytes))
        plan.inner[side] = n
    return plan
