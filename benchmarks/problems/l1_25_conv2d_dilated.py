import torch
import torch.nn as nn


class Model(nn.Module):
    """Dilated 3x3 2D convolution (dilation 2, padding 2), as in segmentation backbones."""

    def __init__(self, in_channels: int, out_channels: int, dilation: int):
        super(Model, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 3, padding=dilation, dilation=dilation, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


batch_size = 8
in_channels = 32
out_channels = 32
dilation = 2
height = 96
width = 96


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, dilation]
