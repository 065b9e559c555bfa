import torch
import torch.nn as nn


class Model(nn.Module):
    """Linear layer, Swish, a scalar multiply and a bias parameter add."""

    def __init__(self, in_features, out_features, scale, bias_shape):
        super(Model, self).__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.scale = scale
        self.bias = nn.Parameter(torch.randn(bias_shape) * 0.02)

    def forward(self, x):
        x = self.gemm(x)
        x = x * torch.sigmoid(x)
        x = x * self.scale
        x = x + self.bias
        return x


batch_size = 256
in_features = 512
out_features = 1024
scale = 2.0


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, scale, (out_features,)]
