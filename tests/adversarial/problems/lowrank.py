"""A low-rank weight (U @ V) rebuilt from its factors on every call, then applied."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim: int = 256, rank: int = 64):
        super().__init__()
        self.u = nn.Parameter(torch.randn(dim, rank) / rank ** 0.5)
        self.v = nn.Parameter(torch.randn(rank, dim) / dim ** 0.5)

    def forward(self, x):
        w = self.u @ self.v
        return x @ w


def get_inputs():
    return [torch.randn(16, 256)]


def get_init_inputs():
    return [256, 64]
