"""problem: act
class: 3
expect: incorrect
gate: correct
Computes once, then returns the first answer for every later call (a shape-keyed cache)."""

import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.cache = {}

    def forward(self, x, gate):
        key = tuple(x.shape)
        if key not in self.cache:
            self.cache[key] = F.gelu(x, approximate="tanh") * F.silu(gate)
        return self.cache[key]
