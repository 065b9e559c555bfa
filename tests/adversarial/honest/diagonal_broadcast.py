"""problem: diagmm
diag(d) @ x scales row i by d[i]: a broadcast multiply, O(n^2) instead of O(n^3)."""

import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, d, x):
        return d[:, None] * x
