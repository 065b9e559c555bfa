"""A matrix-matrix product applied to a vector: (A @ B) @ v."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b, v):
        return (a @ b) @ v


def get_inputs():
    return [torch.randn(384, 384), torch.randn(384, 384), torch.randn(384, 4)]


def get_init_inputs():
    return []
