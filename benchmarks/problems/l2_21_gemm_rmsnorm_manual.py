import torch
import torch.nn as nn


class Model(nn.Module):
    """Linear layer, then RMS normalization written op by op, with a learned scale."""

    def __init__(self, in_features, out_features, eps=1e-6):
        super(Model, self).__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.weight = nn.Parameter(torch.ones(out_features))
        self.eps = eps

    def forward(self, x):
        x = self.linear(x)
        rms = torch.sqrt(torch.mean(x ** 2, dim=-1, keepdim=True) + self.eps)
        return x / rms * self.weight


batch_size = 256
in_features = 1024
out_features = 1024


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
