"""The generated C++ CPU kernel (``cpp_codegen``): what it emits, its math against torch's, and
both loop shapes built (in one extension: tests/agents/cpp_combined.py) and compared with the reference."""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import types

import pytest
import torch

from arbor.agents.specialists.applicability import cpp_toolchain
from arbor.agents.transforms import apply_move, to_modelnew
from arbor.agents.transforms.cpp import explain, generate
from arbor.agents.transforms.cpp.math import MATH
from arbor.agents.transforms.cpp.source import FLAGS

needs_cxx = pytest.mark.skipif(not cpp_toolchain(os.environ),
                               reason="no C++ compiler, ninja or Python headers (what load_inline needs)")

SOFTMAX = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)

def get_inputs():
    return [torch.randn(64, 4096)]

def get_init_inputs():
    return []
'''

CONV_BIAS = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.bias = nn.Parameter(torch.randn(8, 1, 1))
        self.scale = nn.Parameter(torch.randn(30))

    def forward(self, x):
        x = self.conv(x)
        return torch.tanh(x + self.bias) * self.scale - torch.exp(-x * x)

def get_inputs():
    return [torch.randn(4, 3, 32, 32)]

def get_init_inputs():
    return []
'''


RMS_CHANNELS = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(8, 1, 1))

    def forward(self, x):
        rms = torch.sqrt(torch.mean(x ** 2, dim=1, keepdim=True) + 1e-5)
        return x / rms * self.weight

def get_inputs():
    return [torch.randn(4, 8, 10, 300)]

def get_init_inputs():
    return []
