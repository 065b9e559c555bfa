"""problem: helper
The reference verbatim but for one line: the helper method is textually the reference's at the same line."""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def scale(self, y):
        return y * 0.5 + 1.0

    def forward(self, x):
        y = torch.square(torch.abs(x) + 1.0)
        return self.scale(y)


def get_inputs():
    return [torch.randn(256, 512)]


def get_init_inputs():
    return []
