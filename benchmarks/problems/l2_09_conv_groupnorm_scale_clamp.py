import torch
import torch.nn as nn


class Model(nn.Module):
    """Convolution, group normalization, scale by a learned per-channel factor, clamp."""

    def __init__(self, in_channels, out_channels, kernel_size, num_groups, scale_shape,
                 clamp_min, clamp_max):
        super(Model, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.group_norm = nn.GroupNorm(num_groups, out_channels)
        self.scale = nn.Parameter(torch.ones(scale_shape))
        self.clamp_min = clamp_min
        self.clamp_max = clamp_max

    def forward(self, x):
        x = self.conv(x)
        x = self.group_norm(x)
        x = x * self.scale
        x = torch.clamp(x, self.clamp_min, self.clamp_max)
        return x


batch_size = 16
in_channels = 8
out_channels = 32
height = 64
width = 64
kernel_size = 3
num_groups = 8
clamp_min = 0.0
clamp_max = 1.0


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, num_groups, (out_channels, 1, 1), clamp_min, clamp_max]
