"""A small synthetic landscape, for tests and for trying the benchmarks without a recording.

Never used for the published numbers (those come from recorded landscapes): its structure is
invented. Three knobs — an ordered tile size with an interior optimum, a categorical method and
an unroll factor — and log-normal measurement noise with a per-run drift, so replayed decisions
are as uncertain as real ones.
"""

from __future__ import annotations

import itertools
import math
import random

from arbor.targets.landscape import Knob, Landscape, MoveDecl, Point, compact_run


def make_landscape(name: str = "synthetic", seed: int = 0, noise: float = 0.03, rounds: int = 20,
                   runs: int = 3, failing: bool = True) -> Landscape:
    rng = random.Random(seed)
    blocks = [16, 32, 64, 128, 256, 512]
    methods = ["plain", "fused", "inplace"]
    unrolls = [1, 2, 4]
    knobs = [Knob(name="BLOCK", values=blocks, default=16), Knob(name="METHOD", values=methods, default="plain"),
             Knob(name="UNROLL", values=unrolls, default=1)]
    points = []
    for bi, method, unroll in itertools.product(range(len(blocks)), methods, unrolls):
        cfg = {"BLOCK": blocks[bi], "METHOD": method, "UNROLL": unroll}
        if failing and method == "inplace" and blocks[bi] == 512 and unroll == 4:
            points.append(Point(knobs=cfg, status="error", error_class="incorrect", error_text="synthetic failure"))
            continue
        # interior optimum at BLOCK=128; fused helps most with large blocks; unroll 2 a little
        gain = math.exp(-((bi - 3) ** 2) / 4.0) * (1.6 if method == "fused" else 1.0 if method == "plain" else 1.2)
        t = 1e-3 / (1.0 + 2.0 * gain) * {1: 1.0, 2: 0.93, 4: 0.97}[unroll]
        rs = []
        for _ in range(runs):
            drift = math.exp(rng.gauss(0, noise / 2))
            b = [1e-3 * drift * math.exp(abs(rng.gauss(0, noise))) for _ in range(rounds)]
            c = [t * drift * math.exp(abs(rng.gauss(0, noise))) for _ in range(rounds)]
            rs.append(compact_run(b, c, 1.0))
        points.append(Point(knobs=cfg, runs=rs))
    moves = [
        MoveDecl(id="block-up", transform="const_step", params={"name": "BLOCK", "values": blocks, "step": 1},
                 prior=0.5, family="block-up"),
        MoveDecl(id="block-down", transform="const_step", params={"name": "BLOCK", "values": blocks, "step": -1},
                 prior=0.3, family="block-down"),
        # one family per direction and per value: the values of a knob are alternatives, and a
        # family shares one posterior (agents/priors.py), which must not pool opposite answers
        *[MoveDecl(id=f"method-{m}", transform="const_set", params={"name": "METHOD", "value": m}, prior=0.4,
                   family=f"method-{m}") for m in methods],
        *[MoveDecl(id=f"unroll-{u}", transform="const_set", params={"name": "UNROLL", "value": u}, prior=0.3,
                   family=f"unroll-{u}") for u in unrolls],
    ]
    return Landscape(name=name, knobs=knobs, moves=moves, points=points,
                     recorded={"machine": {"host": "synthetic"}, "repeats": runs, "complete": True},
                     campaign={"critic": {"max_cv": 0.15, "min_speedup": 1.02}, "measurement": {"seeds": [0, 1, 2]}})
