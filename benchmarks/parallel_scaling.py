"""Parallel scaling judged by time to target: wall-clock time to 95% of the optimum at 1, 2, 4, 8
workers, beside the dependency-chain lower bound.

Every run is a real campaign (orchestrator, specialist, Critic, store, LangGraph loop) on a
replayed landscape; measurement durations are the recorded ones (about 6 s a measurement on the
CPU landscapes), simulated on a virtual clock (``benchmarks/virtual_time.py``) instead of slept,
while the orchestrator's own work takes the real time it takes.

* **time to 95%** — seconds until the node the campaign believes best (its best accepted node)
  is truly within 95% of the landscape's optimum; censored runs (never) count infinite.
* **lower bound** — the dependency chain: a move's worth is known only once its parent has been
  measured, so reaching a point d moves from the default takes d rounds, each as long as the
  measurement of the point reached in it (the first round also waits for the baseline, which
  is measured beside it), plus the confirmation of the last: the time if every round chose right
  with unlimited workers. A bet on a node still being measured can beat it by luck.
* **x serial**, **x bound** — time to 95% over the serial loop's (same landscape, median over
  seeds) and over the lower bound.

Goals: at 8 workers, time to 95% within 1.5x the lower bound on every landscape, and at most
0.35x serial where the bound is at most 0.2x serial (the ``syn_*`` landscapes of
``benchmarks/landscapes/synthetic/``: many independent moves, structure synthetic, noise and
durations resampled from the recorded CPU runs).

    python -m benchmarks.parallel_scaling                          # every landscape, 1/2/4/8 workers, 5 seeds
    python -m benchmarks.parallel_scaling --landscapes cpu_tiled_matmul --workers 1 8 --seeds 0 1
    python -m benchmarks.parallel_scaling --variants after before   # with and without the parallel scheduling

Writes ``benchmarks/results/parallel_scaling.json``.
"""

from __future__ import annotations

import argparse
import heapq
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.common import LANDSCAPES, fmt, landscape_paths, quartiles, table, write_result

THRESHOLD = 0.95
GOAL_BOUND = 1.5  # time to 95% at 8 workers, at most this many lower bounds
GOAL_SERIAL = 0.35  # ... and at most this much of serial where the bound is <= WIDE of serial
WIDE = 0.2
SYNTHETIC = LANDSCAPES / "synthetic"

# What each variant switches in arbor/campaign/parallel.py ("before": the parallel loop without
# the scheduling that starts the baseline's children early, verifies ahead, bets on nodes in
# flight and spreads simultaneous picks; the serial loop is the same in all).
VARIANTS = {"after": {"EARLY_START": True, "VERIFY_AHEAD": True, "EXPAND_IN_FLIGHT": True, "DIVERSE_PICKS": True},
            "no_diverse": {"EARLY_START": True, "VERIFY_AHEAD": True, "EXPAND_IN_FLIGHT": True,
                           "DIVERSE_PICKS": False},
            "before": {"EARLY_START": False, "VERIFY_AHEAD": False, "EXPAND_IN_FLIGHT": False,
                       "DIVERSE_PICKS": False}}


def all_landscapes(names: list[str] | None) -> list[Path]:
    """The recorded landscapes and the synthetic wide ones (or those named)."""
    paths = landscape_paths(None) + sorted(SYNTHETIC.glob("*.json"))
    if not names:
        return paths
    picked = [p for p in paths if p.stem in set(names)]
    return picked + [Path(n) for n in names if Path(n).is_file()]


