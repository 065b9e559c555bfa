"""Which bar a final best's child must clear against its parent, side by side, judged by the true
speed of what the campaign reports (arbor/campaign/verify.py: ``_simplest``, ``child_holds``).

Real campaigns (orchestrator, specialist, Critic, store, final verification) on replay landscapes
whose true speedups are known: the family-arms archetypes of the development set at three noise
levels (3%, 5%, 8% per measurement, with between-run drift) and the recorded landscapes of
``benchmarks/landscapes/``. Three rules, the same seeds:

* ``acceptance_bar``: the child stays only if its median paired ratio clears the bar a candidate
  clears to be accepted (``min_speedup``, or one plus the baseline's A/A noise) — the rule before;
* ``faster``: the child stays if its median paired ratio is above 1 — the rule now;
* ``no_pairing``: the highest final median is reported, parents are never paired.

Reported per landscape and overall: the reported final's true speedup over the landscape's
optimum (mean, geomean, worst), how many pairings ran and how many returned the parent, and the
measurements spent.

    python -m benchmarks.final_rule                  # ~5 min on 2 cores
    python -m benchmarks.final_rule --seeds 3 --noise 0.05

Writes ``benchmarks/results/final_rule.json``.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from pathlib import Path

from benchmarks.common import landscape_paths, table, write_result

RULES = ("acceptance_bar", "faster", "no_pairing")
BUDGET = 12


@contextmanager
def _rule(rule: str) -> Iterator[None]:
    """``rule`` installed in arbor/campaign/verify.py for the duration (restored after)."""
    import arbor.campaign.verify as verify

    saved = (verify.ANCESTOR_NEAR, verify._simplest, verify.child_holds)
    try:
        _patch(verify, rule)
        yield
    finally:
        verify.ANCESTOR_NEAR, verify._simplest, verify.child_holds = saved


def _patch(verify, rule: str) -> None:  # type: ignore[no-untyped-def]
    if rule == "no_pairing":
        verify.ANCESTOR_NEAR = float("inf")
    elif rule == "acceptance_bar":
        seen: dict = {}
        simplest = verify._simplest

        def remember(ctx, *a, **k):  # type: ignore[no-untyped-def]
            seen["ctx"] = ctx
            return simplest(ctx, *a, **k)

        def holds(ratios: list[float]) -> bool:
            ctx = seen["ctx"]
            bar = max(ctx.critic.config.min_speedup, 1.0 + max(ctx.noise_floor or 0.0, 0.0))
            return len(ratios) < 2 or statistics.median(ratios) >= bar

        verify._simplest, verify.child_holds = remember, holds


def _run(job: tuple) -> list[dict]:
    """One (landscape, rule) over its seeds, with its own store."""
    label, path, rule, seeds = job
    from benchmarks.archetypes import true_best
    from benchmarks.searchers import replay_seeds

    out = []
    with _rule(rule):
        for r in replay_seeds(path, label, rule, seeds, BUDGET):
            evs = r.store.events(r.campaign_id, kinds=["final_verification"])
            checks = (evs[-1].payload if evs else {}).get("ancestor_checks", [])
            out.append({"landscape": label, "rule": rule, "seed": r.seed,
                        "final_true": true_best(r.store, r.landscape, r.summary.best_node),
                        "optimum": r.landscape.optimum(), "pairings": len(checks),
                        "kept_parent": sum(c.get("kept") == "ancestor" for c in checks),
                        "measurements": r.store.measurement_count(r.campaign_id)})
    return out


def _cases(scratch: Path, noises: list[float], recorded: bool) -> list[tuple[str, str]]:
    from benchmarks.archetypes import ARCHETYPES, build_landscape

    cases = []
    for noise in noises:
        for arch in ARCHETYPES:
            if arch.adversarial:
                continue
            p = scratch / f"{arch.name}-n{noise}.json"
            build_landscape(arch, noise=noise).dump(p)
            cases.append((f"{arch.name}-n{noise}", str(p)))
    if recorded:
        cases += [(p.stem, str(p)) for p in landscape_paths(None)]
    return cases


def summarize(rows: list[dict]) -> dict:
    """Per rule: the reported final's true speed over the optimum, the pairings and their cost."""
    out = {}
    for rule in RULES:
        mine = [r for r in rows if r["rule"] == rule]
        if not mine:
            continue
        rel = [r["final_true"] / r["optimum"] for r in mine]
        out[rule] = {"campaigns": len(mine), "mean": round(statistics.fmean(rel), 4),
                     "geomean": round(statistics.geometric_mean(rel), 4), "worst": round(min(rel), 4),
                     "pairings": sum(r["pairings"] for r in mine), "kept_parent": sum(r["kept_parent"] for r in mine),
                     "measurements": sum(r["measurements"] for r in mine)}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--noise", default="0.03,0.05,0.08", help="comma-separated per-measurement noise levels")
    ap.add_argument("--no-recorded", action="store_true", help="archetypes only")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", default="final_rule")
    args = ap.parse_args()
    started = time.monotonic()
    scratch = Path(tempfile.mkdtemp(prefix="arbor-final-rule-ls-"))
    try:
        cases = _cases(scratch, [float(x) for x in args.noise.split(",")], not args.no_recorded)
        jobs = [(label, path, rule, list(range(args.seeds))) for label, path in cases for rule in RULES]
        with ProcessPoolExecutor(args.jobs) as ex:
            rows = [r for rs in ex.map(_run, jobs) for r in rs]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    per = []
    for label, _ in cases:
        line: dict = {"landscape": label}
        for rule, s in summarize([r for r in rows if r["landscape"] == label]).items():
            line[rule] = f"{s['mean']:.3f} ({s['kept_parent']}/{s['pairings']})"
        per.append(line)
    print(table(per, [("landscape", "landscape"), *((r, f"{r}: true/optimum (parent kept/pairings)") for r in RULES)]))
    overall = summarize(rows)
    print(table([{"rule": k, **v, **{f: f"{v[f]:.4f}" for f in ("geomean", "mean", "worst")}} for k, v in overall.items()],
                [("rule", "rule"), ("campaigns", "campaigns"), ("geomean", "true/optimum geomean"), ("mean", "mean"),
                 ("worst", "worst"), ("pairings", "pairings"), ("kept_parent", "parent kept"),
                 ("measurements", "measurements")]))
    path = write_result(args.out, {"seeds": args.seeds, "budget": BUDGET, "noise": args.noise, "overall": overall,
                                   "landscapes": per, "runs": rows}, started)
    print(f"wrote {path} in {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
