import torch
import torch.nn as nn


class Model(nn.Module):
    """Convolution, Mish written out (x * tanh(log(1 + exp(x)))), then group normalization."""

    def __init__(self, in_channels, out_channels, kernel_size, num_groups):
        super(Model, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=1)
        self.norm = nn.GroupNorm(num_groups, out_channels)

    def forward(self, x):
        x = self.conv(x)
        x = x * torch.tanh(torch.log(1 + torch.exp(x)))
        return self.norm(x)


batch_size = 16
in_channels = 16
out_channels = 32
height = 64
width = 64
kernel_size = 3
num_groups = 8


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, num_groups]
