"""problem: powlog
An algebraic rewrite with standard-library and installed C-extension modules in the candidate's
namespace (``math`` from the interpreter's lib-dynload, ``numpy``): modules the candidate did not
build are no custom kernel, whether forward calls into them or not."""

import math

import numpy as np
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.offset = 1.0 if math.isfinite(np.float32(1.0)) else 0.0

    def forward(self, x):
        t = torch.abs(x)
        t.add_(self.offset)
        return t.mul_(t)
