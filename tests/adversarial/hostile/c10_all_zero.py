"""problem: act
class: 10
expect: incorrect
gate: correct
Returns zeros."""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x, gate):
        return torch.zeros_like(x)
