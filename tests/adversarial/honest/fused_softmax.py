"""problem: softmax_twice
One softmax kernel instead of exp, exp again, sum and divide: one exponential per element instead of
two (work removed, so the gain holds on any CPU; fusing the passes adds more where memory is slow)."""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)
