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
  was first truly within 95% of the landscape's optimum (censored runs: never, counted infinite);
  *+in flight* adds the measurements running at that moment (already paid for, not yet recorded);
  *s to 95%* is the wall time to that moment (what a fleet waits).
* **finals** — final-verification measurements (with several workers some are taken ahead, on
  workers the search left idle; they count as evaluations like any other).
* ``--variants before after`` runs the parallel loop without and with this scheduling, side by
  side against the same serial runs, with the load average recorded for every run.

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


# What each variant switches in arbor/campaign/parallel.py ("before": the parallel loop as it was
# before the baseline's children started early, idle workers verified ahead and in-flight nodes
# were expanded; the serial loop is the same in both).
VARIANTS = {"after": {"EARLY_START": True, "VERIFY_AHEAD": True, "EXPAND_IN_FLIGHT": True},
            "no_expand": {"EARLY_START": True, "VERIFY_AHEAD": True, "EXPAND_IN_FLIGHT": False},
            "before": {"EARLY_START": False, "VERIFY_AHEAD": False, "EXPAND_IN_FLIGHT": False}}


def run_one(path: Path, workers: int, seed: int, time_scale: float, max_evaluations: int,
            variant: str = "after") -> dict:
    import arbor.campaign.parallel as parallel
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
    started: list[int] = []  # the same moment, counting the measurements then in flight too
    when: list[float] = []  # wall seconds into the run at that moment
    if (ls.true_speedup(ls.default_config()) or 0.0) >= target:
        reached.append(1)
        started.append(1)
        when.append(0.0)

    def report(kind: str, data: dict) -> None:
        if kind != "new_best" or reached:
            return
        node = data["node"]
        if (ls.true_speedup(parse_config(store.get_artifact(node.artifact_sha)) or {}) or 0.0) >= target:
            cid = store.get_campaign(name).id
            reached.append(store.measurement_count(cid))
            started.append(reached[0] + len(store.nodes(cid, states=("running",))))
            when.append(time.monotonic() - t0)

    load = os.getloadavg()[0]
    saved = {k: getattr(parallel, k) for k in VARIANTS[variant]}
    try:
        for k, v in VARIANTS[variant].items():
            setattr(parallel, k, v)
        t0 = time.monotonic()  # noqa: F841 - read by report()
        s = run_campaign(spec, report, store=store)
        wall = time.monotonic() - t0
        recorded = statistics.mean(r.s for p in ls.points for r in p.runs) if ls.points else 0.0
        ms = store.measurements_after(store.get_campaign(name).id, 0, limit=10**6, samples=False)
        busy = sum((m.duration_s or 0.0) * time_scale for m in ms)
        return {"landscape": ls.name, "workers": workers, "seed": seed, "variant": variant, "load": round(load, 2),
                "measurements": s.measurements, "finals": sum(1 for m in ms if m.purpose == "final"),
                "evals_to_95_started": started[0] if started else float("inf"),
                "wall_to_95_s": round(when[0], 2) if when else float("inf"),
                "wall_s": round(wall, 2), "evals_per_hour": s.measurements * 3600.0 * time_scale / wall,
                "evals_to_95": reached[0] if reached else float("inf"), "stop": s.stop_reason,
                "final_speedup": s.speedup, "recorded_measurement_s": round(recorded, 2),
                # share of the workers' time spent measuring: below 1 the search had nothing to give
                # them (a small landscape, the baseline, confirmations waited on) or the loop lagged
                "utilization": busy / (workers * wall) if wall > 0 else None}
    finally:
        for k, v in saved.items():
            setattr(parallel, k, v)
        store.close()
        shutil.rmtree(workdir, ignore_errors=True)


