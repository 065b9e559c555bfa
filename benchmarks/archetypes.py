"""Archetypes of the development set's campaigns as replay landscapes whose true speedups are
known: synthetic outcome models (moves, families, multipliers) turned into noisy recorded runs.
``benchmarks/family_arms.py`` counts family spending on them and ``benchmarks/final_rule.py``
judges the final verification's rule by the true speed of what a campaign reports."""

from __future__ import annotations

import itertools
import math
import random
from dataclasses import dataclass


# --- synthetic outcome models -------------------------------------------------------------------
@dataclass
class Knob:
    name: str
    family: str
    values: dict  # value -> (speedup multiplier, move id, prior)
    default: str = "off"
    group: str | None = None  # knobs of one group are never on together: the landscape leaves those out


COMPILE_MOVES = (("C_DEFAULT", "compile-default", 0.5), ("C_FREEZING", "compile-freezing", 0.3),
                 ("C_AUTOTUNE", "compile-max-autotune", 0.1), ("C_EPILOGUE", "compile-epilogue-fusion", 0.1),
                 ("C_COORD", "compile-coordinate-descent", 0.05))


def compile_knobs(*gains: float) -> list[Knob]:
    """The five compile variants, each a move from the eager model only: live, ``wrap_compile``
    does not apply to a compiled model, so no configuration compiles twice."""
    return [Knob(name, "torch-compile", {"on": (g, move, prior)}, group="compile")
            for (name, move, prior), g in zip(COMPILE_MOVES, gains)]


def switch(name: str, family: str, move: str, prior: float, mult: float, group: str | None = None) -> Knob:
    return Knob(name, family, {"on": (mult, move, prior)}, group=group)


def compiled(cfg: dict) -> bool:
    return any(cfg.get(name) == "on" for name, _, _ in COMPILE_MOVES)


@dataclass
class Archetype:
    name: str
    what: str
    knobs: list[Knob]
    sibling_wins: bool = False  # a sibling of a member that regressed > 10% wins: no loss allowed
    adversarial: bool = False
    interact: object = None  # (config, speedup) -> speedup

    def speedup(self, cfg: dict) -> float:
        s = 1.0
        for k in self.knobs:
            if cfg[k.name] != k.default:
                s *= k.values[cfg[k.name]][0]
        return self.interact(cfg, s) if self.interact else s

    def allowed(self, cfg: dict) -> bool:
        groups = [k.group for k in self.knobs if k.group and cfg[k.name] != k.default]
        return len(groups) == len(set(groups))


def _after_collapse(cfg: dict, s: float) -> float:
    """Compiling a collapsed chain pays compile overhead on little work: 0.7x instead of 0.9x."""
    return s / 0.9 * 0.7 if cfg["GRAPH"] in ("all", "fold") and compiled(cfg) else s


def _after_fusion(cfg: dict, s: float) -> float:
    """Once the activation is one fused op, compiling it adds overhead only: 0.95x instead of 2.9x."""
    return s / 2.9 * 0.95 if cfg["GRAPH"] != "off" and compiled(cfg) else s


