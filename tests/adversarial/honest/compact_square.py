"""problem: compact
The problem file is laid out exactly as ast.unparse writes it (no docstring, comment or extra blank line)."""
import torch
import torch.nn as nn
class ModelNew(nn.Module):
    def forward(self, x):
        return torch.square(torch.abs(x) + 1.0)
