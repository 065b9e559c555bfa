"""problem: onehot
Index the table's rows directly instead of multiplying by a one-hot matrix."""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, vocab: int = 2048, dim: int = 256):
        super().__init__()
        self.table = nn.Parameter(torch.randn(vocab, dim))

    def forward(self, idx):
        return self.table.index_select(0, idx)
