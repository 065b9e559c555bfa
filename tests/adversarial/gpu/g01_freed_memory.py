"""problem: freed
class: 1
expect: incorrect
gate: correct
On CUDA the caching allocator hands a freed block straight back: uninitialised output memory
would hold the reference's intermediate, were it not poisoned."""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.empty_like(x)
