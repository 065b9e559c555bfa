"""Calls into a candidate's compiled extension are seen by the liveness check (reward hack #15):
a pybind11 module (what ``load_inline`` builds) binds each function's ``__self__`` to its own
function record, not to the module, so the check once saw no call at all and flagged every honest
``load_inline`` candidate ``hack_suspected``."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from arbor.agents.specialists.applicability import cpp_toolchain
from arbor.agents.transforms import to_modelnew
from arbor.agents.transforms.cpp import generate
from arbor.sandbox.kernel.compile_store import CompileCache
from arbor.sandbox.kernel.protocol import KernelRequest, measure_kernel
from arbor.sandbox.runners.local import LocalRunner

HARNESS = Path(__file__).resolve().parents[2] / "sandbox" / "harness"
needs_cxx = pytest.mark.skipif(shutil.which("c++") is None or not os.path.exists(
    os.path.join(sysconfig.get_paths()["include"], "Python.h")), reason="no C++ compiler or Python headers")

TINY = r'''
#include <pybind11/pybind11.h>
static int twice(int x) { return 2 * x; }
PYBIND11_MODULE(arbor_tiny_ext, m) { m.def("twice", &twice); }
'''


def _liveness():
    spec = importlib.util.spec_from_file_location("arbor_test_liveness", HARNESS / "liveness.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@needs_cxx
def test_a_call_into_a_pybind11_extension_counts_as_the_extension_running(tmp_path, monkeypatch):
    from torch.utils.cpp_extension import include_paths

    so = tmp_path / f"arbor_tiny_ext{sysconfig.get_config_var('EXT_SUFFIX')}"
    (tmp_path / "m.cpp").write_text(TINY)
    includes = [f"-I{p}" for p in (*include_paths(), sysconfig.get_paths()["include"])]
    subprocess.run(["c++", "-O0", "-shared", "-fPIC", "-std=c++17", *includes, str(tmp_path / "m.cpp"),
                    "-o", str(so)], check=True)
    monkeypatch.syspath_prepend(str(tmp_path))
    ext = importlib.import_module("arbor_tiny_ext")
    assert ext.twice.__self__ is not ext  # the pybind11 binding this guards against
    live = _liveness()
    assert live._extension(ext)
    called, idle = live.Recorder({"ext": ext}), live.Recorder({"ext": ext})
    assert live._watched(lambda: ext.twice(3), called)
    assert live._watched(lambda: abs(-3), idle)
    assert called.ran(ext) and not idle.ran(ext)
    sys.modules.pop("arbor_tiny_ext", None)


# a row chain through most of the generated math: erf (GELU), the layer norm's two passes, sigmoid,
# then log-softmax's max, sum of exp and log; checked on the harness's five seeds
PROBLEM = '''
import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.ln = nn.LayerNorm(n)

    def forward(self, x):
        x = F.gelu(x)
        x = self.ln(x) * torch.sigmoid(x)
        return torch.log_softmax(x, dim=-1)

def get_inputs():
    return [torch.randn(48, 1000)]

def get_init_inputs():
    return [1000]
'''


@needs_cxx
@pytest.mark.skipif(not cpp_toolchain(os.environ), reason="no C++ compiler, ninja or Python headers")
@pytest.mark.slow  # a load_inline build in the sandbox (41 s on the 2-core CI): on workers, this file starts first
def test_a_generated_cpp_kernel_is_built_checked_and_timed_in_the_sandbox(tmp_path):
    """Built at import in its first measurement; its next measurement (a confirmation) imports the
    extension its first one built, shipped in with the candidate's compile-cache archive, instead
    of building it again (~25 s each on the development machine)."""
    candidate = generate(to_modelnew(PROBLEM))
    req = KernelRequest(PROBLEM, candidate, time_budget_s=0.3, warmup_s=0.05, min_repeats=5, max_repeats=20,
                        num_threads=1, timeout_s=240)
    cache = CompileCache(tmp_path / "cache")
    with LocalRunner() as runner:
        first = measure_kernel(runner, req, cache=cache)
        assert first.error_class is None, first.error_text
        assert "_arbor_fused" not in first.stats["not_run_in_forward"] and first.baseline_samples and first.candidate_samples
        assert first.stats["compile"]["import_s"] > 5.0  # the build happens at import, and is shown as such
        assert first.stats["compile_cache"]["extensions"] == {"built": 1, "loaded": 0}
        again = measure_kernel(runner, req, cache=cache)
    assert again.error_class is None, again.error_text
    assert again.stats["compile_cache"]["extensions"] == {"built": 0, "loaded": 1}
    assert "_arbor_fused" not in again.stats["not_run_in_forward"]  # the loaded kernel is the one timed
    assert again.stats["compile"].get("import_s", 0.0) < first.stats["compile"]["import_s"] / 5  # (none: < 1 s)
