"""Aiming moves at the bottleneck: which kinds of operators a move can change at all.

A profile (see ``arbor.sandbox.profiling``) says how the time splits over operator kinds (gemm,
conv, norm, reduction, pool, layout, elementwise). A move that can only touch kinds worth less than
``MIN_SHARE`` of the time cannot pay off much, whatever its prior says: fusing activations in a
model that spends 95% of its time in one GEMM saves at most 5%. Such moves rank low (their prior is
multiplied by ``OFF_TARGET``), never out: profiles are noisy and a low-ranked move still runs
once better ones are exhausted.
"""

from __future__ import annotations

MIN_SHARE = 0.2
OFF_TARGET = 0.3

_PASS_REACH = {
    "size1": {"reduction", "pool"},
    "transposes": {"layout", "gemm"},
    "diag": {"gemm", "layout"},
    "affine": {"gemm", "conv", "elementwise"},
    "linear_reduction": {"gemm", "reduction"},
    "scale_operand": {"elementwise", "gemm"},
    "activations": {"elementwise"},
    "addmm": {"gemm", "elementwise"},
    "norms": {"norm", "reduction", "elementwise"},
    "channels_last": {"conv", "layout"},
}
_TRANSFORM_REACH = {
    "rewrite_pattern": {"elementwise", "reduction", "layout"},
    "strength_reduce_pow": {"elementwise"},
    "channels_last": {"conv", "layout", "pool", "norm"},
    "triton_codegen": {"elementwise", "reduction", "norm"},
}


def reach(move) -> set[str] | None:  # type: ignore[no-untyped-def]
    """Operator kinds ``move`` can change; None when it can change any (compile, threads, templates)."""
    t = move.transform
    if t == "graph_rewrite":
        kinds: set[str] = set()
        for p in move.params.get("passes", []):
            kinds |= _PASS_REACH.get(p, set())
        return kinds or None
    if t.startswith("inplace"):
        return {"elementwise", "layout"}
    return _TRANSFORM_REACH.get(t)


def reachable_share(move, profile: dict | None) -> float | None:  # type: ignore[no-untyped-def]
    """Share of the profiled time in kinds ``move`` can change (None: unknown or everything)."""
    if not profile or profile.get("error") or not profile.get("categories"):
        return None
    kinds = reach(move)
    if kinds is None:
        return None
    return sum(v for k, v in profile["categories"].items() if k in kinds)


def aim_factor(move, profile: dict | None) -> float:  # type: ignore[no-untyped-def]
    share = reachable_share(move, profile)
    return OFF_TARGET if share is not None and share < MIN_SHARE else 1.0
