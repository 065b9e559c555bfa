import torch
import torch.nn as nn


class Model(nn.Module):
    """Pointwise (1x1) 2D convolution: a per-pixel matmul over channels."""

    def __init__(self, in_channels: int, out_channels: int):
        super(Model, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


batch_size = 16
in_channels = 64
out_channels = 128
height = 64
width = 64


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels]
