"""Gated activation written op by op (tanh-GELU x SiLU), large enough that reading it costs real time."""

import math

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, gate):
        g = 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))
        s = gate * torch.sigmoid(gate)
        return g * s


batch_size = 1024
dim = 1024


def get_inputs():
    return [torch.randn(batch_size, dim), torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
