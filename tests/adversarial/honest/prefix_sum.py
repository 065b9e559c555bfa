"""problem: trilmm
x @ triu(ones) sums each row's prefix: one cumsum pass instead of an n^3 matmul."""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.cumsum(x, dim=1)