ARCHETYPES = [
    Archetype("softmax", "five compile variants within 2% of 0.76x, nothing else helps (the issue's case)",
              [*compile_knobs(0.763, 0.769, 0.769, 0.753, 0.755),
               switch("INFER", "autograd-off", "inference-mode", 0.35, 1.0)]),
    Archetype("layernorm", "compile regresses ~0.8x; a native norm gains 4%",
              [*compile_knobs(0.80, 0.81, 0.79, 0.80, 0.80), switch("NORM", "native-norms", "graph-native-norms", 0.55, 1.04),
               switch("INFER", "autograd-off", "inference-mode", 0.35, 1.0),
               switch("INPLACE", "fewer-allocations", "inplace-elementwise", 0.3, 0.99)]),
    Archetype("gelu", "a fused activation wins 3.3x, compiling wins 2.9x (families that win)",
              [Knob("GRAPH", "graph-algebra", {"all": (3.3, "graph-algebra-all", 0.95),
                                                "act": (3.3, "graph-fused-activations", 0.6)}),
               *compile_knobs(2.9, 2.9, 2.9, 2.9, 2.9), switch("INFER", "autograd-off", "inference-mode", 0.35, 1.0)],
              interact=_after_fusion),
    Archetype("gemm_epilogue", "compile-default 0.88x but compile-freezing 1.25x (a sibling of a regressing member "
              "wins); the compiled epilogue 1.08x", [
                  *compile_knobs(0.88, 1.25, 0.87, 0.88, 0.86),
                  switch("EPI", "compile-epilogue", "compile-epilogue-block", 0.4, 1.08, group="compile"),
                  switch("ADDMM", "fused-library-op", "graph-addmm", 0.45, 1.03),
                  switch("INFER", "autograd-off", "inference-mode", 0.35, 1.0)], sibling_wins=True),
    Archetype("linear_freezing", "a bare Linear: compile-default 0.88x, compile-freezing 1.25x (pre-packed weights) "
              "and nothing else helps: the sibling is the only win", [
                  *compile_knobs(0.88, 1.25, 0.87, 0.88, 0.86),
                  switch("INFER", "autograd-off", "inference-mode", 0.35, 1.0)], sibling_wins=True),
    Archetype("collapse", "an algebraic collapse wins 100x; compiling regresses 0.9x, 0.7x once collapsed", [
        Knob("GRAPH", "graph-algebra", {"all": (100.0, "graph-algebra-all", 0.95),
                                        "fold": (100.0, "graph-fold-linear-reduction", 0.6),
                                        "size1": (1.0, "graph-size1-reductions", 0.5)}),
        *compile_knobs(0.9, 0.9, 0.89, 0.9, 0.9), switch("INFER", "autograd-off", "inference-mode", 0.35, 1.0)],
        interact=_after_collapse),
    Archetype("matmul", "compile within 3% of 1.0x, nothing regresses", [
        *compile_knobs(0.98, 1.0, 0.97, 0.98, 0.99), switch("INFER", "autograd-off", "inference-mode", 0.35, 1.0)]),
    Archetype("conv_relu", "compile wins 1.2-1.3x (a winning family), channels_last 1.1x", [
        *compile_knobs(1.2, 1.3, 1.15, 1.2, 1.18), switch("CL", "channels-last", "channels-last", 0.3, 1.1),
        switch("INFER", "autograd-off", "inference-mode", 0.35, 1.0)]),
    Archetype("adversarial_sibling", "compile-default 0.80x next to compile-freezing 1.30x: members 1.6x apart, "
              "beyond the model's member spread (they belong in different families)", [
                  *compile_knobs(0.80, 1.30, 0.80, 0.80, 0.80),
                  switch("EPI", "compile-epilogue", "compile-epilogue-block", 0.4, 1.02, group="compile"),
                  switch("INFER", "autograd-off", "inference-mode", 0.35, 1.0)], sibling_wins=True, adversarial=True),
]


def build_landscape(arch: Archetype, seed: int = 0, noise: float = 0.03, rounds: int = 20, runs: int = 3):
    """The archetype as a replayable landscape: every configuration, three recorded runs of noisy
    paired samples around its speedup (1 ms reference), and the moves with their families."""
    from arbor.targets.landscape import Knob as LKnob
    from arbor.targets.landscape import Landscape, MoveDecl, Point, compact_run

    rng = random.Random(f"{arch.name}:{seed}")
    knobs = [LKnob(name=k.name, values=[k.default, *k.values], default=k.default) for k in arch.knobs]
    points = []
    for combo in itertools.product(*([k.default, *k.values] for k in arch.knobs)):
        cfg = dict(zip((k.name for k in arch.knobs), combo))
        if not arch.allowed(cfg):
            continue
        t = 1e-3 / arch.speedup(cfg)
        rs = []
        for _ in range(runs):
            drift = math.exp(rng.gauss(0, noise / 2))
            b = [1e-3 * drift * math.exp(abs(rng.gauss(0, noise))) for _ in range(rounds)]
            c = [t * drift * math.exp(abs(rng.gauss(0, noise))) for _ in range(rounds)]
            rs.append(compact_run(b, c, 7.0))
        points.append(Point(knobs=cfg, runs=rs))
    moves = [MoveDecl(id=move, transform="const_set", params={"name": k.name, "value": v}, prior=prior, family=k.family)
             for k in arch.knobs for v, (_, move, prior) in k.values.items()]
    return Landscape(name=arch.name, knobs=knobs, moves=moves, points=points,
                     recorded={"machine": {"host": "synthetic"}, "repeats": runs, "complete": True},
                     campaign={"critic": {"max_cv": 0.15, "min_speedup": 1.02}, "measurement": {"seeds": [0, 1, 2]}})


def true_best(store, ls, node_id: int | None) -> float:  # type: ignore[no-untyped-def]
    """The true speedup of a campaign's node on its landscape (None: the baseline)."""
    from arbor.agents.transforms.knobs import parse_config

    if node_id is None:
        return ls.true_speedup(ls.default_config()) or 1.0
    node = store.get_node(node_id)
    return ls.true_speedup(parse_config(store.get_artifact(node.artifact_sha)) or {}) or 0.0
