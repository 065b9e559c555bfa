import torch
import torch.nn as nn


class Model(nn.Module):
    """RMS normalization over the hidden dimension, written op by op, with a learned scale."""

    def __init__(self, hidden: int, eps: float = 1e-6):
        super(Model, self).__init__()
        self.weight = nn.Parameter(torch.ones(hidden) + 0.1 * torch.randn(hidden))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        variance = x.pow(2).mean(-1, keepdim=True)
        return x * torch.rsqrt(variance + self.eps) * self.weight


batch_size = 8192
hidden = 4096


def get_inputs():
    return [torch.randn(batch_size, hidden)]


def get_init_inputs():
    return [hidden]
