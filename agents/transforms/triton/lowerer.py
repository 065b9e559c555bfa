"""What an op's lowering may ask while it turns one FX node into plan values.

Its own module so that the op table (``ops.py``) and the reduction lowerings (``reductions.py``)
both depend on it and not on each other: a lowering sees its node's arguments as plan values and
the plan itself, nothing of the region matcher that drives it (``region.py``).
"""

from __future__ import annotations

from typing import Callable

from ..graph.nodes import arg, is_number, op_name
from .plan import Plan, Unsupported, literal

__all__ = ["Lowerer"]


class Lowerer:
    """What an op's lowering may ask: its arguments as plan values, and the plan itself.

    ``value_of(x)`` gives the plan name of a region node, loads an external tensor (an FX node
    outside the region, or a parameter path such as ``ln.weight``) as an operand, or spells a
    Python number as a literal.
    """

    def __init__(self, plan: Plan, gm, value_of: Callable[[object], str]):  # type: ignore[no-untyped-def]
        self.plan, self.gm, self.value_of = plan, gm, value_of

    def tensor(self, node, index: int, name: str) -> str:  # type: ignore[no-untyped-def]
        x = arg(node, index, name)
        if x is None or is_number(x):
            raise Unsupported(f"{op_name(node)}: {name} must be a tensor")
        return self.value_of(x)

    def scalar_or_tensor(self, x) -> str:  # type: ignore[no-untyped-def]
        if isinstance(x, bool):
            raise Unsupported("a boolean operand")
        return literal(x) if is_number(x) else self.value_of(x)
