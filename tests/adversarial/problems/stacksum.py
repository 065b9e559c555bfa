"""Eight copies of the input stacked and summed: a multiply written as a reduction."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.stack([x] * 8).sum(dim=0)


def get_inputs():
    return [torch.randn(512, 1024)]


def get_init_inputs():
    return []
