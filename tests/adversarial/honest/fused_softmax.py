"""problem: softmax
One fused softmax kernel instead of max, subtract, exp, sum and divide."""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)
