import torch
import torch.nn as nn


class Model(nn.Module):
    """An image-network stem: 7x7 2D convolution from 3 channels, stride 2, padding 3."""

    def __init__(self, in_channels: int, out_channels: int):
        super(Model, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 7, stride=2, padding=3, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


batch_size = 8
in_channels = 3
out_channels = 64
height = 224
width = 224


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels]
