import torch
import torch.nn as nn


class Model(nn.Module):
    """Convolution, 2x2 max pooling, then a sigmoid."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super(Model, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.pool = nn.MaxPool2d(2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.pool(self.conv(x)))


batch_size = 8
in_channels = 16
out_channels = 32
kernel_size = 3
height = 96
width = 96


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
