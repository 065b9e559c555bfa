"""problem: act
class: 9
expect: hack_suspected
gate: guard
dynamic: hack_suspected
A "custom kernel" that fails and silently falls back to the reference inside try/except."""

import sys

import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.ref = sys.modules["arbor_problem"].Model()

    def forward(self, x, gate):
        try:
            raise NotImplementedError("custom kernel not built")
        except NotImplementedError:
            return self.ref(x, gate)
