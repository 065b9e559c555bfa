"""Split accumulators in the generated row reductions (``transforms/cpp/reduce.py``, the ``lanes``
knob) and the exp-free erf (``math.py``, the ``erf`` knob): what the kernel text says, the erf's
stated error bound, and sampled points of both knobs, built together in ONE extension (the session's:
tests/agents/cpp_combined.py), computing
what the reference computes at the campaign's tolerance and vectorising (the compiler's report)."""

from __future__ import annotations

import ctypes
import itertools
import random
import shutil
import subprocess

import pytest
import torch

from arbor.agents.transforms import apply_move, to_modelnew
from arbor.agents.transforms.cpp import generate
from arbor.agents.transforms.cpp.math import MATH
from arbor.agents.transforms.cpp.schedule import DEFAULTS, KNOBS, VALUES, kernel_of, read, validate
from arbor.agents.transforms.cpp.source import FLAGS

from tests.agents.test_cpp_schedule import _HEAD, LAYERNORM, SOFTMAX, check_built_cases, needs_cxx

LOG_SOFTMAX = SOFTMAX.replace("torch.softmax(x, dim=1)", "torch.log_softmax(x, dim=1)")
GELU_ERF = _HEAD + '''    def forward(self, x):
        return torch.nn.functional.gelu(x * 3.0)  # reaches erf's clamp and its tails

def get_inputs():
    return [torch.randn(19, 1037)]

def get_init_inputs():
    return []
'''
ROW_SUM = _HEAD + '''    def forward(self, x):
        return torch.sum(x, dim=1)

def get_inputs():
    return [torch.randn(11, 3001)]

def get_init_inputs():
    return []
'''
# LayerNorm written op by op on rows whose mean (10) is large against their spread (1): computed
# with the textbook E[x^2] - E[x]^2 (float32, 64 lanes) its outputs are off by ~1.3e-4, past the
# tolerance; with the shifted sums of the onepass point (onepass.py) by ~8e-6, with two passes
# ~4e-6. 1537: not a multiple of any lane count.
LAYERNORM_OFFSET = _HEAD + '''    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(1537))
        self.bias = nn.Parameter(torch.randn(1537))

    def forward(self, x):
        mean = x.mean(dim=-1, keepdim=True)
        centered = x - mean
        var = (centered * centered).mean(dim=-1, keepdim=True)
        return centered / torch.sqrt(var + 1e-5) * self.weight + self.bias

def get_inputs():
    return [torch.randn(13, 1537) + 10.0]

def get_init_inputs():
    return []
'''
RMSNORM = _HEAD + '''    def __init__(self):
        super().__init__()
        self.norm = nn.RMSNorm(777, eps=1e-6)

    def forward(self, x):
        return self.norm(x)

def get_inputs():
    return [torch.randn(9, 777)]

def get_init_inputs():
    return []
'''
PROBLEMS = {"softmax": SOFTMAX, "log_softmax": LOG_SOFTMAX, "layernorm": LAYERNORM, "sum": ROW_SUM,
            "gelu_erf": GELU_ERF, "layernorm_offset": LAYERNORM_OFFSET}
# points every run builds, beside the sampled ones: both forms of the variance, split or not
FIXED = {"layernorm_offset": ({"onepass": 0}, {"lanes": 0}, {"lanes": 16})}


def _points(kernel: str) -> list[dict]:
    """Every admitted point that sets only knobs ``kernel`` reads."""
    knobs = read(kernel)[0]
    out = []
    for values in itertools.product(*(VALUES[k] for k in KNOBS)):
        point = dict(zip(KNOBS, values))
        try:
            validate(point)
        except ValueError:
            continue
        if all(point[k] == DEFAULTS[k] for k in KNOBS if k not in knobs):
            out.append(point)
    return out


def test_lanes_are_read_by_row_reductions_and_erf_by_kernels_calling_it():
    assert {"lanes"} <= set(read(kernel_of(generate(to_modelnew(SOFTMAX))))[0])
    assert "erf" not in read(kernel_of(generate(to_modelnew(SOFTMAX))))[0]
    gelu = generate(to_modelnew(GELU_ERF))
    assert "erf" in read(kernel_of(gelu))[0] and "lanes" not in read(kernel_of(gelu))[0]
    assert apply_move(gelu, "cpp_schedule", {"lanes": 32}) is None  # no reduction to split
    kernel = kernel_of(apply_move(generate(to_modelnew(SOFTMAX)), "cpp_schedule", {"lanes": 32}))
    assert "#define ARBOR_LANES 32" in kernel and "lane_r1[l] =" in kernel
    assert read(kernel_of(generate(to_modelnew(SOFTMAX))))[1]["lanes"] == DEFAULTS["lanes"] > 0  # split by default
    # the pass body is outlined: restrict pointers as parameters, not captured by a lambda
    assert "void arbor_part(float* __restrict__ o, const float* __restrict__ p0" in kernel


