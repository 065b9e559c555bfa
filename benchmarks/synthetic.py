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


def make_wide(name: str, knobs: int, values: int, seed: int = 0, runs: int = 2, rounds: int = 60,
              recorded: list[Landscape] | None = None) -> Landscape:
    """Many independent moves: ``knobs`` categorical knobs of ``values`` values each; per knob one
    value speeds the kernel up (x1.12-1.35), the default is neutral and the others slow it down
    (x0.80-0.99), and the effects multiply — so the optimum needs every knob's good value (the
    smallest gain is above 1/0.95) and is ``knobs`` moves deep, while each level offers
    ``knobs x (values - 1)`` moves of which few help: wide for a fleet, long for one worker.

    The structure is invented; the measurements are not: every run is a recorded run of a real
    CPU landscape (``recorded``: its baseline samples, its candidate samples rescaled so that
    its median ratio is this point's, and its recorded duration), so noise, drift and the ~6 s
    a measurement takes are as live campaigns see them."""
    rng = random.Random(seed)
    pool = [r for ls in (recorded or []) for p in ls.points for r in p.runs if r.b and r.c and r.s > 0]
    if not pool:
        raise ValueError("make_wide needs recorded landscapes to draw measurements from")
    names = [f"K{i}" for i in range(knobs)]
    labels = [f"v{j}" for j in range(values)]
    effect: dict[tuple[int, int], float] = {}
    for i in range(knobs):
        good = rng.randrange(1, values)
        for j in range(values):
            effect[i, j] = (1.0 if j == 0 else rng.uniform(1.12, 1.35) if j == good
                            else rng.uniform(0.80, 0.99))
    points = []
    for combo in itertools.product(range(values), repeat=knobs):
        speedup = math.prod(effect[i, j] for i, j in enumerate(combo))
        rs = []
        for _ in range(runs):
            src = pool[rng.randrange(len(pool))]
            n = min(len(src.b), len(src.c))
            idx = sorted(rng.sample(range(n), min(rounds, n)))  # a live run has ~90 rounds
            b, c = [src.b[k] for k in idx], [src.c[k] for k in idx]
            ratio, scale = _median(b) / _median(c), REFERENCE_S / _median(src.b)  # one reference for all
            rs.append(compact_run([x * scale for x in b], [x * scale * ratio / speedup for x in c], src.s))
        points.append(Point(knobs={names[i]: labels[j] for i, j in enumerate(combo)}, runs=rs))
    moves = [MoveDecl(id=f"{names[i]}-{labels[j]}", transform="const_set", params={"name": names[i], "value": labels[j]},
                      prior=0.5, family=names[i]) for i in range(knobs) for j in range(values)]
    return Landscape(name=name, description=f"synthetic: {knobs} independent knobs x {values} values, "
                                            "measurements resampled from recorded CPU runs",
                     knobs=[Knob(name=n, values=labels, default=labels[0]) for n in names], moves=moves,
                     points=points, recorded={"machine": {"host": "synthetic"}, "repeats": runs, "complete": True,
                                              "seed": seed},
                     campaign={"critic": {"max_cv": 0.15, "min_speedup": 1.02}, "measurement": {"seeds": [0, 1, 2]}})


def _median(xs: list[float]) -> float:
    s = sorted(xs)
    return s[len(s) // 2] if len(s) % 2 else 0.5 * (s[len(s) // 2 - 1] + s[len(s) // 2])


REFERENCE_S = 2e-3  # every run's reference is rescaled to this median (its noise kept)
WIDE = {"syn_wide_k3v6": (3, 6, 1), "syn_wide_k4v4": (4, 4, 2)}  # name: knobs, values, seed


def write_wide(out_dir=None) -> list:  # type: ignore[no-untyped-def]
    """(Re)generate the wide landscapes of ``benchmarks/landscapes/synthetic/`` from the recorded ones."""
    from benchmarks.common import LANDSCAPES, landscape_paths
    from arbor.targets.landscape import load_landscape

    out = (out_dir or LANDSCAPES / "synthetic")
    recorded = [load_landscape(p) for p in landscape_paths(None)]
    paths = []
    for name, (k, v, seed) in WIDE.items():
        path = out / f"{name}.json"
        make_wide(name, k, v, seed=seed, recorded=recorded).dump(path)
        paths.append(path)
    return paths


if __name__ == "__main__":
    for p in write_wide():
        print(f"wrote {p}")
