import torch
import torch.nn as nn


class Model(nn.Module):
    """Linear layer, scaled, with the unscaled result added back as a residual."""

    def __init__(self, in_features: int, out_features: int, scaling_factor: float):
        super(Model, self).__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scaling_factor = scaling_factor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.linear(x)
        residual = x.clone().detach()
        x = x * self.scaling_factor
        return x + residual


batch_size = 4096
in_features = 2048
out_features = 2048
scaling_factor = 0.5


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, scaling_factor]
