"""Linear + bias + ReLU spelled out: matmul, a separate bias add, a separate activation."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features: int = 16, out_features: int = 16):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(out_features, in_features) / in_features ** 0.5)
        self.bias = nn.Parameter(torch.randn(out_features))

    def forward(self, x):
        y = x @ self.weight.t()
        y = y + self.bias
        y = y * 1.0
        return torch.relu(y)


def get_inputs():
    return [torch.randn(65536, 16)]


def get_init_inputs():
    return [16, 16]
