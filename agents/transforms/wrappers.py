"""Runtime wrappers that leave the math alone: ``wrap_compile``, ``inference_mode``, ``set_threads``.

These moves change *how* PyTorch executes ModelNew (graph compilation, autograd bookkeeping,
intra-op parallelism), not what it computes, so they are cheap to try and compose with the
algebraic rewrites. They are also the moves most likely to be neutral or to regress (compile
warm-up, thread oversubscription), which is why skills give them modest priors.
"""

from __future__ import annotations

import ast

from .base import (
    append_to_init,
    dotted,
    ensure_imports,
    ensure_init,
    expr,
    find_class,
    find_method,
    parse,
    register,
    render,
    stmt,
)
from .cuda_graphs import CLONE_FUNCTION, CLONE_SOURCE, ensure_helper
from .switches import SWITCHES

COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
# Modes whose compiled forward replays CUDA graphs: outputs live in the graphs' memory pool and the
# next replay overwrites them, so the trampoline marks each call a new step and returns clones.
CUDAGRAPH_MODES = ("reduce-overhead", "max-autotune")


def _is_compiled(cls: ast.ClassDef) -> bool:
    if find_method(cls, "_forward_eager") is not None:
        return True
    for node in ast.walk(cls):
        if isinstance(node, ast.Call) and dotted(node.func) == "torch.compile":
            return True
        if isinstance(node, ast.Attribute) and node.attr == "_compiled_forward":
            return True
    return False


def _sets_switch(fn: ast.FunctionDef) -> bool:
    """A forward that sets a backend switch for its calls (``scoped_switch``): compiling it would
    trace the switch into the graph; compile first, then scope the switch around the trampoline."""
    paths = {path for path, _ in SWITCHES.values()}
    return any(isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store) and dotted(n) in paths
               for n in ast.walk(fn))


def _validate_compile(params: dict) -> None:
    unknown = set(params) - {"mode", "dynamic", "options", "fullgraph", "backend"}
    if unknown:
        raise ValueError(f"unknown params {sorted(unknown)} (allowed: mode, dynamic, options, fullgraph, backend)")
    mode = params.get("mode", "default")
    if mode not in COMPILE_MODES:
        raise ValueError(f"mode must be one of {', '.join(COMPILE_MODES)}, got {mode!r}")
    if not isinstance(params.get("dynamic", False), bool) or not isinstance(params.get("fullgraph", False), bool):
        raise ValueError("dynamic and fullgraph must be true or false")
    options = params.get("options")
    if options is not None:
        if not isinstance(options, dict) or not all(isinstance(k, str) for k in options):
            raise ValueError("options must be a mapping of inductor option names to values")
        if mode != "default":
            # torch.compile refuses mode= and options= together.
            raise ValueError("options cannot be combined with a non-default mode (torch.compile forbids it)")
    backend = params.get("backend")
    if backend is not None and not isinstance(backend, str):
        raise ValueError("backend must be a string such as 'inductor' or 'eager'")


