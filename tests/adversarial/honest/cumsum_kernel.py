"""problem: cumloop
torch.cumsum: one pass in C++ instead of a Python loop over the columns."""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.cumsum(x, dim=1)
