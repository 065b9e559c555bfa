"""Row softmax processed in chunks of rows, three ways.

A parametric kernel for landscapes (``arbor record``): the knobs are module-level constants read
at call time, moved by ``campaigns/skills/chunked-softmax.md``. A chunk whose rows fit in the
L2 cache keeps every pass of the softmax (max, exp, sum, divide) in cache; a tiny chunk pays
Python and dispatch overhead per chunk. ``METHOD`` picks the ATen fused kernel, an op-by-op
version allocating each intermediate, or an op-by-op version writing into the output in place;
``OUT`` writes each chunk into a preallocated output or concatenates the chunks at the end.

KernelBench format; the reference ``Model`` is the template at its default knobs.
"""

import torch
import torch.nn as nn

CHUNK_ROWS = 1024  # rows per chunk (1024 = the whole input at once)
METHOD = "manual"  # fused | manual | inplace
OUT = "cat"  # prealloc | cat


def _softmax_rows(x, out):
    if METHOD == "fused":
        return torch.softmax(x, dim=-1, out=out) if out is not None else torch.softmax(x, dim=-1)
    if METHOD == "inplace":
        o = out if out is not None else torch.empty_like(x)
        torch.sub(x, x.amax(dim=-1, keepdim=True), out=o)
        o.exp_()
        o.div_(o.sum(dim=-1, keepdim=True))
        return o
    e = torch.exp(x - x.amax(dim=-1, keepdim=True))
    r = e / e.sum(dim=-1, keepdim=True)
    if out is not None:
        out.copy_(r)
    return r


class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x):
        rows = x.shape[0]
        if OUT == "prealloc":
            out = torch.empty_like(x)
            for i in range(0, rows, CHUNK_ROWS):
                _softmax_rows(x[i:i + CHUNK_ROWS], out[i:i + CHUNK_ROWS])
            return out
        return torch.cat([_softmax_rows(x[i:i + CHUNK_ROWS], None) for i in range(0, rows, CHUNK_ROWS)])


batch_size = 1024
dim = 1024


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
