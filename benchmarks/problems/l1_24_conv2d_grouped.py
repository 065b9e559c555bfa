import torch
import torch.nn as nn


class Model(nn.Module):
    """Grouped 3x3 2D convolution (8 groups), as in ResNeXt blocks."""

    def __init__(self, channels: int, groups: int):
        super(Model, self).__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1, groups=groups, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


batch_size = 12
channels = 128
groups = 8
height = 56
width = 56


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [channels, groups]
