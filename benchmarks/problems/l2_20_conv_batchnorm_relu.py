import torch
import torch.nn as nn


class Model(nn.Module):
    """Convolution, batch normalization (inference: running statistics), then ReLU."""

    def __init__(self, in_channels, out_channels, kernel_size):
        super(Model, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=1)
        self.bn = nn.BatchNorm2d(out_channels)
        with torch.no_grad():  # statistics as a trained network would have them
            self.bn.running_mean.uniform_(-0.5, 0.5)
            self.bn.running_var.uniform_(0.5, 2.0)
        self.bn.eval()

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)))


batch_size = 16
in_channels = 16
out_channels = 32
height = 64
width = 64
kernel_size = 3


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
