"""The measurement process serves every tensor alike: no mmap-per-call, whatever ran before.

glibc's dynamic mmap threshold made one reference 7x faster in some harness processes than in
others (sandbox/harness/allocator.py). These tests check the mechanism, not a timing: glibc's own
count of mmapped blocks (``mallinfo2().hblks``) after a 40 MB allocation, which is above the largest
threshold glibc ever moves to, so unpinned it is always mmapped.
"""

from __future__ import annotations

import platform
import subprocess
import sys
from pathlib import Path

import pytest

from arbor.sandbox.kernel.protocol import KernelRequest, measure_kernel, measure_kernels
from arbor.sandbox.runners.local import LocalRunner

pytestmark = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="the pinning is glibc's mallopt")

ALLOCATOR = Path(__file__).parents[2] / "sandbox" / "harness" / "allocator.py"
DATA = Path(__file__).parent / "data"
PROBLEM = (DATA / "gelu_problem.py").read_text()
FAST = dict(time_budget_s=0.3, warmup_s=0.05, min_repeats=5, num_threads=1, timeout_s=60)

_MALLINFO = '''
import ctypes
class _MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd",
                                                "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]
_libc = ctypes.CDLL("libc.so.6")
_libc.mallinfo2.restype = _MallInfo2
def mmapped_blocks():
    return _libc.mallinfo2().hblks
'''


def _probe(pin: bool) -> tuple[str, int]:
    code = f'''
import importlib.util, sys
spec = importlib.util.spec_from_file_location("allocator", {str(ALLOCATOR)!r})
mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
answer = mod.pin() if {pin} else "unpinned"
{_MALLINFO}
before = mmapped_blocks()
block = bytearray(40 << 20)
print(answer, mmapped_blocks() - before)
'''
    out = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, check=True)
    answer, grown = out.stdout.rsplit(" ", 1)
    return answer, int(grown)


def test_pinning_keeps_large_blocks_out_of_mmap():
    assert _probe(pin=False) == ("unpinned", 1)  # the control: glibc mmaps a 40 MB block
    answer, grown = _probe(pin=True)
    assert answer == "glibc:no-mmap,no-trim" and grown == 0


# Correct only when the 40 MB tensor the forward allocates is not an mmapped block: the harness
# itself (single job or forked batch child) must have pinned the allocator before torch ran.
_CHECKING = f'''import torch
import torch.nn as nn
{_MALLINFO}

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        before = mmapped_blocks()
        big = torch.empty(10_000_000)
        grown = mmapped_blocks() - before
        del big
        return torch.nn.functional.gelu(x, approximate="tanh") + grown
'''


def test_every_measurement_process_runs_pinned():
    single = measure_kernel(LocalRunner(), KernelRequest(PROBLEM, _CHECKING, **FAST))
    (batched,) = measure_kernels(LocalRunner(), [KernelRequest(PROBLEM, _CHECKING, **FAST)])
    for m in (single, batched):
        assert m.status == "ok", m.error_text
        assert m.fingerprint["host_allocator"] == "glibc:no-mmap,no-trim"
