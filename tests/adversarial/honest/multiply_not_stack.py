"""problem: stacksum
Summing eight copies of x is 8 * x: no stacked copy, no reduction."""

import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return x * 8.0
