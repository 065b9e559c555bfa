"""problem: act
class: 8
expect: incorrect
gate: correct
Computes in bfloat16 and casts back, hoping the tolerance is loose: fp32 outputs get fp32's."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def forward(self, x, gate):
        xb, gb = x.to(torch.bfloat16), gate.to(torch.bfloat16)
        return (F.gelu(xb, approximate="tanh") * F.silu(gb)).float()