def test_the_variance_folds_into_the_first_pass_only_where_it_is_a_centred_sum_of_squares():
    """onepass.py: LayerNorm's three passes over the row become two at ``onepass 1`` (the
    default); softmax, a plain sum and RMSNorm have no such pass and do not read the knob."""
    for problem in (LAYERNORM, LAYERNORM_OFFSET):
        kernel = kernel_of(generate(to_modelnew(problem)))
        assert "onepass" in read(kernel)[0] and read(kernel)[1]["onepass"] == 1
        one = kernel.split("#if ARBOR_ONEPASS")[1].split("#else", 1)[0]
        assert one.count("for (; c0 + ARBOR_LANES <= R; c0 += ARBOR_LANES)") == 1
        assert "_s1[l] +=" in one and "_s2[l] +=" in one
    for problem in (SOFTMAX, ROW_SUM, RMSNORM):
        kernel = kernel_of(generate(to_modelnew(problem)))
        assert "onepass" not in read(kernel)[0] and "ARBOR_ONEPASS 1" in kernel
        assert apply_move(generate(to_modelnew(problem)), "cpp_schedule", {"onepass": 0}) is None


_ERF_ABI = r'''
extern "C" void run(const float* x, float* y, long n) { for (long i = 0; i < n; ++i) y[i] = arbor_erf(x[i]); }
'''


def test_the_exp_free_erf_keeps_its_stated_bound(tmp_path):
    """math.py states 4.3e-7 absolute (float32); checked here against double erf, with the edges."""
    if shutil.which("c++") is None:
        pytest.skip("no C++ compiler")
    (tmp_path / "e.cpp").write_text("#define ARBOR_ERF 1\n" + MATH.replace("#include <ATen/Parallel.h>", "") + _ERF_ABI)
    subprocess.run(["c++", *FLAGS, "-shared", "-fPIC", str(tmp_path / "e.cpp"), "-o", str(tmp_path / "e.so")],
                   check=True)
    lib = ctypes.CDLL(str(tmp_path / "e.so"))
    g = torch.Generator().manual_seed(7)
    x = torch.cat([torch.empty(400_000).uniform_(-6.0, 6.0, generator=g),
                   torch.tensor([0.0, -0.0, 1e-30, -1e-30, 3.92, -3.92, 4.0, 50.0, -50.0, float("inf"), float("-inf")])])
    y = torch.empty_like(x)
    lib.run(ctypes.c_void_p(x.data_ptr()), ctypes.c_void_p(y.data_ptr()), ctypes.c_long(x.numel()))
    assert (y.double() - torch.erf(x.double())).abs().max() < 4.5e-7
    nan = torch.tensor([float("nan")])
    lib.run(ctypes.c_void_p(nan.data_ptr()), ctypes.c_void_p(y.data_ptr()), ctypes.c_long(1))
    assert y[0].isnan()


def cases() -> list[tuple[str, str]]:
    """(problem name, candidate source): two sampled points of each problem's knobs, its default
    point, and the points FIXED names (LayerNorm on rows of mean 10: onepass off, lanes 0 and 16)."""
    rng = random.Random(4141)
    out = []
    for name, problem in PROBLEMS.items():
        base = generate(to_modelnew(problem))
        pool = [p for p in _points(kernel_of(base)) if p != DEFAULTS]
        out += [(name, apply_move(base, "cpp_schedule", p)) for p in rng.sample(pool, 2)]
        out += [(name, base)] + [(name, apply_move(base, "cpp_schedule", p)) for p in FIXED.get(name, ())]
    return out


@needs_cxx
@pytest.mark.slow  # the session's one load_inline build (tests/agents/conftest.py)
def test_sampled_lanes_and_erf_points_match_the_reference_and_vectorise(cpp_build):
    check_built_cases(cpp_build["reduce"], PROBLEMS)
