import torch
import torch.nn as nn


class Model(nn.Module):
    """A gated unit: tanh of one linear projection times the sigmoid of another."""

    def __init__(self, in_features, out_features):
        super(Model, self).__init__()
        self.value = nn.Linear(in_features, out_features)
        self.gate = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.tanh(self.value(x)) * torch.sigmoid(self.gate(x))


batch_size = 256
in_features = 1024
out_features = 1024


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
