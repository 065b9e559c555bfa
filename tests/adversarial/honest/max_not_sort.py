"""problem: sortmax
A row maximum is one reduction: amax instead of a full sort."""

import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return x.amax(dim=-1)