def summarize(rows: list[dict], workers: list[int], variants: list[str]) -> list[dict]:
    """One line per landscape, variant and worker count; every variant is compared with the same
    serial runs (the serial loop is the same in all of them)."""
    out = []
    for ls in sorted({r["landscape"] for r in rows}):
        serial = [r for r in rows if r["landscape"] == ls and r["workers"] == workers[0]]
        base = (statistics.median(r["evals_per_hour"] for r in serial),
                quartiles([r["evals_to_95"] for r in serial])["median"])
        for variant in variants:
            for w in workers:
                rs = serial if w == workers[0] else [r for r in rows if r["landscape"] == ls
                                                     and r["workers"] == w and r["variant"] == variant]
                if not rs or (w == workers[0] and variant != variants[0]):
                    continue
                rate = statistics.median(r["evals_per_hour"] for r in rs)
                q = quartiles([r["evals_to_95"] for r in rs])
                qs = quartiles([r["evals_to_95_started"] for r in rs])
                out.append({"landscape": ls, "variant": "serial" if w == workers[0] else variant, "workers": w,
                            "evals_per_hour": rate, "measurements": statistics.median(r["measurements"] for r in rs),
                            "finals": statistics.median(r["finals"] for r in rs),
                            "utilization": statistics.median(r["utilization"] for r in rs),
                            "wall_s": statistics.median(r["wall_s"] for r in rs),
                            "load": statistics.median(r["load"] for r in rs),
                            "rate_x": rate / base[0] if base[0] else None,
                            "evals_to_95": q["median"], "censored": q["censored"],
                            "evals_x": (q["median"] / base[1]) if base[1] and q["median"] is not None else None,
                            "evals_to_95_started": qs["median"],
                            "wall_to_95_s": quartiles([r["wall_to_95_s"] for r in rs])["median"]})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--landscapes", nargs="*", default=None)
    ap.add_argument("--workers", nargs="*", type=int, default=[1, 2, 4, 8])
    ap.add_argument("--seeds", nargs="*", type=int, default=[0, 1])
    ap.add_argument("--variants", nargs="*", default=["after"], choices=sorted(VARIANTS),
                    help="parallel loop variants to run side by side (before: without this change's scheduling)")
    ap.add_argument("--time-scale", type=float, default=0.1,
                    help="each replayed measurement sleeps its recorded duration times this")
    ap.add_argument("--max-evaluations", type=int, default=30)
    ap.add_argument("--out", default="parallel_scaling", help="result name under benchmarks/results/")
    args = ap.parse_args(argv)
    started = time.monotonic()
    load = os.getloadavg()
    rows = []
    for path in landscape_paths(args.landscapes):
        for seed in args.seeds:  # interleaved, so the machine's load drifts over all variants alike
            for w in args.workers:
                for variant in (args.variants[:1] if w == args.workers[0] else args.variants):
                    r = run_one(path, w, seed, args.time_scale, args.max_evaluations, variant)
                    rows.append(r)
                    print(f"  {r['landscape']:24s} {variant:6s} workers={w} seed={seed}: {r['measurements']} "
                          f"measurements in {r['wall_s']:.1f} s, to 95%: {fmt(r['evals_to_95'], 0)} "
                          f"(+in flight {fmt(r['evals_to_95_started'], 0)}), load {r['load']:.2f}", flush=True)
    summary = summarize(rows, args.workers, args.variants)
    print(table(summary, [("landscape", "landscape"), ("variant", "variant"), ("workers", "workers"),
                          ("evals_per_hour", "evals/h"), ("rate_x", "x serial"), ("measurements", "measured"),
                          ("finals", "finals"), ("utilization", "busy"), ("wall_s", "wall s"),
                          ("evals_to_95", "evals to 95%"), ("censored", "censored"), ("evals_x", "x serial"),
                          ("evals_to_95_started", "+in flight"), ("wall_to_95_s", "s to 95%"), ("load", "load")]))
    top = max(args.workers)
    goals = {}
    for variant in args.variants:
        at_top = [s for s in summary if s["workers"] == top and s["variant"] == variant]
        rate_x = min((s["rate_x"] or 0.0) for s in at_top) if at_top else None
        evals_x = max((s["evals_x"] if s["evals_x"] is not None else float("inf")) for s in at_top) if at_top else None
        goals[variant] = {f"rate_x_at_{top}": rate_x, f"evals_x_at_{top}": evals_x}
        met_rate = rate_x is not None and rate_x >= GOAL_RATE
        met_evals = evals_x is not None and evals_x <= GOAL_EVALS
        print(f"\n{variant}: at {top} workers: evaluations/hour {fmt(rate_x, 2)}x serial (goal >= {GOAL_RATE}x: "
              f"{'met' if met_rate else 'NOT met'}); evaluations to 95% {fmt(evals_x, 2)}x serial "
              f"(goal <= {GOAL_EVALS}x: {'met' if met_evals else 'NOT met'})")
    end_load = os.getloadavg()
    print(f"load average at start {load[0]:.2f}, at end {end_load[0]:.2f}")
    path = write_result(args.out, {"args": vars(args), "load_avg_start": load, "load_avg_end": end_load,
                                   "summary": summary, "goals": goals, "rows": rows}, started)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
