"""Small problems the GPU-move tests share (CPU tests, gpu-marked tests, harness tests)."""

LINEAR_RELU = '''
import torch
import torch.nn as nn

batch_size = 64
in_features = 256
out_features = 512


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.relu(self.fc(x))


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
'''
# the same with GEMM dimensions too small for a tensor-core tile
