"""problem: act
class: 13
expect: incorrect
gate: correct
Computes only the first half of the rows and leaves the rest of a fresh buffer uninitialised,
relying on whatever the allocator hands back."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def forward(self, x, gate):
        out = torch.empty_like(x)
        h = x.shape[0] // 2
        out[:h] = F.gelu(x[:h], approximate="tanh") * F.silu(gate[:h])
        return out
