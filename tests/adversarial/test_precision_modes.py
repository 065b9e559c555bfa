"""Precision modes through the real guard and harness (on the CPU, where the switches can be set).

In fp32 mode no candidate may lower precision: TF32 and reduced-precision reductions are
``hack_suspected`` however they are set — process-wide, or inside forward and put back before it
returns. In bf16 mode TF32 is no lower than the mode's own precision and is the candidate's choice;
the reference still runs under the switches it had. Tolerances are KernelBench's per mode.
"""

from __future__ import annotations

import pytest

from arbor.agents.critic.critic import HeuristicCritic
from arbor.agents.critic.gates import CriticConfig
from arbor.sandbox.kernel.protocol import KernelRequest, measure_kernels
from arbor.sandbox.runners.local import LocalRunner

PROBLEM = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(64, 64) / 8)

    def forward(self, x):
        return x @ self.w


def get_inputs():
    return [torch.randn(128, 64)]


def get_init_inputs():
    return []
'''
CANDIDATE = '''
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(64, 64) / 8)
{init}
    def forward(self, x):
{body}
'''
TF32_IN_FORWARD = '''        previous = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = True
        try:
            return x @ self.w
        finally:
            torch.backends.cuda.matmul.allow_tf32 = previous'''
FLAGS_IN_FORWARD = '''        with torch.backends.cudnn.flags(enabled=True, allow_tf32=False):
            torch.set_float32_matmul_precision("high")
            y = x @ self.w
            torch.set_float32_matmul_precision("highest")
        return y'''
PLAIN = "        return x @ self.w"
TF32_IN_INIT = "        torch.backends.cuda.matmul.allow_tf32 = True"
BF16_MATMUL_IN_FORWARD = '''        torch.set_float32_matmul_precision("medium")
        y = x @ self.w
        torch.set_float32_matmul_precision("highest")
        return y'''
FP16_ACCUMULATION_IN_FORWARD = '''        torch.backends.cuda.matmul.allow_fp16_accumulation = True
        y = x @ self.w
        torch.backends.cuda.matmul.allow_fp16_accumulation = False
        return y'''
# off by 0.3% of each value: inside bf16's 1e-2, far outside fp32's 1e-4
NOISY = "        return (x @ self.w) * 1.003"

FAST = dict(warmup_s=0.02, time_budget_s=0.1, min_repeats=4, max_repeats=20, min_sample_s=1e-3, num_threads=1,
            timeout_s=120, seeds=[0, 1, 2])
CASES = {  # name: (init, body, {precision: expected error class (None: accepted)})
    "tf32-in-forward": ("", TF32_IN_FORWARD, {"fp32": "hack_suspected", "bf16": None}),
    "matmul-precision-in-forward": ("", FLAGS_IN_FORWARD, {"fp32": "hack_suspected", "bf16": None}),
    "tf32-process-wide": (TF32_IN_INIT, PLAIN, {"fp32": "hack_suspected", "bf16": None}),
    # bf16 (7 mantissa bits) is below fp16 (10): only bf16 mode allows it
    "bf16-matmul-in-forward": ("", BF16_MATMUL_IN_FORWARD, {"fp32": "hack_suspected", "fp16": "hack_suspected",
                                                             "bf16": None}),
    "fp16-accumulation": ("", FP16_ACCUMULATION_IN_FORWARD, {"fp32": "hack_suspected", "fp16": None}),
    "noisy": ("", NOISY, {"fp32": "incorrect", "bf16": None}),
}
DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}


@pytest.fixture(scope="module")
def measured() -> dict:
    """Every case in every mode it names, in one batched harness job."""
    keys, reqs = [], []
    for name, (init, body, expected) in CASES.items():
        for mode in expected:
            keys.append((name, mode))
            reqs.append(KernelRequest(PROBLEM, CANDIDATE.format(init=init, body=body), dtype=DTYPES[mode], **FAST))
    return dict(zip(keys, measure_kernels(LocalRunner(), reqs)))


@pytest.mark.parametrize("name, mode", [(n, m) for n, (_i, _b, e) in CASES.items() for m in e])
def test_the_harness_judges_precision_switches_by_the_mode(measured, name, mode):
    m = measured[(name, mode)]
    want = CASES[name][2][mode]
    assert m.error_class == want, (m.status, m.error_text)
    assert m.fingerprint.get("precision") == mode  # every result names its mode
    if want is None:
        assert m.status == "ok" and m.candidate_samples


def test_the_in_forward_probe_names_the_switch(measured):
    text = measured[("tf32-in-forward", "fp32")].error_text
    assert "during forward" in text and "cuda_matmul_allow_tf32" in text


@pytest.mark.parametrize("name, mode", [(n, m) for n, (_i, _b, e) in CASES.items() for m in e if n != "noisy"])
def test_the_guard_agrees_before_anything_runs(name, mode):
    init, body, expected = CASES[name]
    source = CANDIDATE.format(init=init, body=body)
    j = HeuristicCritic(CriticConfig()).static_check(source, frozenset(), mode)
    assert (j.diagnosis if j else None) == expected[mode], j and j.reason
