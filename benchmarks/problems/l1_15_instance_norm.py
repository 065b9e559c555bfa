import torch
import torch.nn as nn


class Model(nn.Module):
    """Instance normalization of a batch of feature maps."""

    def __init__(self, num_features: int):
        super(Model, self).__init__()
        self.norm = nn.InstanceNorm2d(num_features=num_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


batch_size = 16
features = 64
height = 96
width = 96


def get_inputs():
    return [torch.randn(batch_size, features, height, width)]


def get_init_inputs():
    return [features]
