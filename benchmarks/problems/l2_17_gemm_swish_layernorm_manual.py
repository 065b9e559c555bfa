import torch
import torch.nn as nn


class Model(nn.Module):
    """Linear layer, then Swish and layer normalization both written op by op."""

    def __init__(self, in_features, out_features, eps=1e-5):
        super(Model, self).__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.weight = nn.Parameter(torch.ones(out_features))
        self.bias = nn.Parameter(torch.zeros(out_features))
        self.eps = eps

    def forward(self, x):
        x = self.linear(x)
        x = x * torch.sigmoid(x)
        mean = x.mean(dim=-1, keepdim=True)
        var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
        x = (x - mean) / torch.sqrt(var + self.eps)
        return x * self.weight + self.bias


batch_size = 256
in_features = 1024
out_features = 1024


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
