"""``compile_epilogue``: keep the heavy GEMM/conv eager, compile only the pointwise/reduction tail.

On CPU, oneDNN/MKL already run a Linear or Conv near peak, and a whole-model ``torch.compile`` may
swap them for slower generated code or add guards around them; what Inductor does well is fusing
the tail (bias, activations, softmax/logsumexp, norms) into one or two loops. This move splits the
traced graph after its last heavy op: ``forward`` computes up to it eagerly, then calls a compiled
``_epilogue`` method holding the rest. Semantics are unchanged (compilation reassociates floating
point at most).
"""

from __future__ import annotations

import ast
import copy

import torch

from ..base import register
from . import validate_epilogue as _validate
from .emit import _free_names, _strip_frees, scaled_source
from .nodes import module_of, op_name
from .trace import Traced, trace

_HEAVY_FN = {"linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
             "matmul", "mm", "bmm", "addmm", "baddbmm", "einsum"}
_HEAVY_MOD = (torch.nn.Linear, torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d, torch.nn.ConvTranspose1d,
              torch.nn.ConvTranspose2d, torch.nn.ConvTranspose3d)


def _heavy(gm, node) -> bool:  # type: ignore[no-untyped-def]
    if node.op == "call_module":
        return isinstance(module_of(gm, node), _HEAVY_MOD)
    return op_name(node) in _HEAVY_FN


def _function(graph: torch.fx.Graph, name: str) -> ast.FunctionDef | None:
    text = graph.python_code(root_module="self").src.replace("torch._C._nn.", "torch.nn.functional.")
    fn = ast.parse(text.strip()).body[0]
    if not isinstance(fn, ast.FunctionDef):
        return None
    fn.name = name
    fn.returns = None
    for a in fn.args.args:
        a.annotation = None
    if _free_names(fn) - {"torch", "self"}:
        return None
    _strip_frees(fn)
    return fn


def split(traced: Traced) -> tuple[ast.FunctionDef, ast.FunctionDef] | None:
    """(forward up to the last heavy op, epilogue of the rest) or None when there is no such tail."""
    gm = copy.deepcopy(traced.gm)
    gm.graph.eliminate_dead_code()
    nodes = list(gm.graph.nodes)
    heavy = [n for n in nodes if _heavy(gm, n)]
    if not heavy:
        return None
    h = heavy[-1]
    tail = nodes[nodes.index(h) + 1:-1]
    work = [n for n in tail if n.op in ("call_function", "call_method", "call_module")]
    if len(work) < 2:
        return None
    inside = set(tail) | {h}
    for n in tail:  # the tail may read only the heavy op's result, parameters and constants
        for a in n.all_input_nodes:
            if a not in inside and a.op != "get_attr":
                return None
    out = nodes[-1]
    epi = torch.fx.Graph()
    y = epi.placeholder("y")
    env = {h: y}
    for n in tail:
        env[n] = epi.node_copy(n, lambda a: env[a])
    epi.output(torch.fx.node.map_arg(out.args[0], lambda a: env[a]))
    out.args = (h,)
    for n in reversed(tail):
        gm.graph.erase_node(n)
    gm.graph.eliminate_dead_code()
    main = _function(gm.graph, "forward")
    tail_fn = _function(epi, "_epilogue")
    if main is None or tail_fn is None:
        return None
    ret = main.body[-1]
    if not isinstance(ret, ast.Return) or ret.value is None:
        return None
    ret.value = ast.Call(ast.parse("self._epilogue_compiled", mode="eval").body, [ret.value], [])
    return main, tail_fn


@register("compile_epilogue", validate=_validate)
def compile_epilogue(source: str, params: dict) -> str | None:
    """Compile only what follows ModelNew's last GEMM/conv; None when there is no such tail, the
    graph cannot be traced, or the split code would depend on the traced sizes."""
    _validate(params)
    try:
        full = trace(source)
        parts = split(full) if full is not None else None
        if parts is None:
            return None
        small_src = scaled_source(source)
        if small_src is not None:
            small = trace(small_src)
            other = split(small) if small is not None else None
            if other is None or any(ast.dump(a) != ast.dump(b) for a, b in zip(parts, other)):
                return None
        return _render(full, parts, params.get("mode", "default"))
    except Exception:  # noqa: BLE001 - a graph this move cannot split: not applicable
        return None


def _render(traced: Traced, parts, mode: str) -> str:  # type: ignore[no-untyped-def]
    main, tail_fn = parts
    tree = copy.deepcopy(traced.tree)
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ModelNew")
    old = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "forward")
    main.decorator_list = old.decorator_list
    idx = cls.body.index(old)
    cls.body[idx:idx + 1] = [main, tail_fn]
    init = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__")
    line = f"self._epilogue_compiled = torch.compile(self._epilogue, mode={mode!r}, dynamic=False)"
    at = len(init.body) - (1 if init.body and isinstance(init.body[-1], ast.Return) else 0)
    init.body.insert(at, ast.parse(line).body[0])
    ast.fix_missing_locations(tree)
    return ast.unparse(tree) + "\n"
