"""What sets a small kernel's A/A noise floor: the batch length, at one timing budget, side by side.

On the first H100 (2026-11-27) the launch-bound quickstart (0.14 ms a call, its kernels filling a
third of it) read an A/A floor of 4.5-4.9% in 10 ms batches, against issue 25's 1%, while 0.15-1.5 ms
kernels read 0.2-0.4%. Per-sample CV was 11-12% with the GPU clock steady: host-side launch
jitter. Whether longer batches help depends on that jitter's time scale — white noise per call
averages out as much in many short batches as in few long ones at the same budget; stalls of a
millisecond or more (a preempted vCPU) do not — so this measures it instead of guessing:

    python -m benchmarks.aa_floor --device cuda                 # the quickstart, 10 / 30 / 100 ms batches
    python -m benchmarks.aa_floor --device cuda --batch-ms 10,50 --budget-s 2,6 --reps 2

Each arm is one A/A measurement of the problem (the reference against itself, interleaved ABBA,
as a campaign's baseline), judged by the Critic for its noise floor; arms run in turn, repeated
``--reps`` times in rotation so drift hits them alike. Per arm: the floor, per-side CV, the
paired-ratio CV, rounds, calls per batch. The batch floor is the request's ``min_sample_s`` (the
harness never batches below 10 ms on CUDA); ``--device cpu`` runs the same arms through the CPU
timer (no batches: a check of the script, not of the question). Writes
``benchmarks/results/aa_floor_<device>.json`` with the load average.

``--dev-set`` asks issue 41's question instead: is the A/A *centred*? Over the development set's
single ops (``benchmarks/problems/l1_*.py``, one thread, the default request) each placement of the
timing inputs (``own``: a pool per side, as before; ``shared``: one pool both sides sweep, see
sandbox/harness/placement.py) measures every problem ``--reps`` times, arms alternating, and the
table prints per arm the centre (geomean of the A/A speedups), how many A/A intervals exclude 1.0
(5% would be honest), and the Critic's noise floor, for the calls of 1 ms or more:

    python -m benchmarks.aa_floor --dev-set --reps 3                 # before (own) and after (shared)
    python -m benchmarks.aa_floor --dev-set --problems relu,softmax,gelu --reps 2

Writes ``benchmarks/results/aa_centre_cpu.json`` (``aa_centre_root_cpu.json`` with ``--as-root``: the
way a campaign measures its root, the reference renamed ``ModelNew`` as the candidate).
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time

from benchmarks.common import ROOT, fmt, table, write_result

PROBLEM = ROOT / "campaigns" / "problems" / "gelu_gate.py"


def _floor(m) -> float | None:  # type: ignore[no-untyped-def]
    from arbor.agents.critic.critic import HeuristicCritic
    from arbor.agents.critic.gates import CriticConfig, Evidence

    ev = Evidence(is_root=True, attempt=1, purpose="primary", status=m.status, error_class=m.error_class,
                  error_text=m.error_text, correctness=m.correctness, fingerprint=m.fingerprint, facts=m.stats)
    j = HeuristicCritic(CriticConfig()).judge(ev, m.baseline_samples, m.candidate_samples)
    return j.noise_floor


def _cv(xs: list[float]) -> float | None:
    return statistics.stdev(xs) / statistics.fmean(xs) if len(xs) > 2 and statistics.fmean(xs) > 0 else None


def measure_arm(runner, source: str, device: str, batch_s: float, budget_s: float) -> dict:  # type: ignore[no-untyped-def]
    from arbor.sandbox.kernel_protocol import KernelRequest, measure_kernel

    req = KernelRequest(source, source, device=device, mode="aa", min_sample_s=batch_s, time_budget_s=budget_s,
                        max_repeats=100_000, timeout_s=120 + 4 * budget_s)
    m = measure_kernel(runner, req, cache=None)
    if not m.ok:
        return {"error": f"{m.error_class}: {(m.error_text or '')[:200]}"}
    base, cand = m.baseline_samples, m.candidate_samples
    ratios = [b / c for b, c in zip(base, cand) if c > 0]
    return {"floor": _floor(m), "cv_ref": _cv(base), "cv_other": _cv(cand), "ratio_cv": _cv(ratios),
            "rounds": len(base), "inner": (m.stats.get("inner_by_side") or [None])[0],
            "batched": bool(m.stats.get("cuda_batch")), "call_ms": statistics.median(base) * 1e3 if base else None}


def dev_set_arm(runner, path, placement: str, peaks: dict,  # type: ignore[no-untyped-def]
                as_root: bool = False) -> dict:
    """One A/A of one development-set problem, on one thread, inputs placed as ``placement`` says;
    the machine's peak rates measured once (``peaks``), as a campaign caches them. ``as_root``: as
    a campaign measures its root, the reference against itself renamed ``ModelNew`` and loaded as
    the candidate (mode ``ab``), instead of mode ``aa``, with the root's timing target and round cap
    (``measurement.baseline_target_ci``: arbor/targets/kernel.py)."""
    from arbor.agents.transforms import to_modelnew
    from arbor.sandbox.kernel_protocol import KernelRequest, measure_kernel

    from arbor.spec.sections import Measurement

    src, spec = path.read_text(), Measurement()
    root = dict(target_ci=spec.baseline_target_ci, max_repeats=2 * spec.max_repeats) if as_root else {}
    m = measure_kernel(runner, KernelRequest(src, to_modelnew(src) if as_root else src,
                                             mode="ab" if as_root else "aa", num_threads=1, placement=placement,
                                             timeout_s=300, **root, **peaks), cache=None)
    if not m.ok:
        return {"error": f"{m.error_class}: {(m.error_text or '')[:200]}"}
    if not peaks and m.stats.get("peak") and m.stats.get("sol_peak"):
        peaks.update(peak=m.stats["peak"], sol_peak=m.stats["sol_peak"])
    from arbor.agents.critic.stats import summarize

    st = summarize(m.baseline_samples, m.candidate_samples)
    return {"speedup": st.speedup, "ci": [st.ci_low, st.ci_high], "floor": _floor(m), "rounds": st.rounds,
            "call_ms": st.baseline_median_s * 1e3, "load": os.getloadavg()[0]}


def dev_set_rows(results: dict) -> list[dict]:
    """Per arm over the >= 1 ms calls: centre (geomean), the worst problem's centre, intervals
    that exclude 1.0, the median floor and the share of floors at most 3%."""
    rows = []
    for arm, per in results.items():
        runs = [r for rs in per.values() for r in rs if "error" not in r and r["call_ms"] >= 1.0]
        if not runs:
            continue
        logs = [math.log(r["speedup"]) for r in runs]
        worst = max((abs(math.log(statistics.fmean(r["speedup"] for r in rs if "error" not in r))), name)
                    for name, rs in per.items() if any("error" not in r and r["call_ms"] >= 1.0 for r in rs))
        floors = sorted(r["floor"] for r in runs if r["floor"] is not None)
        rows.append({"placement": arm, "runs": len(runs), "centre": math.exp(statistics.fmean(logs)),
                     "worst_centre_pct": 100 * (math.exp(worst[0]) - 1), "worst": worst[1],
                     "exclude_1": sum(not (r["ci"][0] <= 1.0 <= r["ci"][1]) for r in runs),
                     "floor_pct": 100 * statistics.median(floors) if floors else None,
                     "floors_le_3pct": sum(f <= 0.03 for f in floors)})
    return rows


def dev_set(args) -> int:  # type: ignore[no-untyped-def]
    from arbor.sandbox.local_runner import LocalRunner

    wanted = [w.strip() for w in (args.problems or "").split(",") if w.strip()]
    paths = [p for p in sorted((ROOT / "benchmarks" / "problems").glob("l1_*.py"))
             if not wanted or any(w in p.stem for w in wanted)]
    arms = [a.strip() for a in args.placements.split(",") if a.strip()]
    if not paths or any(a not in ("own", "shared") for a in arms):
        print("aa_floor: --problems matched no l1_ problem, or --placements is not a list of own/shared",
              file=sys.stderr)
        return 2
    started, load0 = time.monotonic(), os.getloadavg()
    results: dict = {a: {p.stem: [] for p in paths} for a in arms}
    peaks: dict = {}
    with LocalRunner(network="host", filesystem="host") as runner:
        for rep in range(args.reps):
            for p in paths:
                for arm in (arms if rep % 2 == 0 else arms[::-1]):  # side by side, order alternating
                    r = dev_set_arm(runner, p, arm, peaks, args.as_root)
                    results[arm][p.stem].append(r)
                    print(f"rep {rep + 1} {p.stem} {arm}: " + (r.get("error") or
                          f"{r['speedup']:.3f}x [{r['ci'][0]:.3f}, {r['ci'][1]:.3f}] floor {r['floor']:.1%} "
                          f"{r['call_ms']:.2f} ms load {r['load']:.2f}"), flush=True)
    rows = dev_set_rows(results)
    print(table([{k: (fmt(v, 3) if isinstance(v, float) else v) for k, v in r.items()} for r in rows],
                [("placement", "inputs"), ("runs", "A/As >= 1 ms"), ("centre", "centre"),
                 ("worst_centre_pct", "worst problem %"), ("worst", "worst"), ("exclude_1", "CI excl. 1.0"),
                 ("floor_pct", "median floor %"), ("floors_le_3pct", "floors <= 3%")]))
    failed = sum("error" in r for per in results.values() for rs in per.values() for r in rs)
    path = write_result("aa_centre_root_cpu" if args.as_root else "aa_centre_cpu", {
        "as_root": args.as_root, "rows": rows, "raw": results, "reps": args.reps, "failed": failed,
        "goal": "centre within 1%, floor <= 3% for >= 1 ms kernels",
        "load_avg_before": load0, "load_avg_after": os.getloadavg()}, started)
    print(f"load {load0[0]:.2f} -> {os.getloadavg()[0]:.2f}; {failed} failed; results: {path}")
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dev-set", action="store_true", help="A/A centre and floor over benchmarks/problems/l1_*")
    ap.add_argument("--problems", default="", help="--dev-set: comma-separated parts of the names to keep")
    ap.add_argument("--placements", default="own,shared", help="--dev-set: arms (own = before issue 41)")
    ap.add_argument("--as-root", action="store_true", help="--dev-set: measure as a campaign's root (mode ab, "
                    "the reference renamed ModelNew as the candidate)")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--problem", default=str(PROBLEM))
    ap.add_argument("--batch-ms", default="10,30,100", help="batch floors to compare, ms (comma-separated)")
    ap.add_argument("--budget-s", default="2", help="timing budgets per side, s (comma-separated)")
    ap.add_argument("--reps", type=int, default=1, help="rounds of all arms, in rotation")
    args = ap.parse_args(argv)
    if args.dev_set:
        return dev_set(args)
    try:
        batches = [float(x) / 1e3 for x in args.batch_ms.split(",") if x.strip()]
        budgets = [float(x) for x in args.budget_s.split(",") if x.strip()]
    except ValueError:
        print("aa_floor: --batch-ms and --budget-s take comma-separated numbers, e.g. 10,30,100", file=sys.stderr)
        return 2
    if args.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            print("aa_floor: no CUDA device here; run it on a GPU host (or --device cpu to check the script)",
                  file=sys.stderr)
            return 2
    from arbor.sandbox.local_runner import LocalRunner

    source = open(args.problem).read()
    started, load0 = time.monotonic(), os.getloadavg()
    arms = [(b, t) for t in budgets for b in batches]
    results: dict = {arm: [] for arm in arms}
    # timing, not isolation, is the question here: the device probe has its own check
    with LocalRunner(network="host", filesystem="host") as runner:
        for rep in range(args.reps):
            for arm in (arms if rep % 2 == 0 else arms[::-1]):
                results[arm].append(measure_arm(runner, source, args.device, *arm))
                print(f"rep {rep + 1} batch {arm[0] * 1e3:g} ms budget {arm[1]:g} s: {results[arm][-1]}", flush=True)
    rows = []
    for (b, t), runs in results.items():
        ok = [r for r in runs if "error" not in r]

        def med(key: str, ok: list = ok) -> float | None:
            vals = [r[key] for r in ok if r.get(key) is not None]
            return statistics.median(vals) if vals else None

        rows.append({"batch_ms": b * 1e3, "budget_s": t, "runs": len(runs), "failed": len(runs) - len(ok),
                     "floor_pct": None if med("floor") is None else 100 * med("floor"),
                     "ratio_cv_pct": None if med("ratio_cv") is None else 100 * med("ratio_cv"),
                     "cv_pct": None if med("cv_ref") is None else 100 * med("cv_ref"),
                     "rounds": med("rounds"), "inner": med("inner"), "call_ms": med("call_ms"),
                     "errors": [r["error"] for r in runs if "error" in r][:2]})
    print(table([{k: (fmt(v, 2) if isinstance(v, float) else v) for k, v in r.items() if k != "errors"} for r in rows],
                [("batch_ms", "batch ms"), ("budget_s", "budget s"), ("floor_pct", "A/A floor %"),
                 ("ratio_cv_pct", "ratio CV %"), ("cv_pct", "sample CV %"), ("rounds", "rounds"),
                 ("inner", "calls/batch"), ("call_ms", "ms/call"), ("failed", "failed")]))
    path = write_result(f"aa_floor_{args.device}", {"problem": args.problem, "rows": rows, "raw": {
        f"{b * 1e3:g}ms/{t:g}s": runs for (b, t), runs in results.items()}, "reps": args.reps,
        "load_avg_before": load0, "load_avg_after": os.getloadavg()}, started)
    print(f"load {load0[0]:.2f} -> {os.getloadavg()[0]:.2f}; results: {path}")
    return 1 if any(r["failed"] for r in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
