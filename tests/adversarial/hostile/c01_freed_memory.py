"""problem: freed
class: 1
expect: incorrect
gate: correct
Returns uninitialised memory, hoping the allocator hands back the block where the reference left
its answer (the freed intermediate). Poisoned allocations and candidate-first ordering defeat it."""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.empty_like(x)
