"""problem: transposes
Better memory layout: the elementwise op runs on the input's own row-major layout, so neither the
transposed copy nor the copy back is needed."""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x).mul_(2.0)
