"""``triton_schedule``: a generated Triton candidate at another launch schedule — the block, the
warps and the software-pipelining stages its launcher passes (the GPU counterpart of
``cpp/schedule.py``; docs/architecture.md#skills).

``triton_codegen`` fixes them when it writes the kernel; which ones win depends on the board and
the row length. They live in the launcher (``source.launcher_source``: ``BLOCK = ...`` and the
launch's ``num_warps=``), not in the kernel, so a point is a rewrite of two lines of the
generated candidate: each point is a child of the candidate it refines, and the kernel's logic
(tested once per block shape through the interpreter) is unchanged. A block is still capped by
the row (the launcher's ``min(block, next_power_of_2(R))``), so no point reads past a row.
"""

from __future__ import annotations

import ast

from ..base import find_class, parse, register, render
from .move import BLOCKS, WARPS
from .source import KERNEL, LAUNCHER

KNOBS = ("block", "num_warps", "num_stages")
STAGES = (1, 2, 3, 4, 5)


def validate(params: dict) -> None:
    unknown = set(params) - set(KNOBS)
    if unknown:
        raise ValueError(f"unknown params {sorted(unknown)}; triton_schedule takes {', '.join(KNOBS)}")
    allowed = {"block": BLOCKS, "num_warps": WARPS, "num_stages": STAGES}
    for knob, value in params.items():
        if value not in allowed[knob]:
            raise ValueError(f"{knob} must be one of {allowed[knob]}, got {value!r}")
    if not params:
        raise ValueError("a schedule point sets at least one of block, num_warps, num_stages")


def _launcher(tree: ast.Module) -> ast.FunctionDef | None:
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == LAUNCHER:
            return node
    return None


def _block_constant(fn: ast.FunctionDef) -> ast.Constant | None:
    """The block literal of ``BLOCK = <int>`` or ``BLOCK = max(16, min(<int>, ...))``."""
    for node in fn.body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["BLOCK"]:
            for sub in ast.walk(node.value):
                if isinstance(sub, ast.Constant) and isinstance(sub.value, int) and sub.value in BLOCKS \
                        and (sub is node.value or _is_min_arg(node.value, sub)):
                    return sub
    return None


def _is_min_arg(expr: ast.expr, const: ast.Constant) -> bool:
    return any(isinstance(c, ast.Call) and getattr(c.func, "id", None) == "min" and c.args and c.args[0] is const
               for c in ast.walk(expr))


def _launch(fn: ast.FunctionDef) -> ast.Call | None:
    for sub in ast.walk(fn):
        if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Subscript) \
                and getattr(sub.func.value, "id", None) == KERNEL:
            return sub
    return None


def reschedule(source: str, params: dict) -> str | None:
    """The candidate with its launcher at ``params``; None when it holds no generated Triton
    launcher or is at that point already."""
    tree = parse(source)
    fn = _launcher(tree) if tree is not None and find_class(tree) is not None else None
    launch = _launch(fn) if fn is not None else None
    block = _block_constant(fn) if fn is not None else None
    if launch is None or block is None:
        return None
    changed = False
    if "block" in params and block.value != params["block"]:
        block.value, changed = int(params["block"]), True
    for knob in ("num_warps", "num_stages"):
        if knob not in params:
            continue
        kw = next((k for k in launch.keywords if k.arg == knob), None)
        if kw is None:
            launch.keywords.append(ast.keyword(arg=knob, value=ast.Constant(int(params[knob]))))
            changed = True
        elif not (isinstance(kw.value, ast.Constant) and kw.value.value == params[knob]):
            kw.value, changed = ast.Constant(int(params[knob])), True
    return render(tree) if changed else None


@register("triton_schedule", validate=validate)
def triton_schedule(source: str, params: dict) -> str | None:
    """A generated Triton candidate at another (block, num_warps, num_stages) point."""
    validate(params)
    return reschedule(source, params)
