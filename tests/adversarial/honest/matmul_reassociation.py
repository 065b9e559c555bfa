"""problem: chain
Reassociation: A @ (B @ v) does two matrix-vector products instead of a matrix-matrix one."""

import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, a, b, v):
        return a @ (b @ v)
