"""problem: powlog
Algebraic rewrite: exp(2 log(|x| + 1)) is (|x| + 1) squared, without the transcendental calls."""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        t = torch.abs(x)
        t.add_(1.0)
        return t.mul_(t)
