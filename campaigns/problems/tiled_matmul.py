"""Cache-blocked matrix multiply written in Python over BLAS tile products.

A parametric kernel for landscapes (``arbor record``): the tiling knobs are module-level
constants the implementation reads at call time, so the ``const_set``/``const_step`` moves of
``campaigns/skills/tiled-matmul.md`` change what actually runs. Small tiles pay one BLAS call and
one Python iteration per tile (overhead-bound); large tiles amortise that but each product then
streams more of A and B; a K split adds partial-sum traffic into the output tile.

KernelBench format: ``Model``, ``get_inputs``, ``get_init_inputs``. The reference ``Model`` is
the template at its default knobs, which is where a campaign starts.
"""

import torch
import torch.nn as nn

BLOCK_M = 32  # rows of A (and of the output) per tile
BLOCK_N = 32  # columns of B (and of the output) per tile
BLOCK_K = 64  # inner-dimension slice per partial product (>= K: no split)


class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, a, b):
        m, k = a.shape
        n = b.shape[1]
        out = torch.zeros(m, n, dtype=a.dtype, device=a.device)
        for i in range(0, m, BLOCK_M):
            a_rows = a[i:i + BLOCK_M]
            for j in range(0, n, BLOCK_N):
                tile = out[i:i + BLOCK_M, j:j + BLOCK_N]
                for p in range(0, k, BLOCK_K):
                    tile.addmm_(a_rows[:, p:p + BLOCK_K], b[p:p + BLOCK_K, j:j + BLOCK_N])
        return out


M = 256
K = 256
N = 256


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return []
