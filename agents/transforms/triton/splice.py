"""Splicing a generated kernel into ModelNew: shared by the Triton and the C++ code generators.

Both backends compute the same matched region (``region.py``) and differ only in the kernel
source and how it is launched, so the new forward (FX's code for the graph, the region replaced
by one call of the launcher) and the module around it (the generated code inserted after the
imports, nothing the module already binds overwritten) are built here once.
"""

from __future__ import annotations

import ast
import copy
from typing import Callable

from ..base import module_bindings
from ..graph.emit import _free_names, _strip_frees, scaled_source
from ..graph.trace import Traced, trace
from .plan import Unsupported
from .region import Match


Parts = tuple[ast.FunctionDef, str, str]  # (new forward, kernel source, launcher source)


def size_independent(source: str, parts: Callable[[Traced], Parts],
                     small_parts: Callable[[Traced], Parts] | None = None) -> tuple[Traced, Parts]:
    """``source`` traced and its generated parts, refused (Unsupported) when it cannot be traced or
    when the same code does not come out of the problem at half size (the parts must read every
    size at run time). ``small_parts``: how the half-size parts are made, when not as ``parts``."""
    traced = trace(source)
    if traced is None:
        raise Unsupported("ModelNew cannot be traced (data-dependent code, a compiled or non-plain module)")
    fn, kernel, launcher = parts(traced)
    small_src = scaled_source(source)
    if small_src is not None:
        small = trace(small_src)
        if small is None:
            raise Unsupported("the half-size problem cannot be traced")
        fn2, kernel2, launcher2 = (small_parts or parts)(small)
        if (ast.dump(fn2), kernel2, launcher2) != (ast.dump(fn), kernel, launcher):
            raise Unsupported("the generated code depends on the problem's sizes")
    return traced, (fn, kernel, launcher)


def forward_calling(traced: Traced, m: Match, launcher: str) -> ast.FunctionDef:
    """FX's code for the graph with the region replaced by one call of ``launcher``."""
    import torch.fx

    def launch(*args):  # type: ignore[no-untyped-def]  # a stand-in target: only its name is emitted
        raise RuntimeError("placeholder")

    launch.__name__ = launcher
    graph = torch.fx.Graph(owning_module=traced.gm)
    region = set(m.nodes)
    env: dict = {}
    for node in traced.gm.graph.nodes:
        if node is m.root:
            args = tuple(graph.get_attr(e) if isinstance(e, str) else env[e] for e in m.externals)
            env[node] = graph.create_node("call_function", launch, args, {}, name="fused")
        elif node not in region:
            env[node] = graph.node_copy(node, lambda n: env[n])
    graph.eliminate_dead_code()
    graph.lint()
    if any(str(n.target).startswith("_tensor_constant") for n in graph.nodes if n.op == "get_attr"):
        raise Unsupported("a constant captured during tracing")
    text = graph.python_code(root_module="self").src.replace("torch._C._nn.", "torch.nn.functional.")
    fn = ast.parse(text.strip()).body[0]
    assert isinstance(fn, ast.FunctionDef)
    fn.returns = None
    for a in fn.args.args:
        a.annotation = None
    for node in ast.walk(fn):  # FX prefixes the stand-in's module to its name
        if isinstance(node, ast.Name) and node.id.endswith(launcher):
            node.id = launcher
    if _free_names(fn) - {"torch", "self", launcher}:
        raise Unsupported("the rest of the forward refers to names the module does not define")
    _strip_frees(fn)
    return fn


def splice(traced: Traced, fn: ast.FunctionDef, generated: str, reserved: set[str],
           imports: tuple[tuple[str, str], ...]) -> str:
    """ModelNew's source with ``fn`` as its forward and ``generated`` inserted after the imports.
    ``reserved``: the names the generated code binds (refused when the module binds one already);
    ``imports``: (name, import line) added unless the module binds the name."""
    tree = copy.deepcopy(traced.tree)
    if reserved & module_bindings(tree):
        raise Unsupported("the module already binds a generated name")
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ModelNew")
    old = next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "forward"), None)
    if old is None:
        raise Unsupported("ModelNew has no forward")
    fn.decorator_list = old.decorator_list
    hints = {a.arg: a.annotation for a in old.args.args}
    for a in fn.args.args:
        a.annotation = hints.get(a.arg)
    fn.returns = old.returns
    cls.body[cls.body.index(old)] = fn
    bound = module_bindings(tree)
    lines = "".join(f"{line}\n" for name, line in imports if name not in bound)
    body, index = tree.body, 0
    while index < len(body) and (isinstance(body[index], (ast.Import, ast.ImportFrom))
                                 or (isinstance(body[index], ast.Expr) and isinstance(body[index].value, ast.Constant))):
        index += 1
    body[index:index] = ast.parse(lines + generated).body
    ast.fix_missing_locations(tree)
    return ast.unparse(tree) + "\n"
