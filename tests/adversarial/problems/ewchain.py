"""A chain of elementwise ops on a large tensor, each allocating a fresh result."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        y = x * 2.0
        y = y + 1.0
        y = y * x
        y = y - 3.0
        y = y * 0.5
        return y + x


def get_inputs():
    return [torch.randn(1024, 1024)]


def get_init_inputs():
    return []
