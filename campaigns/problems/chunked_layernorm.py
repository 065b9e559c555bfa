"""LayerNorm over the last dimension, processed in chunks of rows, with four ways to get the
statistics and two ways to apply the affine transform.

A parametric kernel for landscapes (``arbor record``): the knobs are module-level constants read
at call time, moved by ``campaigns/skills/chunked-layernorm.md``. ``STATS``: ``two_pass`` (mean,
then the mean of squared deviations), ``one_pass`` (E[x^2] - E[x]^2 from one read), ``var_mean``
(ATen's fused ``torch.var_mean``) or ``fused`` (ATen's ``layer_norm`` kernel for the
normalisation). ``AFFINE``: ``separate`` allocates each intermediate, ``inplace`` scales and
shifts the output in place. Chunks sized for the L2 cache keep the several passes in cache.

KernelBench format; the reference ``Model`` is the template at its default knobs.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

CHUNK_ROWS = 1024  # rows per chunk (1024 = the whole input at once)
STATS = "two_pass"  # two_pass | one_pass | var_mean | fused
AFFINE = "separate"  # separate | inplace
EPS = 1e-5


def _normalize(x):
    if STATS == "fused":
        return F.layer_norm(x, (x.shape[-1],), eps=EPS)
    if STATS == "two_pass":
        mean = x.mean(dim=-1, keepdim=True)
        d = x - mean
        var = (d * d).mean(dim=-1, keepdim=True)
    elif STATS == "one_pass":
        mean = x.mean(dim=-1, keepdim=True)
        var = (x * x).mean(dim=-1, keepdim=True) - mean * mean
        d = x - mean
    else:
        var, mean = torch.var_mean(x, dim=-1, keepdim=True, unbiased=False)
        d = x - mean
    return d * torch.rsqrt(var + EPS)


class Model(nn.Module):
    def __init__(self, dim):
        super(Model, self).__init__()
        self.weight = nn.Parameter(torch.randn(dim))
        self.bias = nn.Parameter(torch.randn(dim))

    def forward(self, x):
        out = torch.empty_like(x)
        for i in range(0, x.shape[0], CHUNK_ROWS):
            o = out[i:i + CHUNK_ROWS]
            y = _normalize(x[i:i + CHUNK_ROWS])
            if AFFINE == "inplace":
                o.copy_(y)
                o.mul_(self.weight).add_(self.bias)
            else:
                o.copy_(y * self.weight + self.bias)
        return out


batch_size = 1024
dim = 1024


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [dim]
