"""An elementwise op applied to a transposed copy, then transposed back into another copy."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        t = x.t().contiguous()
        t = torch.relu(t) * 2.0
        return t.t().contiguous()


def get_inputs():
    return [torch.randn(512, 1024)]


def get_init_inputs():
    return []
