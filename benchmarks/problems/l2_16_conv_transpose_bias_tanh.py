import torch
import torch.nn as nn


class Model(nn.Module):
    """Transposed convolution (upsampling x2), a learned per-channel bias, then tanh."""

    def __init__(self, in_channels, out_channels, kernel_size, stride, bias_shape):
        super(Model, self).__init__()
        self.conv_transpose = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride=stride)
        self.bias = nn.Parameter(torch.randn(bias_shape) * 0.02)

    def forward(self, x):
        x = self.conv_transpose(x)
        x = x + self.bias
        return torch.tanh(x)


batch_size = 16
in_channels = 32
out_channels = 16
height = 32
width = 32
kernel_size = 2
stride = 2


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, (out_channels, 1, 1)]
