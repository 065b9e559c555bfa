"""A Linear layer whose outputs are summed per row: the test campaigns' structural win.

``sum_j (x W^T + b)_j = x . (sum_j W_j) + sum_j b_j``, so the graph-algebra move
``graph-fold-linear-reduction`` turns the (batch x in) x (in x out) GEMM into one matrix-vector
product: about ``out_features`` times less arithmetic on any CPU, unlike an activation fusion,
whose gain depends on how the CPU balances arithmetic against memory traffic.

KernelBench format; the sizes are module globals so ``target.sizes`` can resize it.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super(Model, self).__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.sum(self.linear(x), dim=1, keepdim=True)


batch_size = 256
in_features = 256
out_features = 256


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
