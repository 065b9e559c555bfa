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
