"""problem: act
Fused activations with standard-library and installed C-extension modules in the candidate's
namespace (``math`` from the interpreter's lib-dynload, ``numpy``): modules the candidate did not
build are no custom kernel, whether forward calls into them or not."""

import math

import numpy as np
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.approximate = "tanh" if math.isfinite(np.float32(1.0)) else "none"

    def forward(self, x, gate):
        return F.gelu(x, approximate=self.approximate) * F.silu(gate)
