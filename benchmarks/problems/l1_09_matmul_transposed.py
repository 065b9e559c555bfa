import torch
import torch.nn as nn


class Model(nn.Module):
    """C = A^T B^T for A of shape (K, M) and B of shape (N, K)."""

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A.T, B.T)


M = 1024
K = 1024
N = 1024


def get_inputs():
    A = torch.randn(K, M)
    B = torch.randn(N, K)
    return [A, B]


def get_init_inputs():
    return []
