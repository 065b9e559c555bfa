import torch
import torch.nn as nn


class Model(nn.Module):
    """Batched attention-style scores: Q K^T with a transpose applied twice, then scaled."""

    def __init__(self, scale):
        super(Model, self).__init__()
        self.scale = scale

    def forward(self, q, k):
        kt = k.transpose(1, 2)
        scores = torch.bmm(q, kt)
        scores = scores.transpose(1, 2).transpose(1, 2)
        return scores * self.scale


batch_size = 32
seq_len = 256
head_dim = 64
scale = 0.125


def get_inputs():
    return [torch.randn(batch_size, seq_len, head_dim), torch.randn(batch_size, seq_len, head_dim)]


def get_init_inputs():
    return [scale]
