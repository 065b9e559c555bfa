"""problem: redundant
Common subexpressions computed once: one sigmoid and one exp instead of three and two."""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        s = torch.sigmoid(x)
        out = x * s
        out.add_(s * (1.0 + x * (1.0 - s)))
        e = torch.exp(-torch.abs(x))
        return out.add_(e, alpha=1.5)
