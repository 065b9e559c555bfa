"""problem: linear
gain: fusion
Bias add fused into the matmul (addmm), the identity scale dropped, ReLU applied in place."""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features: int = 16, out_features: int = 16):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(out_features, in_features) / in_features ** 0.5)
        self.bias = nn.Parameter(torch.randn(out_features))

    def forward(self, x):
        return torch.addmm(self.bias, x, self.weight.t()).relu_()
