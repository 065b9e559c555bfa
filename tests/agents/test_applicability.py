"""A move that re-states how the campaign already runs, or uses more threads than it measures
with, is never offered to the search."""

from __future__ import annotations

from pathlib import Path

from arbor.agents.skills import load_skills
from arbor.spec import load_spec
from arbor.targets.kernel import KernelAdapter

REPO = Path(__file__).resolve().parents[2]


def _thread_moves(num_threads: int | None) -> set[str]:
    spec = load_spec(REPO / "campaigns" / "quickstart.yaml")
    spec = spec.model_copy(update={"target": spec.target.model_copy(update={"num_threads": num_threads})})
    moves = KernelAdapter(spec).moves(load_skills())
    return {m.id for m in moves if m.transform == "set_threads"}


def test_threads_move_equal_to_the_campaigns_thread_count_is_not_proposed():
    assert _thread_moves(None) >= {"threads-1", "threads-2"}
    assert "threads-2" not in _thread_moves(2) and "threads-1" in _thread_moves(2)


def test_threads_move_above_the_campaigns_thread_budget_is_not_proposed():
    """A one-thread campaign (the suite's protocol) gets no two-thread candidate: it would be timed
    on two cores against a reference on one."""
    assert _thread_moves(1) == set()
    assert _thread_moves(4) >= {"threads-1", "threads-2"}


def test_a_generated_cpp_kernel_is_offered_only_on_the_cpu_with_its_toolchain(tmp_path):
    from arbor.agents.specialists.applicability import cannot_run, cpp_toolchain

    move = next(m for s in load_skills() for m in s.moves if m.transform == "cpp_codegen")
    assert cannot_run(move, "cuda:0", {"PATH": "/usr/bin"})  # it computes CPU tensors only
    assert cannot_run(move, "cpu", {"PATH": str(tmp_path), "CXX": "no-such-compiler"})
    import os

    assert cannot_run(move, "cpu", dict(os.environ)) is not cpp_toolchain(dict(os.environ))
