"""A level-2 problem in the upstream KernelBench format, written here: a GEMM followed by an
epilogue chain — Swish, a bias add, GroupNorm — the shape of most level-2 problems (a GEMM or conv
and the elementwise and normalization ops after it). At these sizes the fp32 GEMM takes a couple
of milliseconds on an H100; ``target.size_scale`` shrinks it for a CPU.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features, num_groups, bias_shape):
        super(Model, self).__init__()
        self.matmul = nn.Linear(in_features, out_features)
        self.bias = nn.Parameter(torch.randn(bias_shape) * 0.02)
        self.group_norm = nn.GroupNorm(num_groups, out_features)

    def forward(self, x):
        x = self.matmul(x)
        x = torch.sigmoid(x) * x
        x = x + self.bias
        x = self.group_norm(x)
        return x


batch_size = 4096
in_features = 4096
out_features = 4096
num_groups = 64


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, num_groups, (out_features,)]