def point_seconds(point) -> float:  # type: ignore[no-untyped-def]
    """A point's measurement time: the median of its recorded runs' durations."""
    xs = sorted(r.s for r in point.runs if r.s > 0)
    return xs[len(xs) // 2] if xs else 0.0


def lower_bound(ls, moves: str = "recorded") -> dict:  # type: ignore[no-untyped-def]
    """The dependency-chain lower bound of time to ``THRESHOLD`` of the optimum (see the module
    docstring): a shortest path over the landscape's move graph, each round as long as the point
    it reaches, the first round at least as long as the baseline, plus the last point's
    confirmation. {"seconds", "rounds", "path"} ({"seconds": 0} when the default is there)."""
    from arbor.agents.transforms import apply_move
    from arbor.agents.transforms.knobs import canonical_config, parse_config
    from arbor.targets.replay import knob_moves

    target = THRESHOLD * ls.optimum()
    start = ls.default_config()
    p0 = ls.point(start)
    if p0 is None:
        return {"seconds": float("inf"), "rounds": None, "path": []}
    if (p0.speedup or 0.0) >= target:
        return {"seconds": 0.0, "rounds": 0, "path": [start]}
    specs = knob_moves(ls, moves)
    s0 = point_seconds(p0)
    key0 = ls.key(start)
    best: dict = {key0: 0.0}
    prev: dict = {key0: None}
    heap = [(0.0, 0, key0, canonical_config(start))]
    tie = 1
    while heap:  # every point's chain time (the graph is a few hundred points at most)
        dist, _, key, src = heapq.heappop(heap)
        if dist > best.get(key, float("inf")):
            continue
        for m in specs:
            out = apply_move(src, m.transform, m.params)
            cfg = parse_config(out) if out else None
            nxt = ls.point(cfg) if cfg else None
            if nxt is None or nxt.status != "ok" or not nxt.runs:
                continue
            k2 = ls.key(cfg)
            d2 = max(s0, point_seconds(nxt)) if key == key0 else dist + point_seconds(nxt)
            if d2 < best.get(k2, float("inf")):
                best[k2], prev[k2] = d2, key
                heapq.heappush(heap, (d2, tie, k2, out))
                tie += 1
    totals = [(best[k] + point_seconds(ls._by_key[k]), k) for k in best  # + its confirmation
              if k != key0 and (ls._by_key[k].speedup or 0.0) >= target]
    if not totals:
        return {"seconds": float("inf"), "rounds": None, "path": []}
    seconds, key = min(totals)
    path = []
    while key is not None:
        path.append(ls._by_key[key].knobs)
        key = prev[key]
    return {"seconds": seconds, "rounds": len(path) - 1, "path": path[::-1]}


def run_one(path: Path, workers: int, seed: int, max_evaluations: int, variant: str = "after") -> dict:
    import arbor.campaign.parallel as parallel
    from arbor.agents.transforms.knobs import parse_config
    from arbor.campaign.run import run_campaign
    from arbor.search_tree import open_store
    from arbor.targets.landscape import load_landscape

    from benchmarks.searchers import replay_spec
    from benchmarks.virtual_time import VirtualClock, virtual_campaigns

    ls = load_landscape(path)
    target = THRESHOLD * ls.optimum()
    workdir = Path(tempfile.mkdtemp(prefix="arbor-par-"))
    name = f"{ls.name}.w{workers}.s{seed}"
    spec = replay_spec(path, ls, name, "puct", seed, workdir)
    spec.target = spec.target.model_copy(update={"time_scale": 0.0})
    spec.budget = spec.budget.model_copy(update={"max_evaluations": min(max_evaluations, ls.size()),
                                                 "max_wall_s": 1e9})
    spec.executor = spec.executor.model_copy(update={"workers": workers})
    store = open_store(spec.store_url())
    clock = VirtualClock()
    reached: list[tuple[int, float]] = []
    if (ls.true_speedup(ls.default_config()) or 0.0) >= target:
        reached.append((1, 0.0))

    def report(kind: str, data: dict) -> None:
        if kind != "new_best" or reached:
            return
        node = data["node"]
        if (ls.true_speedup(parse_config(store.get_artifact(node.artifact_sha)) or {}) or 0.0) >= target:
            reached.append((store.measurement_count(store.get_campaign(name).id), clock.now()))

    load = os.getloadavg()[0]
    saved = {k: getattr(parallel, k) for k in VARIANTS[variant] if hasattr(parallel, k)}
    try:
        for k, v in VARIANTS[variant].items():
            if hasattr(parallel, k):
                setattr(parallel, k, v)
        with virtual_campaigns(clock, workers):
            clock.jump_to(0.0)
            s = run_campaign(spec, report, store=store)
        wall = clock.now()
        ms = store.measurements_after(store.get_campaign(name).id, 0, limit=10**6, samples=False)
        busy = sum(m.duration_s or 0.0 for m in ms)
        return {"landscape": ls.name, "workers": workers, "seed": seed, "variant": variant, "load": round(load, 2),
                "measurements": s.measurements, "finals": sum(1 for m in ms if m.purpose == "final"),
                "time_to_95_s": round(reached[0][1], 2) if reached else float("inf"),
                "evals_to_95": reached[0][0] if reached else float("inf"),
                "wall_s": round(wall, 2), "evals_per_hour": s.measurements * 3600.0 / wall if wall > 0 else None,
                "stop": s.stop_reason, "final_speedup": s.speedup,
                # share of the workers' time spent measuring: below 1 the search had nothing to give them
                "utilization": busy / (workers * wall) if wall > 0 else None}
    finally:
        for k, v in saved.items():
            setattr(parallel, k, v)
        store.close()
        shutil.rmtree(workdir, ignore_errors=True)


def summarize(rows: list[dict], workers: list[int], variants: list[str], bounds: dict[str, dict]) -> list[dict]:
    """One line per landscape, variant and worker count; every variant against the same serial runs."""
    out = []
    for ls in sorted({r["landscape"] for r in rows}):
        serial = [r for r in rows if r["landscape"] == ls and r["workers"] == workers[0]]
        base = quartiles([r["time_to_95_s"] for r in serial])["median"]
        bound = (bounds.get(ls) or {}).get("seconds")
        for variant in variants:
            for w in workers:
                rs = serial if w == workers[0] else [r for r in rows if r["landscape"] == ls
                                                     and r["workers"] == w and r["variant"] == variant]
                if not rs or (w == workers[0] and variant != variants[0]):
                    continue
                q = quartiles([r["time_to_95_s"] for r in rs])
                med = q["median"]
                out.append({"landscape": ls, "variant": "serial" if w == workers[0] else variant, "workers": w,
                            "time_to_95_s": med, "censored": q["censored"],
                            "x_serial": med / base if med is not None and base and base != float("inf") else None,
                            "bound_s": bound,
                            "x_bound": med / bound if med is not None and bound else None,
                            "bound_x_serial": bound / base if bound is not None and base and base != float("inf") else None,
                            "evals_to_95": quartiles([r["evals_to_95"] for r in rs])["median"],
                            "measurements": statistics.median(r["measurements"] for r in rs),
                            "evals_per_hour": statistics.median(r["evals_per_hour"] or 0.0 for r in rs),
                            "utilization": statistics.median(r["utilization"] or 0.0 for r in rs),
                            "load": statistics.median(r["load"] for r in rs)})
    return out


def goals(summary: list[dict], top: int, variant: str) -> dict:
    """The two goals at ``top`` workers for ``variant``, per landscape and overall."""
    per = {}
    for s in summary:
        if s["workers"] != top or s["variant"] != variant:
            continue
        wide = s["bound_x_serial"] is not None and s["bound_x_serial"] <= WIDE
        within = s["x_bound"] is not None and s["x_bound"] <= GOAL_BOUND
        fast = (s["x_serial"] is not None and s["x_serial"] <= GOAL_SERIAL) if wide else None
        per[s["landscape"]] = {"x_bound": s["x_bound"], "x_serial": s["x_serial"], "wide": wide,
                               "within_bound": within, "serial_goal": fast}
    return {"landscapes": per, "met_bound": bool(per) and all(v["within_bound"] for v in per.values()),
            "met_serial": all(v["serial_goal"] for v in per.values() if v["wide"])}


def main(argv: list[str] | None = None) -> int:
    from arbor.targets.landscape import load_landscape

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--landscapes", nargs="*", default=None, help="stems (recorded or synthetic) or paths")
    ap.add_argument("--workers", nargs="*", type=int, default=[1, 2, 4, 8])
    ap.add_argument("--seeds", nargs="*", type=int, default=[0, 1, 2, 3, 4])
    ap.add_argument("--variants", nargs="*", default=["after"], choices=sorted(VARIANTS))
    ap.add_argument("--max-evaluations", type=int, default=100)
    ap.add_argument("--out", default="parallel_scaling", help="result name under benchmarks/results/")
    args = ap.parse_args(argv)
    started = time.monotonic()
    load = os.getloadavg()
    paths = all_landscapes(args.landscapes)
    bounds = {}
    for path in paths:
        ls = load_landscape(path)
        bounds[ls.name] = lower_bound(ls)
        print(f"{ls.name}: optimum {ls.optimum():.2f}x, lower bound {fmt(bounds[ls.name]['seconds'])} s "
              f"in {bounds[ls.name]['rounds']} round(s)", flush=True)
    rows = []
    for path in paths:
        for seed in args.seeds:
            for w in args.workers:
                for variant in (args.variants[:1] if w == args.workers[0] else args.variants):
                    r = run_one(path, w, seed, args.max_evaluations, variant)
                    rows.append(r)
                    print(f"  {r['landscape']:24s} {variant:10s} workers={w} seed={seed}: {r['measurements']} "
                          f"measurements, to 95%: {fmt(r['time_to_95_s'])} s ({fmt(r['evals_to_95'], 0)} evals), "
                          f"load {r['load']:.2f}", flush=True)
    summary = summarize(rows, args.workers, args.variants, bounds)
    print(table(summary, [("landscape", "landscape"), ("variant", "variant"), ("workers", "workers"),
                          ("time_to_95_s", "s to 95%"), ("censored", "censored"), ("x_serial", "x serial"),
                          ("bound_s", "bound s"), ("x_bound", "x bound"), ("bound_x_serial", "bound x serial"),
                          ("evals_to_95", "evals to 95%"), ("measurements", "measured"),
                          ("evals_per_hour", "evals/h"), ("utilization", "busy"), ("load", "load")]))
    top = max(args.workers)
    result_goals = {}
    for variant in args.variants:
        g = result_goals[variant] = goals(summary, top, variant)
        print(f"\n{variant}: at {top} workers, time to 95% within {GOAL_BOUND}x the lower bound on every landscape: "
              f"{'met' if g['met_bound'] else 'NOT met'}; <= {GOAL_SERIAL}x serial where the bound is <= {WIDE}x "
              f"serial: {'met' if g['met_serial'] else 'NOT met'}")
        for name, v in g["landscapes"].items():
            print(f"  {name}: {fmt(v['x_bound'], 2)}x bound, {fmt(v['x_serial'], 2)}x serial"
                  + (" (wide)" if v["wide"] else ""))
    end_load = os.getloadavg()
    print(f"load average at start {load[0]:.2f}, at end {end_load[0]:.2f}")
    out = write_result(args.out, {"args": vars(args), "load_avg_start": load, "load_avg_end": end_load,
                                  "bounds": bounds, "summary": summary, "goals": result_goals, "rows": rows}, started)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
