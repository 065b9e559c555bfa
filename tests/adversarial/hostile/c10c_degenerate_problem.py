"""problem: degenerate
class: 10
expect: harness_error
gate: ran
Zeros against a reference whose output is within tolerance of zero everywhere: the problem is
degenerate, and the harness says so instead of letting anything pass."""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.zeros_like(x)
