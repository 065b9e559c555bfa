"""Honest code must never read as a cheat. Code objects compare equal by *content* (name, first
line, bytecode), so a candidate method that is textually the reference's at the same line is
``==`` to it: the "calls the reference" defence must test identity, or the baseline of a compactly
written problem and an honest one-line edit are flagged ``hack_suspected``."""

from __future__ import annotations

import pytest

from arbor.agents.transforms import apply_move, to_modelnew
from arbor.sandbox.kernel.protocol import KernelRequest, measure_kernels
from arbor.sandbox.runners.local import LocalRunner

from .corpus import FAST, HERE, problem_source


def _methods(source: str, cls: str) -> dict:
    ns: dict = {}
    exec(compile(source, "<x>", "exec"), ns)  # noqa: S102  trusted test fixtures
    return {k: v.__code__ for k, v in vars(ns[cls]).items() if hasattr(v, "__code__")}


CUSTOM_OP = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


@torch.library.custom_op("arbor_ff::gated_act", mutates_args=())
def gated_act(x: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
    return F.gelu(x, approximate="tanh") * F.silu(gate)


def prepared(scale: float) -> torch.Tensor:
    return torch.tensor(scale)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.one = prepared(1.0)  # a helper that runs once, at construction

    def forward(self, x, gate):
        return gated_act(x, gate) * self.one
'''


def _honest(name: str) -> str:
    return (HERE / "honest" / f"{name}.py").read_text()


def test_the_premise_equal_code_objects_from_different_sources():
    """Without this the regression tests below could not fail."""
    ref = _methods(problem_source("helper"), "Model")
    new = _methods(_honest("one_line_edit"), "ModelNew")
    assert ref["scale"] == new["scale"] and ref["scale"] is not new["scale"]
    compact = problem_source("compact")
    assert _methods(compact, "Model")["forward"] == _methods(to_modelnew(compact), "ModelNew")["forward"]


@pytest.fixture(scope="module")
def measured():
    compact = problem_source("compact")
    reqs = {
        "compact_baseline": KernelRequest(compact, to_modelnew(compact), **FAST),
        "one_line_edit": KernelRequest(problem_source("helper"), _honest("one_line_edit"), **FAST),
        "threads_move": KernelRequest(problem_source("helper"), apply_move(
            to_modelnew(problem_source("helper")), "set_threads", {"threads": 2}), **FAST),
        "custom_op_that_runs": KernelRequest(problem_source("act"), CUSTOM_OP, **FAST),
    }
    return dict(zip(reqs, measure_kernels(LocalRunner(), list(reqs.values()))))


@pytest.mark.parametrize("name", ["compact_baseline", "one_line_edit", "threads_move", "custom_op_that_runs"])
def test_honest_candidate_is_not_flagged(name, measured):
    m = measured[name]
    assert (m.status, m.error_class) == ("ok", None), m.error_text


def test_a_helper_run_only_at_construction_is_reported_not_flagged(measured):
    """Reward hack #15 flags custom kernels that never run; a plain helper is only named."""
    assert measured["custom_op_that_runs"].stats["not_run_in_forward"] == ["prepared"]
