"""The compiler imported ahead in a warm worker (``sandbox/harness/compiler_warm.py``): whatever
the imports captured of the worker's folders is found and made the job's, or the worker is unfit."""

from __future__ import annotations

import secrets
import sys
import types
from pathlib import Path

import pytest

from arbor.sandbox.harness import compiler_warm
from arbor.sandbox.kernel.protocol import KernelRequest, measure_kernel
from arbor.sandbox.runners.local import LocalRunner

@pytest.fixture
def base():
    """A unique folder name, as the warm-up's are (never a literal of this file, which linecache
    and this module's globals hold)."""
    return "/w" + secrets.token_hex(8)


@pytest.fixture
def sentinels(base):
    return {var: f"{base}/sentinel-{var.lower()}" for var in compiler_warm._VARS}


@pytest.fixture
def fake_module(monkeypatch):
    mod = types.ModuleType("arbor_test_fake_compiler")
    monkeypatch.setitem(sys.modules, mod.__name__, mod)
    return mod


def test_paths_captured_from_the_temp_and_home_folders_are_rebound_to_the_jobs(fake_module, sentinels, base,
                                                                                monkeypatch, tmp_path):
    fake_module.HEADER_DIR = f"{base}/sentinel-tmpdir/torchinductor_u/precompiled_headers"
    fake_module.PROFILE = Path(f"{base}/sentinel-tmpdir/profile.json")
    fake_module.VARS = {"userbase": f"{base}/sentinel-home/.local", "other": 3}
    fake_module.UNRELATED = f"{base}/elsewhere"
    leaks, unfit = compiler_warm.captured(sentinels)
    assert unfit is None
    ours = sorted((a, k) for m, a, k, _v in leaks if m == fake_module.__name__)
    assert ours == [("HEADER_DIR", None), ("PROFILE", None), ("VARS", "userbase")]
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setenv("HOME", "/job/home")
    compiler_warm.Warmed(1.0, sentinels, leaks).rebind()
    assert fake_module.HEADER_DIR == f"{tmp_path}/torchinductor_u/precompiled_headers"
    assert fake_module.PROFILE == tmp_path / "profile.json" and isinstance(fake_module.PROFILE, Path)
    assert fake_module.VARS == {"userbase": "/job/home/.local", "other": 3}
    assert fake_module.UNRELATED == f"{base}/elsewhere"


@pytest.mark.parametrize("value, where", [
    ("{}/sentinel-torchinductor_cache_dir/fxgraph", "TORCHINDUCTOR_CACHE_DIR"),  # would be shared by jobs
    (["{}/sentinel-tmpdir/a"], "inside a container"),
    ({"k": ("{}/sentinel-home/x",)}, "inside a container"),
])
def test_a_capture_that_cannot_be_rebound_makes_the_warm_up_unfit(fake_module, sentinels, base, value, where):
    def fill(v):  # type: ignore[no-untyped-def]
        if isinstance(v, str):
            return v.format(base)
        if isinstance(v, dict):
            return {k: fill(x) for k, x in v.items()}
        return type(v)(fill(x) for x in v)

    fake_module.CAPTURED = fill(value)
    _leaks, unfit = compiler_warm.captured(sentinels)
    assert unfit is not None and "arbor_test_fake_compiler.CAPTURED" in unfit and where in unfit


PROBLEM = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return x * 2

def get_inputs():
    return [torch.randn(64)]

def get_init_inputs():
    return []
"""

# Names torch.compile, so its job asks for the compiler extra; asserts at import (a failed
# measurement otherwise) that what Inductor computed at import is under this job's own folders.
PROBE = """
import os, tempfile
import torch
import torch.nn as nn
import torch._inductor.codecache as codecache  # torch.compile's code cache

header_dir = getattr(codecache, "_HEADER_DIR", None)  # torch 2.13: tempfile.gettempdir() at import
assert header_dir is None or header_dir.startswith(tempfile.gettempdir() + os.sep), header_dir

class ModelNew(nn.Module):
    def forward(self, x):
        return x * 2
"""


def test_a_compiled_job_forked_from_a_warmed_worker_sees_its_own_folders():
    """Before the rebinding, a compiled candidate measured without the compile cache (Inductor's
    precompiled header on) failed with PermissionError on the worker's temp folder."""
    with LocalRunner() as runner:
        req = KernelRequest(PROBLEM, PROBE, seeds=[0], warmup_s=0.05, time_budget_s=0.2, min_repeats=3,
                            num_threads=1, timeout_s=120)
        first = measure_kernel(runner, req, cache=None)
        second = measure_kernel(runner, req, cache=None)
        assert first.ok and second.ok, (first.error_text, second.error_text)
        assert "worker_warm_compiler" in first.phase_times and "worker_warm_compiler" not in second.phase_times