@register("wrap_compile", validate=_validate_compile)
def wrap_compile(source: str, params: dict) -> str | None:
    """Compile ModelNew.forward with ``torch.compile`` once, in ``__init__``.

    Params: ``mode`` (default, reduce-overhead, max-autotune, max-autotune-no-cudagraphs),
    ``dynamic`` (default false: KernelBench shapes are fixed, so specialise), ``options``
    (inductor options, only with mode default), ``fullgraph`` (default false), ``backend``
    (default inductor; "eager" is useful in tests).

    ``forward`` becomes ``_forward_eager`` and a trampoline calls the compiled function. Safe:
    compilation preserves semantics up to floating-point reassociation; the first calls pay the
    compile time, which the measurement protocol's warm-up absorbs. ``reduce-overhead`` uses CUDA
    graphs and returns buffers that later calls overwrite, so only use it where outputs are
    consumed before the next call, so in those modes (``CUDAGRAPH_MODES``, max-autotune too) the
    trampoline calls ``torch.compiler.cudagraph_mark_step_begin()`` before each call and returns
    clones of the outputs (``clone_outputs``): no caller holds storage the next call overwrites.
    None when ModelNew is already compiled.
    """
    _validate_compile(params)
    tree = parse(source)
    cls = find_class(tree) if tree is not None else None
    forward = find_method(cls, "forward") if cls is not None else None
    if tree is None or cls is None or forward is None or _is_compiled(cls) or _sets_switch(forward):
        return None
    forward.name = "_forward_eager"
    keywords = [
        ast.keyword("mode", ast.Constant(params.get("mode", "default"))),
        ast.keyword("dynamic", ast.Constant(bool(params.get("dynamic", False)))),
    ]
    if params.get("options") is not None:
        keywords = [keywords[1], ast.keyword("options", expr(repr(dict(params["options"]))))]
    if params.get("fullgraph"):
        keywords.append(ast.keyword("fullgraph", ast.Constant(True)))
    if params.get("backend"):
        keywords.append(ast.keyword("backend", ast.Constant(params["backend"])))
    call = ast.Call(expr("torch.compile"), [expr("self._forward_eager")], keywords)
    assign = ast.Assign([ast.Attribute(ast.Name("self", ast.Load()), "_compiled_forward", ast.Store())], call)
    append_to_init(ensure_init(cls), assign)
    if params.get("mode", "default") in CUDAGRAPH_MODES:
        if not ensure_helper(tree, CLONE_FUNCTION, CLONE_SOURCE):
            return None
        trampoline = stmt("def forward(self, *args, **kwargs):\n    torch.compiler.cudagraph_mark_step_begin()\n"
                          f"    return {CLONE_FUNCTION}(self._compiled_forward(*args, **kwargs))")
    else:
        trampoline = stmt("def forward(self, *args, **kwargs):\n    return self._compiled_forward(*args, **kwargs)")
    cls.body.insert(cls.body.index(forward) + 1, trampoline)
    ensure_imports(tree, {"torch"})
    return render(tree)


def _has_inference_mode(fn: ast.FunctionDef) -> bool:
    for dec in fn.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        if dotted(target) in ("torch.inference_mode", "inference_mode"):
            return True
    return False


def _no_params(name: str):
    def check(params: dict) -> None:
        if params:
            raise ValueError(f"{name} takes no params, got {sorted(params)}")

    return check


@register("inference_mode", validate=_no_params("inference_mode"))
def inference_mode(source: str, params: dict) -> str | None:
    """Decorate ModelNew.forward with ``@torch.inference_mode()``.

    Skips autograd bookkeeping (version counters, grad-mode checks), which matters for models made
    of many small ops. Safe for forward-only evaluation; outputs become inference tensors that
    cannot later enter autograd, which a benchmark never does. None when already decorated.
    """
    _no_params("inference_mode")(params)
    tree = parse(source)
    cls = find_class(tree) if tree is not None else None
    forward = find_method(cls, "forward") if cls is not None else None
    if tree is None or forward is None or _has_inference_mode(forward):
        return None
    forward.decorator_list.insert(0, expr("torch.inference_mode()"))
    ensure_imports(tree, {"torch"})
    return render(tree)


def _validate_threads(params: dict) -> None:
    unknown = set(params) - {"threads"}
    threads = params.get("threads")
    if unknown or not isinstance(threads, int) or isinstance(threads, bool) or threads < 1:
        raise ValueError("set_threads needs exactly one param, threads: a positive integer")


def _is_set_threads(node: ast.stmt) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Call)
        and dotted(node.value.func) == "torch.set_num_threads"
    )


@register("set_threads", validate=_validate_threads)
def set_threads(source: str, params: dict) -> str | None:
    """Make ``torch.set_num_threads(threads)`` the first statement of ModelNew.__init__.

    On CPU, intra-op parallelism that exceeds the physical cores (or the cores the sandbox pins)
    thrashes; small ops often run fastest on fewer threads. Safe: results are unchanged except
    for the order of parallel reductions. The setting is process-wide, which is fine because the
    sandbox runs each candidate in its own process. Replaces an existing call with another N;
    None when the same N is already set.
    """
    _validate_threads(params)
    tree = parse(source)
    cls = find_class(tree) if tree is not None else None
    if tree is None or cls is None:
        return None
    init = ensure_init(cls)
    call = stmt(f"torch.set_num_threads({int(params['threads'])})")
    existing = [s for s in init.body if _is_set_threads(s)]
    if len(existing) == 1 and init.body[0] is existing[0] and ast.dump(existing[0]) == ast.dump(call):
        return None
    init.body = [s for s in init.body if not _is_set_threads(s)]
    init.body.insert(0, call)
    ensure_imports(tree, {"torch"})
    return render(tree)
