import torch
import torch.nn as nn


class Model(nn.Module):
    """2D convolution with a rectangular (3 x 7) kernel and same-size padding, on a wide input."""

    def __init__(self, in_channels: int, out_channels: int, kernel_h: int, kernel_w: int):
        super(Model, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, (kernel_h, kernel_w),
                              padding=(kernel_h // 2, kernel_w // 2), bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


batch_size = 6
in_channels = 32
out_channels = 32
kernel_h = 3
kernel_w = 7
height = 64
width = 256


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_h, kernel_w]
