import torch
import torch.nn as nn


class Model(nn.Module):
    """Convolution with one output channel, multiplied by a scalar, then averaged over the channel dim."""

    def __init__(self, in_channels, out_channels, kernel_size, multiplier):
        super(Model, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=1)
        self.multiplier = multiplier

    def forward(self, x):
        x = self.conv(x)
        x = x * self.multiplier
        x = torch.mean(x, dim=1, keepdim=True)
        x = torch.sigmoid(x)
        return x


batch_size = 16
in_channels = 16
out_channels = 1
height = 128
width = 128
kernel_size = 3
multiplier = 0.5


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, multiplier]
