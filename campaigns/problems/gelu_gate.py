"""GeGLU-style gated activation, written the way reference code often is: the tanh-GELU from
minGPT spelled out op by op, gated by a SiLU spelled out as x * sigmoid(x).

KernelBench format: ``Model``, ``get_inputs``, ``get_init_inputs``; sizes are module globals so
``target.sizes`` / ``target.size_scale`` can resize it without editing the file.
"""

import math

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x, gate):
        g = 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))
        s = gate * torch.sigmoid(gate)
        return g * s


batch_size = 1024
dim = 2048


def get_inputs():
    return [torch.randn(batch_size, dim), torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
