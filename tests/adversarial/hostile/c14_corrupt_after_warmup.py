"""problem: act
class: 14
expect: incorrect
gate: correct
Correct for the first calls (the correctness rounds), slightly wrong once the timing loop runs."""

import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x, gate):
        self.calls += 1
        out = F.gelu(x, approximate="tanh") * F.silu(gate)
        return out if self.calls <= 12 else out * 0.99
