import torch
import torch.nn as nn


class Model(nn.Module):
    """2D convolution with a 5x5 kernel, stride 2 and padding 2 (a downsampling stem layer)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super(Model, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, stride=2, padding=kernel_size // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


batch_size = 16
in_channels = 16
out_channels = 64
kernel_size = 5
height = 128
width = 128


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
