import torch
import torch.nn as nn


class Model(nn.Module):
    """Mean over one dimension, as a KernelBench reduction."""

    def __init__(self, dim: int):
        super(Model, self).__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.mean(x, dim=self.dim)


batch_size = 64
dim1 = 512
dim2 = 512
reduce_dim = 1


def get_inputs():
    return [torch.randn(batch_size, dim1, dim2)]


def get_init_inputs():
    return [reduce_dim]
