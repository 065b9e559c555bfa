import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Convolution, bias subtraction, 2x2 average pooling, HardSwish."""

    def __init__(self, in_channels, out_channels, kernel_size, subtract_value):
        super(Model, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.subtract_value = subtract_value
        self.pool = nn.AvgPool2d(2)

    def forward(self, x):
        x = self.conv(x)
        x = x - self.subtract_value
        x = self.pool(x)
        x = F.hardswish(x)
        return x


batch_size = 16
in_channels = 8
out_channels = 32
height = 64
width = 64
kernel_size = 3
subtract_value = 0.5


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, subtract_value]
