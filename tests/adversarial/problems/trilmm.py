"""Prefix sums along rows written as a product with a lower-triangular matrix of ones."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        n = x.shape[1]
        return x @ torch.ones(n, n, dtype=x.dtype).triu()


def get_inputs():
    return [torch.rand(512, 512)]


def get_init_inputs():
    return []
