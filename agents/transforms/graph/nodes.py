"""Small readers of torch.fx nodes shared by the graph passes: op names, arguments, shapes."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .trace import shape


def op_name(node) -> str | None:  # type: ignore[no-untyped-def]
    """'sum' for torch.sum, Tensor.sum and x.sum(...); 'mul' for operator.mul; None otherwise."""
    if node.op == "call_method":
        return str(node.target)
    if node.op == "call_function":
        name = getattr(node.target, "__name__", None)
        return {"truediv": "div", "matmul": "matmul"}.get(name, name)
    return None


def arg(node, index: int, name: str, default=None):  # type: ignore[no-untyped-def]
    if len(node.args) > index:
        return node.args[index]
    return node.kwargs.get(name, default)


def is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def dims_of(dim, ndim: int) -> tuple[int, ...] | None:  # type: ignore[no-untyped-def]
    """Normalised reduction dims, None for "all dims" or something that is not a dim spec."""
    if dim is None:
        return None
    items = list(dim) if isinstance(dim, (list, tuple)) else [dim]
    if not items or not all(isinstance(d, int) and not isinstance(d, bool) for d in items):
        return None
    return tuple(sorted({d % ndim for d in items}))


def module_of(gm, node):  # type: ignore[no-untyped-def]
    if node.op != "call_module":
        return None
    try:
        return gm.get_submodule(str(node.target))
    except AttributeError:
        return None


def param_path(gm, node) -> str | None:  # type: ignore[no-untyped-def]
    """``self.<path>`` of a get_attr node holding a floating tensor of the original model."""
    import torch

    if node.op != "get_attr":
        return None
    try:
        value = gm.get_parameter(str(node.target))
    except AttributeError:
        try:
            value = gm.get_buffer(str(node.target))
        except AttributeError:
            return None
    if not isinstance(value, torch.Tensor) or not value.is_floating_point():
        return None
    return f"self.{node.target}"


@dataclass
class Rewrite:
    """A graph being rewritten, the buffers the new ``__init__`` must compute, and notes."""

    gm: object
    inputs: list = field(default_factory=list)
    buffers: dict[str, str] = field(default_factory=dict)  # name -> expression in __init__
    notes: list[str] = field(default_factory=list)

    @property
    def graph(self):  # type: ignore[no-untyped-def]
        return self.gm.graph

    def buffer(self, expression: str) -> object:
        """A get_attr node for a new buffer computed once in ``__init__`` as ``expression``.

        The expression is evaluated here on the meta weights, so the buffer has its real shape
        and later passes see correct shapes after ``refresh``."""
        import torch

        plain = re.fullmatch(r"self\.([A-Za-z_][A-Za-z0-9_.]*)", expression)
        if plain:  # an existing parameter needs no copy
            return self.graph.get_attr(plain.group(1))
        value = eval(expression, {"torch": torch}, {"self": self.gm})  # noqa: S307 - built by the passes
        name = f"_folded_{len(self.buffers)}"
        self.buffers[name] = expression
        self.gm.register_buffer(name, value.detach(), persistent=False)
        return self.graph.get_attr(name)

    def refresh(self) -> None:
        """Re-run shape propagation so nodes created by a pass carry shapes too."""
        from torch.fx.passes.shape_prop import ShapeProp

        self.graph.eliminate_dead_code()
        self.gm.recompile()
        ShapeProp(self.gm).propagate(*self.inputs)

    def expr_of(self, node) -> str | None:  # type: ignore[no-untyped-def]
        """``__init__`` expression of a get_attr node (a folded buffer inlines its expression)."""
        if node is None:
            return None
        if node.op == "get_attr" and str(node.target) in self.buffers:
            return f"({self.buffers[str(node.target)]})"
        return param_path(self.gm, node)


__all__ = ["Rewrite", "arg", "dims_of", "is_number", "module_of", "op_name", "param_path", "shape"]
