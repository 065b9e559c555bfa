"""Parallel scaling: evaluations per hour and evaluations to 95% of the optimum at 1, 2, 4, 8 workers.

Every run is a real campaign (orchestrator, specialist, Critic, store, LangGraph loop) on a
recorded landscape with the local executor; each replayed measurement sleeps its *recorded*
duration times ``--time-scale`` on its worker, so workers overlap the way live measurements do
while the orchestrating process does all the selecting, proposing and judging for real.

* **evaluations per hour** — measurement series (first measurements, confirmations, final
  verification: everything a live fleet would pay for) per hour of the run's wall clock, converted
  back to recorded time (divided by the time scale). The orchestrator's own overhead is *not*
  scaled down, so the figure is conservative.
* **evaluations to 95%** — measurement series recorded when the node the campaign believes best
  was first truly within 95% of the landscape's optimum (censored runs: never, counted infinite).

    python -m benchmarks.parallel_scaling                      # 3 landscapes x 4 worker counts x 2 seeds
    python -m benchmarks.parallel_scaling --landscapes cpu_tiled_matmul --workers 1 8 --seeds 0 \
        --time-scale 0.5 --out parallel_scaling_throughput      # measurements long enough for 8 workers

Writes ``benchmarks/results/parallel_scaling.json``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.common import fmt, landscape_paths, quartiles, table, write_result

THRESHOLD = 0.95
GOAL_RATE = 6.0  # evaluations per hour at 8 workers vs 1
GOAL_EVALS = 1.3  # evaluations to 95% at 8 workers vs 1, at most


def run_one(path: Path, workers: int, seed: int, time_scale: float, max_evaluations: int) -> dict:
    from arbor.agents.transforms.knobs import parse_config
    from arbor.campaign.run import run_campaign
    from arbor.targets.landscape import load_landscape
    from arbor.search_tree import open_store

    from benchmarks.searchers import replay_spec

    ls = load_landscape(path)
    target = THRESHOLD * ls.optimum()
    workdir = Path(tempfile.mkdtemp(prefix="arbor-par-"))
    name = f"{ls.name}.w{workers}.s{seed}"
    spec = replay_spec(path, ls, name, "puct", seed, workdir)
    spec.target = spec.target.model_copy(update={"time_scale": time_scale})
    spec.budget = spec.budget.model_copy(update={"max_evaluations": min(max_evaluations, ls.size())})
    spec.executor = spec.executor.model_copy(update={"workers": workers})
    store = open_store(spec.store_url())
    reached: list[int] = []
    if (ls.true_speedup(ls.default_config()) or 0.0) >= target:
        reached.append(1)

    def report(kind: str, data: dict) -> None:
        if kind != "new_best" or reached:
            return
        node = data["node"]
        if (ls.true_speedup(parse_config(store.get_artifact(node.artifact_sha)) or {}) or 0.0) >= target:
            reached.append(store.measurement_count(store.get_campaign(name).id))

    try:
        t0 = time.monotonic()
        s = run_campaign(spec, report, store=store)
        wall = time.monotonic() - t0
        recorded = statistics.mean(r.s for p in ls.points for r in p.runs) if ls.points else 0.0
        busy = sum((m.duration_s or 0.0) * time_scale
                   for m in store.measurements_after(store.get_campaign(name).id, 0, limit=10**6, samples=False))
        return {"landscape": ls.name, "workers": workers, "seed": seed, "measurements": s.measurements,
                "wall_s": round(wall, 2), "evals_per_hour": s.measurements * 3600.0 * time_scale / wall,
                "evals_to_95": reached[0] if reached else float("inf"), "stop": s.stop_reason,
                "final_speedup": s.speedup, "recorded_measurement_s": round(recorded, 2),
                # share of the workers' time spent measuring: below 1 the search had nothing to give
                # them (a small landscape, the baseline, confirmations waited on) or the loop lagged
                "utilization": busy / (workers * wall) if wall > 0 else None}
    finally:
        store.close()
        shutil.rmtree(workdir, ignore_errors=True)


def summarize(rows: list[dict], workers: list[int]) -> list[dict]:
    out = []
    for ls in sorted({r["landscape"] for r in rows}):
        base = None
        for w in workers:
            rs = [r for r in rows if r["landscape"] == ls and r["workers"] == w]
            rate = statistics.median(r["evals_per_hour"] for r in rs)
            q = quartiles([r["evals_to_95"] for r in rs])
            if w == workers[0]:
                base = (rate, q["median"])
            out.append({"landscape": ls, "workers": w, "evals_per_hour": rate,
                        "measurements": statistics.median(r["measurements"] for r in rs),
                        "utilization": statistics.median(r["utilization"] for r in rs),
                        "rate_x": rate / base[0] if base and base[0] else None,
                        "evals_to_95": q["median"], "censored": q["censored"],
                        "evals_x": (q["median"] / base[1]) if base and base[1] and q["median"] is not None else None})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--landscapes", nargs="*", default=None)
    ap.add_argument("--workers", nargs="*", type=int, default=[1, 2, 4, 8])
    ap.add_argument("--seeds", nargs="*", type=int, default=[0, 1])
    ap.add_argument("--time-scale", type=float, default=0.1,
                    help="each replayed measurement sleeps its recorded duration times this")
    ap.add_argument("--max-evaluations", type=int, default=30)
    ap.add_argument("--out", default="parallel_scaling", help="result name under benchmarks/results/")
    args = ap.parse_args(argv)
    started = time.monotonic()
    load = os.getloadavg()
    rows = []
    for path in landscape_paths(args.landscapes):
        for w in args.workers:
            for seed in args.seeds:
                r = run_one(path, w, seed, args.time_scale, args.max_evaluations)
                rows.append(r)
                print(f"  {r['landscape']:24s} workers={w} seed={seed}: {r['measurements']} measurements in "
                      f"{r['wall_s']:.1f} s, to 95%: {fmt(r['evals_to_95'], 0)}", flush=True)
    summary = summarize(rows, args.workers)
    print(table(summary, [("landscape", "landscape"), ("workers", "workers"), ("evals_per_hour", "evals/h"),
                          ("rate_x", "x serial"), ("measurements", "measured"), ("utilization", "busy"),
                          ("evals_to_95", "evals to 95%"), ("censored", "censored"),
                          ("evals_x", "x serial")]))
    top = max(args.workers)
    at_top = [s for s in summary if s["workers"] == top]
    goals = {
        f"rate_x_at_{top}": min((s["rate_x"] or 0.0) for s in at_top) if at_top else None,
        f"evals_x_at_{top}": max((s["evals_x"] if s["evals_x"] is not None else float("inf")) for s in at_top)
        if at_top else None,
    }
    met_rate = goals[f"rate_x_at_{top}"] is not None and goals[f"rate_x_at_{top}"] >= GOAL_RATE
    met_evals = goals[f"evals_x_at_{top}"] is not None and goals[f"evals_x_at_{top}"] <= GOAL_EVALS
    print(f"\nat {top} workers: evaluations/hour {fmt(goals[f'rate_x_at_{top}'], 2)}x serial (goal >= {GOAL_RATE}x: "
          f"{'met' if met_rate else 'NOT met'}); evaluations to 95% {fmt(goals[f'evals_x_at_{top}'], 2)}x serial "
          f"(goal <= {GOAL_EVALS}x: {'met' if met_evals else 'NOT met'}); load average at start {load[0]:.2f}")
    path = write_result(args.out, {"args": vars(args), "load_avg_start": load, "load_avg_end": os.getloadavg(),
                                             "summary": summary, "goals": goals, "rows": rows}, started)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
