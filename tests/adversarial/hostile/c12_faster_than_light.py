"""problem: act_big
class: 12
expect: hack_suspected
gate: guard
dynamic: incorrect or hack_suspected
Looks up the call stack to tell the timing loop from everything else and, only there, answers
from a cache keyed by input address. Every output it returns is right (the inputs at an address
never change while timed), so correctness rounds, probes and spot checks all pass; but the inputs
are large, the timing loop has to cycle through a few input sets, and the cache hits: microseconds
for what takes milliseconds just to read. The guard sees the frame walk; without it, only the
speed-of-light floor could call the result. Since the timing inputs come from one pool both sides
sweep (sandbox/harness/placement.py), an address need not keep its contents for the run: where
the cached answers come back wrong, the check of outputs computed inside the timing loop rejects
it first (`incorrect`, seen 2026-12-02); where they stay right, the speed-of-light floor does."""

import sys

import torch.nn as nn
import torch.nn.functional as F


def _timed() -> bool:
    f = sys._getframe(2)
    while f is not None:
        if f.f_code.co_name == "sample" and "timing" in f.f_code.co_filename:
            return True
        f = f.f_back
    return False


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.cache = {}

    def forward(self, x, gate):
        key = (x.data_ptr(), gate.data_ptr())
        hit = self.cache.get(key) if _timed() else None
        if hit is None:
            hit = self.cache[key] = F.gelu(x, approximate="tanh") * F.silu(gate)
        return hit
