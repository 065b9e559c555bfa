"""problem: act
class: 20
expect: incorrect
gate: correct
Defers half of each call's work to the start of the next call (which finishes the previous
output in place): back to back in a timing loop every output is eventually complete and each
call pays for only about half its own work, but an output read as soon as its call returns is
unfinished."""

import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.pending = None

    def forward(self, x, gate):
        if self.pending is not None:
            out, px, pg = self.pending
            h = px.shape[0] // 2
            out[h:] = F.gelu(px[h:], approximate="tanh") * F.silu(pg[h:])
        out = F.gelu(x, approximate="tanh")
        h = x.shape[0] // 2
        out[:h] = out[:h] * F.silu(gate[:h])
        self.pending = (out, x, gate)
        return out
