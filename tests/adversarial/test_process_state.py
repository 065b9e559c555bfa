"""Process-wide state the candidate sets never reaches the reference: the harness runs every
reference call under the state it snapshotted before the candidate was imported. The thread count
is the candidate's to choose (``set_threads`` is one of Arbor's own moves), so it is isolated
rather than flagged: here a reference whose output *is* its thread count proves which one it ran with."""

from __future__ import annotations

from arbor.sandbox.kernel_protocol import KernelRequest, measure_kernels
from arbor.sandbox.local_runner import LocalRunner

from .corpus import FAST

PROBLEM = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x * float(torch.get_num_threads())


def get_inputs():
    return [torch.randn(256, 1024)]


def get_init_inputs():
    return []
'''

ONE_THREAD = '''
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        torch.set_num_threads(1)

    def forward(self, x):
        return x * {threads}
'''


def test_reference_runs_with_the_campaigns_threads_whatever_the_candidate_set():
    ok, wrong = measure_kernels(LocalRunner(), [
        KernelRequest(PROBLEM, ONE_THREAD.format(threads="2.0"), **{**FAST, "num_threads": 2}),
        KernelRequest(PROBLEM, ONE_THREAD.format(threads="1.0"), **{**FAST, "num_threads": 2}),
    ])
    assert (ok.status, ok.error_class) == ("ok", None), ok.error_text
    assert wrong.error_class == "incorrect", wrong.error_text


ALLOCATOR = '''
import os, sys
import torch
sys.path.insert(0, {harness!r})
import process_state as ps

guard = ps.StateGuard()
assert not torch.cuda.is_initialized(), "capturing the allocator state started CUDA"
torch._C._accelerator_setAllocatorSettings("garbage_collection_threshold:0.01")
os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
torch._C._set_default_mobile_cpu_allocator()
flagged = guard.flagged()
with guard.reference():
    inside = ps.changes(guard.pristine, ps.capture())
del torch._C._accelerator_getAllocatorSettings  # a torch build without the API
fresh = ps.StateGuard()
print(repr((flagged, inside, "allocator_settings" in fresh.pristine, fresh.flagged())))
'''


def test_allocator_settings_are_flagged_by_name_and_kept_from_the_reference():
    """Allocator behaviour is process-wide: a candidate that changes it (settings, the allocator's
    environment variables, the CPU allocator itself) is named, the reference runs under the
    settings it had, and a torch build lacking a getter only drops that switch."""
    import subprocess
    import sys
    from pathlib import Path

    harness = str(Path(__file__).parents[2] / "sandbox" / "harness")
    out = subprocess.run([sys.executable, "-c", ALLOCATOR.format(harness=harness)], capture_output=True,
                         text=True, timeout=120, env={k: v for k, v in __import__("os").environ.items()
                                                      if "ALLOC_CONF" not in k})
    assert out.returncode == 0, out.stderr
    flagged, inside, still_there, rest = eval(out.stdout)
    assert [f.split(":")[0] for f in flagged] == ["allocator_settings", "cpu_mobile_allocator",
                                                 "env PYTORCH_CUDA_ALLOC_CONF"], flagged
    assert inside == []
    assert not still_there and rest == []
