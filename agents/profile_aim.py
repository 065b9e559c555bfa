"""Aiming moves at the bottleneck: which kinds of operators a move can change, and how much room
those operators leave.

A profile (see ``arbor.sandbox.kernel.profile_job``) says how the time splits over operator kinds (gemm,
conv, norm, reduction, pool, layout, elementwise). A move that can only touch kinds worth less than
``MIN_SHARE`` of the time cannot pay off much, whatever its prior says: fusing activations in a
model that spends 95% of its time in one GEMM saves at most 5%. Such moves rank low (their prior is
multiplied by ``OFF_TARGET``), never out: profiles are noisy and a low-ranked move still runs
once better ones are exhausted.

On a GPU the profile says more, and the ranking uses it (``headroom``): how busy the GPU is during
a call (the rest is launch overhead, which only moves that remove launches — a CUDA graph, a
fusing compile — win back, pseudo-kind ``launch``), and how close each op already runs to the
device's peak FLOP/s or bandwidth (a GEMM at 90% of peak leaves a GEMM move 10% to win). A move's
headroom is the share of the call's wall time it could win back; below ``HEADROOM_FULL`` its prior
shrinks in proportion, down to ``OFF_TARGET``. Factors never exceed 1, so priors only fall.
"""

from __future__ import annotations

MIN_SHARE = 0.2
OFF_TARGET = 0.3
HEADROOM_FULL = 0.5
LAUNCH = "launch"  # pseudo-kind: the time a GPU waits for the next kernel launch

_FUSION = {"elementwise", "reduction", "norm", "layout", "compiled"}
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
    "lt_epilogue": {"gemm", "elementwise", LAUNCH},
}
_TRANSFORM_REACH = {
    "rewrite_pattern": {"elementwise", "reduction", "layout"},
    "strength_reduce_pow": {"elementwise"},
    "channels_last": {"conv", "layout", "pool", "norm"},
    "triton_codegen": {"elementwise", "reduction", "norm"},
    "cpp_codegen": {"elementwise", "reduction", "norm"},
    "cuda_graph": {LAUNCH},
    "scoped_switch": {"conv"},  # cudnn_benchmark: the only switch a move may scope
}
_COMPILE_REACH = {  # modes of wrap_compile aimed at GPU bottlenecks; the others can change anything
    "reduce-overhead": _FUSION | {LAUNCH},
    "max-autotune": _FUSION | {"gemm", "conv", LAUNCH},
}


def reach(move) -> set[str] | None:  # type: ignore[no-untyped-def]
    """Operator kinds ``move`` can change; None when it can change any (compile, threads, templates)."""
    t = move.transform
    if t == "graph_rewrite":
        kinds: set[str] = set()
        for p in move.params.get("passes", []):
            kinds |= _PASS_REACH.get(p, set())
        return kinds or None
    if t == "wrap_compile":
        return _COMPILE_REACH.get(move.params.get("mode", "default"))
    if t.startswith("inplace"):
        return {"elementwise", "layout"}
    return _TRANSFORM_REACH.get(t)


def reachable_share(move, profile: dict | None) -> float | None:  # type: ignore[no-untyped-def]
    """Share of the profiled time in kinds ``move`` can change (None: unknown or everything, or a
    move aimed at launch overhead, which no op's share measures)."""
    if not profile or profile.get("error") or not profile.get("categories"):
        return None
    kinds = reach(move)
    if kinds is None or LAUNCH in kinds:
        return None
    return sum(v for k, v in profile["categories"].items() if k in kinds)


def _room_by_kind(profile: dict) -> dict[str, float]:
    """Per op kind, the share-weighted ``1 - fraction of peak`` of its profiled ops (an op whose
    position against the peak is unknown counts as having all its room)."""
    weight: dict[str, float] = {}
    room: dict[str, float] = {}
    for op in profile.get("ops") or []:
        fracs = [f for f in (op.get("flops_frac_peak"), op.get("bytes_frac_peak")) if f is not None]
        left = 1.0 - min(1.0, max(fracs)) if fracs else 1.0
        share = float(op.get("share") or 0.0)
        kind = op.get("category") or "elementwise"
        weight[kind] = weight.get(kind, 0.0) + share
        room[kind] = room.get(kind, 0.0) + share * left
    return {k: room[k] / weight[k] for k in weight if weight[k] > 0}


def headroom(move, profile: dict | None) -> float | None:  # type: ignore[no-untyped-def]
    """Share of a call's wall time ``move`` could win back, from a GPU profile; None without one
    (CPU profiles keep the share rule alone) or for moves that can change anything."""
    if not profile or profile.get("error") or profile.get("gpu_busy") is None:
        return None
    kinds = reach(move)
    if kinds is None:
        return None
    busy = min(1.0, max(0.0, float(profile["gpu_busy"])))
    room = _room_by_kind(profile)
    ops = sum(share * room.get(kind, 1.0) for kind, share in (profile.get("categories") or {}).items()
              if kind in kinds)
    return busy * ops + ((1.0 - busy) if LAUNCH in kinds else 0.0)


def aim_factor(move, profile: dict | None) -> float:  # type: ignore[no-untyped-def]
    share = reachable_share(move, profile)
    factor = OFF_TARGET if share is not None and share < MIN_SHARE else 1.0
    room = headroom(move, profile)
    if room is not None:
        factor = min(factor, max(OFF_TARGET, min(1.0, room / HEADROOM_FULL)))
    return factor
