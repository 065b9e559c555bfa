"""Moves that cannot change anything in a campaign's context are never proposed.

A transform decides from the source alone whether it applies; some moves are no-ops only given
how the campaign runs. ``set_threads`` with the thread count the harness already sets for every
measurement (``target.num_threads``) re-states the setting: measuring it spends a run to learn
that the same program runs as fast as itself, and a lucky draw could even "accept" it. One with
*more* threads than that is out of the campaign's budget: ``num_threads`` is the hardware the
reference is measured on, and a candidate timed on two cores against a reference on one reports a
speedup no kernel change made (seen: ``threads-2`` "won" 1.5x on ReLU once the second core fell
idle, and lost 0.78x while it was busy).

A generated Triton kernel (``triton_codegen``) runs on a CUDA device; on the CPU it runs only
through Triton's interpreter, which Arbor's own environment switches on (``TRITON_INTERPRET=1``,
passed to the job by the runner; a test setting). Without it the candidate cannot run at all:
proposing it would spend a measurement on a certain ``runtime_error``.

A generated C++ kernel (``cpp_codegen``) computes CPU tensors only, and is built when the
candidate is imported (``load_inline``: a C++ compiler and ninja); without either every candidate
would be a ``compile_error``.
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
from collections.abc import Mapping

from arbor.agents.skills import MoveSpec


def is_noop(move: MoveSpec, num_threads: int | None) -> bool:
    """True when ``move`` re-states what the campaign already does for every measurement."""
    return (move.transform == "set_threads" and num_threads is not None
            and move.params.get("threads") == num_threads)


def over_budget(move: MoveSpec, num_threads: int | None) -> bool:
    """True when ``move`` would use more intra-op threads than the campaign measures with."""
    threads = move.params.get("threads")
    return (move.transform == "set_threads" and num_threads is not None and isinstance(threads, int)
            and threads > num_threads)


def cannot_run(move: MoveSpec, device: str | None, env: Mapping[str, str] | None = None) -> bool:
    """True when ``move``'s candidate cannot run on ``device``: a generated Triton kernel on the
    CPU without Triton's interpreter; a generated C++ kernel off the CPU, or with no toolchain."""
    env = os.environ if env is None else env
    kind = (device or "").split(":", 1)[0].strip().lower()
    if move.transform in ("cpp_codegen", "cpp_schedule"):
        return kind != "cpu" or not cpp_toolchain(env)
    return move.transform in ("triton_codegen", "triton_schedule") and kind == "cpu" \
        and env.get("TRITON_INTERPRET") != "1"


def cpp_toolchain(env: Mapping[str, str]) -> bool:
    """A C++ compiler and ninja where a job finds them (its PATH, and the interpreter's own bin
    folder, which the runner puts first: where ``pip install ninja`` puts it), and the Python
    headers the extension's bindings include (a distribution's Python without its -dev package
    has none)."""
    path = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", os.defpath)])
    headers = os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h"))
    return bool(headers and shutil.which(env.get("CXX") or "c++", path=path) and shutil.which("ninja", path=path))


def drop_noops(moves: list[MoveSpec], num_threads: int | None = None, device: str | None = None) -> list[MoveSpec]:
    """The moves that can change something within the campaign's thread budget, on its device."""
    return [m for m in moves if not is_noop(m, num_threads) and not over_budget(m, num_threads)
            and not cannot_run(m, device)]
