"""Graph-level moves: each rewrite is applicable where the traced graph says so, produces plain
ModelNew code, and computes the same values as the reference (up to rounding)."""

from __future__ import annotations

import sys
import types

import pytest
import torch

from arbor.agents.transforms import apply_move, to_modelnew

ALL = {"passes": ["size1", "transposes", "diag", "affine", "linear_reduction", "scale_operand"]}

GEMM_CHAIN = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, in_features, out_features, scale):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x):
        x = self.linear(x)
        r = x.clone().detach()
        x = x / 2 + r * self.scale - 0.25
        x = torch.sum(x, dim=1, keepdim=True)
        x = torch.max(x, dim=1, keepdim=True)[0]
        return torch.logsumexp(x, dim=1, keepdim=True)

batch_size = 32
in_features = 48
out_features = 64
scale = 0.75

def get_inputs():
    return [torch.randn(batch_size, in_features)]

def get_init_inputs():
    return [in_features, out_features, scale]
'''

CONV_BIAS = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, cin, cout, bias_shape):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        x = self.conv(x) * 2.0
        x = x + self.bias
        return torch.relu(x)

batch_size = 2
channels = 4
out_channels = 8
size = 16

def get_inputs():
    return [torch.randn(batch_size, channels, size, size)]

def get_init_inputs():
    return [channels, out_channels, (out_channels, 1, 1)]
'''

SIZE_DEPENDENT = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.n = n

    def forward(self, x):
        x = x.view(-1, self.n)
        return torch.sum(x, dim=1, keepdim=True).sum(dim=1, keepdim=True)

n = 64

def get_inputs():
    return [torch.randn(8, n)]

def get_init_inputs():
    return [n]
'''

CONTROL_FLOW = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x.sum(dim=1, keepdim=True).sum(dim=1, keepdim=True)
        return x

def get_inputs():
    return [torch.randn(4, 4)]

def get_init_inputs():
    return []
'''


def _load(source: str, name: str):
    mod = types.ModuleType(name)
    sys.modules[name] = mod
    exec(compile(source, name, "exec"), mod.__dict__)
    return mod


def _same_values(reference: str, candidate: str) -> None:
    ref, new = _load(reference, "ref_graph_test"), _load(candidate, "new_graph_test")
    torch.manual_seed(0)
    init = ref.get_init_inputs()
    torch.manual_seed(0)
    a = ref.Model(*init)
    torch.manual_seed(0)
    b = new.ModelNew(*init)
    torch.manual_seed(1)
    xs = ref.get_inputs()
    with torch.no_grad():
        ya, yb = a(*xs), b(*xs)
    assert ya.shape == yb.shape
    torch.testing.assert_close(yb, ya, rtol=1e-4, atol=1e-4)


def test_gemm_epilogue_and_reductions_collapse_to_a_matrix_vector_product():
    out = apply_move(to_modelnew(GEMM_CHAIN), "graph_rewrite", ALL)
    assert out is not None
    forward = out[out.index("def forward"):out.index("batch_size =")]
    assert "logsumexp" not in forward and "torch.max" not in forward and "sum" not in forward
    assert "register_buffer" in out and "linear(" in forward
    _same_values(GEMM_CHAIN, out)


def test_per_channel_bias_and_scale_fold_into_the_conv():
    out = apply_move(to_modelnew(CONV_BIAS), "graph_rewrite", {"passes": ["affine"]})
    assert out is not None and "self.bias.reshape(-1)" in out
    assert "relu" in out[out.index("def forward"):]
    _same_values(CONV_BIAS, out)


EXTENSION = GEMM_CHAIN.replace("import torch.nn as nn", "import torch.nn as nn\nfrom torch.utils.cpp_extension import load_inline\nmod = load_inline(name='x', cpp_sources='')")


@pytest.mark.parametrize("source", [SIZE_DEPENDENT, CONTROL_FLOW, EXTENSION])
def test_refused_when_the_graph_bakes_a_size_cannot_be_traced_or_would_run_code(source):
    assert apply_move(to_modelnew(source), "graph_rewrite", ALL) is None


def test_not_applicable_when_nothing_matches():
    plain = GEMM_CHAIN.replace("x = torch.sum(x, dim=1, keepdim=True)", "x = torch.relu(x)")
    plain = plain.replace("x = x / 2 + r * self.scale - 0.25", "x = torch.tanh(x) + r")
    out = apply_move(to_modelnew(plain), "graph_rewrite", {"passes": ["linear_reduction"]})
    assert out is None


def test_bad_params_are_rejected():
    with pytest.raises(ValueError):
        apply_move(to_modelnew(GEMM_CHAIN), "graph_rewrite", {"passes": ["nope"]})


SPLIT_GELU = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x, gate):
        inner = 0.7978845608 * (x + 0.044715 * x * x * x)
        g = 0.5 * x * (1.0 + torch.tanh(inner))
        return g * (gate * torch.sigmoid(gate))

def get_inputs():
    return [torch.randn(64, 32), torch.randn(64, 32)]

def get_init_inputs():
    return []
'''


def test_hand_written_activations_are_recognised_by_value_in_any_spelling():
    out = apply_move(to_modelnew(SPLIT_GELU), "graph_rewrite", {"passes": ["activations"]})
    assert out is not None
    assert "gelu(x, approximate='tanh')" in out and "silu(gate)" in out and "tanh" not in out.split("gelu")[1]
    _same_values(SPLIT_GELU, out)


def test_a_near_miss_is_not_taken_for_an_activation():
    erf_like = SPLIT_GELU.replace("0.044715", "0.05")  # not a GELU any more
    out = apply_move(to_modelnew(erf_like), "graph_rewrite", {"passes": ["activations"]})
    assert out is None or "gelu" not in out


def test_the_tail_after_the_last_gemm_is_compiled_alone():
    src = to_modelnew(GEMM_CHAIN)
    out = apply_move(src, "compile_epilogue", {})
    assert out is not None
    assert "self._epilogue_compiled = torch.compile(self._epilogue" in out
    forward = out[out.index("def forward"):out.index("def _epilogue")]
    assert "self.linear(x)" in forward and "logsumexp" not in forward
    no_tail = GEMM_CHAIN.replace('''        x = x / 2 + r * self.scale - 0.25
        x = torch.sum(x, dim=1, keepdim=True)
        x = torch.max(x, dim=1, keepdim=True)[0]
        return torch.logsumexp(x, dim=1, keepdim=True)''', "        return x")
    assert apply_move(to_modelnew(no_tail), "compile_epilogue", {}) is None