'''


def _kernel(source: str) -> str:
    out = generate(to_modelnew(source))
    start = out.index('_ARBOR_CPP = r"""') + len('_ARBOR_CPP = r"""')
    return out[start:out.index('"""', start)]


def test_softmax_computes_each_exponential_once():
    kernel = _kernel(SOFTMAX)
    passes = kernel.split("#pragma omp simd")[1:]
    # max and sum of exponentials (stored), each in split lanes (their lanes then combined
    # pairwise) or one accumulator (its schedule's ``lanes``: reduce.py), then scale: blocked or
    # in place
    assert len(passes) == 8
    assert all("arbor_exp" in p and "o[flat] = v" in p for p in (passes[3], passes[5]))
    assert all("arbor_exp" not in p and "[l + half]" in p for p in (passes[1], passes[4]))
    assert all("arbor_exp" not in p and "= o[flat];" in p for p in passes[6:])


def test_a_broadcast_operand_is_indexed_without_a_division_per_element():
    out = generate(to_modelnew(CONV_BIAS))
    inner = out[out.index("for (int64_t j = 0; j < INNER; ++j)"):]
    inner = inner[:inner.index("o[flat] =")]
    assert "%" not in inner and "/ in" not in inner
    assert "INNER = in0.shape[3:].numel()" in out  # inside the scale's dims, after the bias's


def test_a_reduction_over_channels_keeps_an_accumulator_per_lane():
    """Column mode: the reduced dim in the middle (NCHW channels); each pass is a vectorised loop
    over consecutive inner positions, never a reduction across lanes."""
    kernel = _kernel(RMS_CHANNELS)
    assert "float acc_r" in kernel and "[LANES];" in kernel and "reduction(" not in kernel
    assert "OUTER" in generate(to_modelnew(RMS_CHANNELS)).split("def _arbor_fused")[1]


def test_refusals_say_why():
    double = SOFTMAX.replace("torch.randn(64, 4096)", "torch.randn(64, 4096, dtype=torch.float64)")
    assert "float32" in explain(to_modelnew(double))
    assert apply_move(to_modelnew(double), "cpp_codegen", {}) is None
    with pytest.raises(ValueError):
        apply_move(to_modelnew(SOFTMAX), "cpp_codegen", {"block": 4})


# --------------------------------------------------------------------------- the math, compiled

_MATH_ABI = r'''
extern "C" void run(int which, const float* x, float* y, long n) {
  for (long i = 0; i < n; ++i) {
    switch (which) {
      case 0: y[i] = arbor_exp(x[i]); break;
      case 1: y[i] = arbor_log(x[i]); break;
      case 2: y[i] = arbor_sigmoid(x[i]); break;
      case 3: y[i] = arbor_erf(x[i]); break;
    }
  }
}
'''


@pytest.fixture(scope="module")
def math_lib(tmp_path_factory):
    if shutil.which("c++") is None:
        pytest.skip("no C++ compiler")
    d = tmp_path_factory.mktemp("math")
    (d / "m.cpp").write_text(MATH.replace("#include <ATen/Parallel.h>", "") + _MATH_ABI)
    subprocess.run(["c++", *FLAGS, "-shared", "-fPIC", str(d / "m.cpp"), "-o", str(d / "m.so")], check=True)
    return ctypes.CDLL(str(d / "m.so"))


def _run(lib, which: int, x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous().float()
    y = torch.empty_like(x)
    lib.run(which, ctypes.c_void_p(x.data_ptr()), ctypes.c_void_p(y.data_ptr()), ctypes.c_long(x.numel()))
    return y


EDGES = [float("-inf"), float("inf"), float("nan"), 0.0, -0.0, 1e-45, 1e-40, 1.17549435e-38, -1.0,
         -87.3, -87.4, -100.0, 88.7, 88.8, 1e30]


@pytest.mark.parametrize("which,fn,lo,hi", [(0, torch.exp, -87.0, 88.0), (1, torch.log, 1e-30, 1e30),
                                            (2, torch.sigmoid, -60.0, 60.0), (3, torch.erf, -6.0, 6.0)])
def test_the_vector_math_matches_torch(math_lib, which, fn, lo, hi):
    g = torch.Generator().manual_seed(which)
    if which == 1:  # log: spread over the exponents
        x = torch.exp(torch.empty(200_000).uniform_(-69.0, 69.0, generator=g))
    else:
        x = torch.empty(200_000).uniform_(lo, hi, generator=g)
    want, got = fn(x.double()), _run(math_lib, which, x).double()
    if which == 3:  # erf: absolute error (A&S 7.1.26: 1.5e-7, plus float32 rounding)
        assert (got - want).abs().max() < 6e-7
    else:
        assert ((got - want).abs() / want.abs().clamp_min(1e-30)).max() < 5e-7
    edges = torch.tensor(EDGES)
    want, got = fn(edges.double()).float(), _run(math_lib, which, edges)
    same = (got == want) | (got.isnan() & want.isnan()) | ((got - want).abs() <= 1.5e-38 + 5e-7 * want.abs())
    assert bool(same.all()), list(zip(EDGES, got.tolist(), want.tolist()))


# --------------------------------------------------------------------------- real builds

def _module(source: str, name: str) -> types.ModuleType:
    mod = types.ModuleType(name)
    exec(compile(source, name, "exec"), mod.__dict__)  # noqa: S102 - generated by the move under test
    return mod


BUILT = {"flat-broadcast": CONV_BIAS, "column": RMS_CHANNELS}  # a row chain: the sandbox test


def cases() -> list[tuple[str, str]]:
    """(loop shape, candidate source) for the session's one build (tests/agents/conftest.py)."""
    return [(name, generate(to_modelnew(p))) for name, p in BUILT.items()]


@pytest.fixture(scope="module")
def built(cpp_build) -> dict:
    """Both loop shapes' candidates, their kernels built in the session's ONE extension (a build is
    ~60 s of CPU here, nearly all of it torch's headers): ``cpp_combined``."""
    build = cpp_build["codegen"]
    return {name: build.bind(i) for i, (name, _) in enumerate(build.cases)}


@needs_cxx
@pytest.mark.slow  # the session's one load_inline build (on workers, its group starts first)
@pytest.mark.parametrize("name", list(BUILT))
def test_the_built_kernel_matches_the_reference(name, built):
    problem, cand = BUILT[name], built[name]
    ref = _module(problem, "ref")
    torch.manual_seed(0)
    a = ref.Model(*ref.get_init_inputs())
    b = cand.ModelNew(*ref.get_init_inputs())
    b.load_state_dict(a.state_dict())
    with torch.no_grad():
        for threads in (1, 2):
            torch.set_num_threads(threads)
            x = ref.get_inputs()
            torch.testing.assert_close(b(*x), a(*x), rtol=1e-4, atol=1e-5)
    # no path back to torch's ops: a tensor the kernel does not compute is an error
    with pytest.raises(RuntimeError, match="float32 CPU tensors only"):
        operands = (torch.randn(4, 8, 30, 30), b.bias, b.scale) if problem is CONV_BIAS else (x[0], b.weight)
        cand._arbor_fused(*[t.double() for t in operands])
