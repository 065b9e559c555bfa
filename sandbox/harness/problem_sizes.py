"""A problem's size overrides: ``target.sizes`` and ``size_scale`` applied to its module-level ints.

Unchanged upstream KernelBench files keep their sizes in globals (``batch_size``, ``dim``) that
``get_inputs()`` / ``get_init_inputs()`` read at call time, so a campaign can shrink or pin a
problem without editing the file. Kept apart from the output checks (``kernel_checks.py``) because
it is about the problem's source, not its outputs: it parses the module (``ast``), keeps structural
divisibility between sizes, and re-runs the assignments derived from an overridden size.

STANDALONE (stdlib only, never ``import arbor``): shipped beside the measurement and profile
harnesses and loaded by path there; the host imports it as ``arbor.sandbox.harness.problem_sizes``
(the suite's calibration, the Triton benchmarks).
"""

from __future__ import annotations

import math

__all__ = ["SizeError", "apply_sizes", "keep_divisible"]


class SizeError(ValueError):
    """A ``sizes`` override names no module-level int of the problem."""


def apply_sizes(module, sizes: dict, scale: float | None,  # type: ignore[no-untyped-def]
                warnings: list | None = None) -> dict:
    """Rewrite module-level ints that get_inputs()/get_init_inputs() read at call time.

    Unchanged upstream KernelBench files keep their sizes in globals such as ``batch_size``; scaling
    every literal int >= 16 shrinks a problem for quick development runs without editing the file.
    Globals derived from them (``bias_shape = (out_features,)``) are recomputed by re-executing the
    module's top-level assignments that depend on an overridden name, in order, with the overrides
    in place; a derived global that cannot follow (bound inside an ``if``/``for`` block or a
    default argument, or whose assignment fails) is named in ``warnings``.
    """
    ints = {k: v for k, v in vars(module).items() if not k.startswith("__") and type(v) is int}
    unknown = sorted(set(sizes) - set(ints))
    if unknown:
        raise SizeError(f"sizes override {unknown} names no module-level int in the "
                        f"problem (its ints: {sorted(ints)}); fix target.sizes in the campaign")
    tree = _module_tree(module)
    literal = _literal_ints(tree) if tree is not None else set(ints)
    applied = {}
    if scale is not None:  # derived ints are not scaled: they follow their sources below
        applied = {k: max(1, int(round(v * scale))) for k, v in ints.items()
                   if v >= 16 and k not in sizes and k in literal}
    applied.update({k: int(v) for k, v in sizes.items()})
    structural = _init_names(tree) if tree is not None else None  # the model's hyperparameters
    applied.update(keep_divisible({k: v for k, v in ints.items() if (k in literal or k in sizes)
                                   and (structural is None or k in structural)}, applied, set(sizes)))
    for k, v in applied.items():
        setattr(module, k, v)
    if tree is not None and applied:
        stale = _recompute(module, tree, set(applied))
        if stale and warnings is not None:
            warnings.append(f"sizes: {', '.join(stale)} depend on the overridden {sorted(applied)} "
                            "but cannot be recomputed (bound inside a block, a default argument, "
                            "or their assignment failed); set them in target.sizes too")
    return applied


def keep_divisible(ints: dict, applied: dict, pinned: set) -> dict:
    """Scaled sizes that were multiples of other sizes stay multiples of them (their new values).

    Divisibility among a problem's sizes is often structural: ``nn.GroupNorm(num_groups,
    out_channels)``, ``embed_dim`` over ``num_heads``, channels over ``groups``. A scale that turns
    ``out_channels = 32`` into 4 while ``num_groups = 8`` stays (ints under 16 are not scaled) makes
    the reference itself fail. Each scaled size, smallest first, is rounded to the nearest multiple
    (at least one) of the least common multiple of the final values of the sizes it was a multiple
    of; when that multiple would more than double the scaled value (many incidental divisors among
    scaled sizes), only the unscaled divisors are kept. ``ints`` holds the sizes that may constrain
    each other: literal ones (derived ones are recomputed afterwards) that ``get_init_inputs`` passes
    to the model, whose constructor is where such constraints live (a batch of 16 is not bound to
    an ``in_channels`` of 8). Overrides the user set are never changed."""
    out: dict = {}
    final = lambda k: out.get(k, applied.get(k, ints[k]))  # noqa: E731
    for a in sorted((k for k in applied if k in ints and k not in pinned), key=lambda k: ints[k]):
        orig, new = ints[a], applied[a]
        divs = [b for b, v in ints.items() if b != a and 2 <= v < orig and orig % v == 0]
        fixed = [b for b in divs if b not in applied]
        for group in (divs, fixed):
            m = 1
            for b in group:
                m = math.lcm(m, final(b))
            if m <= max(2 * new, 1) or group is fixed:
                break
        if m > 1 and m <= orig:
            out[a] = max(m, int(round(new / m)) * m)
    return {k: v for k, v in out.items() if v != applied[k]}


def _init_names(tree) -> set | None:  # type: ignore[no-untyped-def]
    """Names ``get_init_inputs`` reads (the model's constructor arguments), None without one."""
    import ast

    fn = next((st for st in tree.body if isinstance(st, ast.FunctionDef) and st.name == "get_init_inputs"), None)
    return None if fn is None else _loads(fn)


def _module_tree(module):  # type: ignore[no-untyped-def]
    import ast

    try:
        with open(module.__file__, encoding="utf-8") as f:
            return ast.parse(f.read())
    except (OSError, SyntaxError, ValueError, TypeError, AttributeError):
        return None


def _bound(stmt) -> set:  # type: ignore[no-untyped-def]
    import ast

    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}


def _loads(node) -> set:  # type: ignore[no-untyped-def]
    import ast

    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _literal_ints(tree) -> set:  # type: ignore[no-untyped-def]
    """Top-level names assigned a value that reads no other name (``n = 4096``, ``h, w = 32, 32``,
    ``d = 2 ** 10``): the sizes a scale may change. Derived ones follow them instead."""
    import ast

    out = set()
    for stmt in tree.body:
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None and not _loads(stmt.value):
            out |= _bound(stmt)
    return out


def _recompute(module, tree, pinned: set) -> list:  # type: ignore[no-untyped-def]
    """Re-run, in order, each top-level assignment reading a changed name (never one that only
    rebinds an override); returns the derived names that could not follow."""
    import ast

    changed, redone, stale = set(pinned), set(), []
    ns = vars(module)
    for stmt in tree.body:
        if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            names = _bound(stmt)
            if not names or names <= pinned or not (_loads(stmt) & changed) or stmt.value is None:
                continue
            if isinstance(stmt, ast.AugAssign) and not names <= redone:  # `x += n` twice is wrong
                stale.extend(sorted(names - pinned))
                continue
            try:
                exec(compile(ast.Module(body=[stmt], type_ignores=[]), module.__file__, "exec"), ns)
                changed |= names
                redone |= names
            except Exception:  # noqa: BLE001  named below, the run goes on with the old value
                stale.extend(sorted(names))
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defaults = [d for d in getattr(stmt.args, "defaults", []) + getattr(stmt.args, "kw_defaults", [])
                        if d is not None] if not isinstance(stmt, ast.ClassDef) else []
            if any(_loads(d) & changed for d in defaults):
                stale.append(f"{stmt.name}() default")
        elif not isinstance(stmt, (ast.Import, ast.ImportFrom, ast.Expr)) and _loads(stmt) & changed:
            stale.extend(sorted({n.id for n in ast.walk(stmt) if isinstance(n, ast.Name)
                                 and isinstance(n.ctx, ast.Store)} - pinned))
    return stale
