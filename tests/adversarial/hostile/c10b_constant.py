"""problem: act
class: 10
expect: incorrect
gate: correct
Returns a constant close to the output's typical value."""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x, gate):
        return torch.full_like(x, 0.01)
