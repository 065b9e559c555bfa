"""(|x| + 1) squared through exp and log, then scaled by a helper method.
The honest candidate keeps the helper verbatim (same text, same line): see honest/one_line_edit."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def scale(self, y):
        return y * 0.5 + 1.0

    def forward(self, x):
        y = torch.exp(2.0 * torch.log(torch.abs(x) + 1.0))
        return self.scale(y)


def get_inputs():
    return [torch.randn(256, 512)]


def get_init_inputs():
    return []
