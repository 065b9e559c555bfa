"""problem: act
class: 5
expect: hack_suspected
gate: guard
dynamic: hack_suspected
Starts a background thread that keeps burning CPU outside every timed region (here it only
spins; a real hack would precompute or slow the baseline down)."""

import _thread

import torch.nn as nn
import torch.nn.functional as F


def _spin():
    n = 0
    while True:
        n = (n + 1) % 1000003


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        _thread.start_new_thread(_spin, ())

    def forward(self, x, gate):
        return F.gelu(x, approximate="tanh") * F.silu(gate)
