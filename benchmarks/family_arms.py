"""Move families as correlated arms: evaluations spent on a family after one of its members
regressed by more than 10%, before and after the shared family posterior (issue 28).

*Before* is the prior reshaping Arbor had until then (``FixedFactors`` below: after a regression
the move x0.5 and its family x0.7, after a win the family x1.5), *after* is ``agents/priors.py``'s
shared posterior per family. Both run real campaigns (orchestrator, specialist, Critic, store) on
the replay target with 12 evaluations, as the development set does, over:

* archetypes of the development set's campaigns, as synthetic outcome models
  (``benchmarks/archetypes.py``): Softmax (five compile variants within 2% of 0.76x, nothing
  else helps — the issue's case), LayerNorm, GELU and a
  collapsible chain (families that win), a GEMM + epilogue where ``compile-freezing`` wins 1.25x
  although ``compile-default`` regressed 0.88x (a sibling of a regressing member wins: the final
  best must not get worse), MatMul (nothing regresses), Conv + ReLU. One adversarial case is
  reported apart: a sibling winning 1.3x next to a member at 0.8x, outside the spread the model
  gives a family's members (such moves belong in different families);
* the recorded landscapes in ``benchmarks/landscapes/`` (real measurements, mechanism families).

    python -m benchmarks.family_arms                      # ~5 min on 2 busy cores
    python -m benchmarks.family_arms --seeds 3 --only softmax gemm_epilogue
    python -m benchmarks.family_arms --stores runs/suite.db other.db   # the count on real campaigns

``--stores`` reads finished campaigns (e.g. an ``arbor suite`` store, before and after) and prints
the same count per campaign, so the real-CPU before/after needs no replay. Writes
``benchmarks/results/family_arms.json``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from benchmarks.archetypes import ARCHETYPES, build_landscape, true_best
from benchmarks.common import landscape_paths, table, write_result

REGRESSION = 0.9  # a member "regressed by more than 10%": measured below 0.9x its parent
BUDGET = 12


# --- the priors before issue 28 -----------------------------------------------------------------
def _fixed_factors_class():
    """``OutcomeIndex`` as it reshaped priors before the family posterior (built lazily so that
    importing this module stays cheap)."""
    from arbor.agents.knowledge.calibration import shrink
    from arbor.agents.priors import CRASHES, OutcomeIndex, PriorTrace

    class FixedFactors(OutcomeIndex):
        WIN, MOVE_REGRESSION, FAMILY_REGRESSION, MAX_WINS = 1.5, 0.5, 0.7, 2

        def __init__(self, **kw) -> None:  # type: ignore[no-untyped-def]
            super().__init__(**kw)
            self.wins: Counter = Counter()
            self.move_reg: Counter = Counter()
            self.fam_reg: Counter = Counter()

        def observe(self, n):  # type: ignore[no-untyped-def]
            self._move_of[n.id] = n.move_id
            self._parents.setdefault(n.id, n.parent_id)
            if n.move_id is None:
                return None
            rise = self._calibrate(n)
            if n.state == "accepted" and n.diagnosis == "improved" and n.family:
                self.wins[n.family] += 1
                return max(rise or 1.0, self.WIN if self.wins[n.family] <= self.MAX_WINS else 1.0)
            if n.diagnosis == "regression":
                self.move_reg[n.move_id] += 1
                if n.family:
                    self.fam_reg[n.family] += 1
                return rise or 1.0
            if n.diagnosis in CRASHES and n.parent_id is not None:
                self.crashed_below.setdefault(n.move_id, set()).add(n.parent_id)
                return rise or 1.0
            return rise

        def trace(self, move_id, family, base, parent_id):  # type: ignore[no-untyped-def]
            warm = self.warm_prior(move_id, parent_id)
            t = PriorTrace(move_id, base, "skill" if warm is None else "knowledge")
            t.value = base if warm is None else warm
            crashed = self.crashed_below.get(move_id)
            if crashed and crashed & self.ancestors(parent_id):
                t.scale("crashed", 0.0)
                return t
            if family:
                shrunk = shrink(t.value, self.calibration.get(family))
                if t.value > 0:
                    t.scale("calibration", shrunk / t.value)
                t.scale("family wins", self.WIN ** min(self.wins[family], self.MAX_WINS))
                t.scale("family regressions", self.FAMILY_REGRESSION ** (self.fam_reg[family] - self.move_reg[move_id]))
            t.scale("move regressions", self.MOVE_REGRESSION ** self.move_reg[move_id])
            return t

    return FixedFactors


# --- the count ---------------------------------------------------------------------------------
def _measured_speedup(store, n) -> float | None:  # type: ignore[no-untyped-def]
    """A node's measured speedup: the node's own (accepted, or rejected since issue 28), else the
    last verdict's statistics (stores written before)."""
    if n.speedup:
        return n.speedup
    for v in reversed(store.verdicts(n.id)):
        for g in v.gates:
            if isinstance(g, dict) and isinstance((g.get("stats") or {}).get("speedup"), (int, float)):
                return g["stats"]["speedup"]
    return None


def family_spend(store, campaign_id: int) -> dict:  # type: ignore[no-untyped-def]
    """Per family: the first member measured below ``REGRESSION`` x its parent, and how many of the
    family's candidates were measured after it (in the order they were proposed)."""
    nodes = sorted(store.nodes(campaign_id), key=lambda n: n.id)
    by_id = {n.id: n for n in nodes}
    first: dict[str, int] = {}
    after: Counter = Counter()
    wins: Counter = Counter()
    members: Counter = Counter()
    for n in nodes:
        if n.parent_id is None or not n.family or n.state == "pruned":
            continue
        members[n.family] += 1
        if n.family in first:
            after[n.family] += 1
            wins[n.family] += n.state == "accepted" and n.diagnosis == "improved"
            continue
        sp = _measured_speedup(store, n)
        parent = by_id.get(n.parent_id)
        base = 1.0 if parent is None or parent.parent_id is None else (parent.speedup or 1.0)
        if sp is not None and sp / base < REGRESSION:
            first[n.family] = n.id
    return {"regressed": sorted(first), "after": sum(after.values()), "after_won": sum(wins.values()),
            "by_family": dict(after), "evaluations": sum(members.values())}


def _run(job: tuple) -> list[dict]:
    """One (landscape, variant) over its seeds, in a worker process with its own store."""
    label, path, variant, seeds = job
    import arbor.agents.orchestrator.heuristic as heuristic

    from benchmarks.searchers import replay_seeds

    original = heuristic.OutcomeIndex
    if variant == "before":
        heuristic.OutcomeIndex = _fixed_factors_class()
    out = []
    try:
        for r in replay_seeds(path, label, variant, seeds, BUDGET, _scratch()):
            out.append({"landscape": label, "variant": variant, "seed": r.seed, **family_spend(r.store, r.campaign_id),
                        "final_true": true_best(r.store, r.landscape, r.summary.best_node),
                        "optimum": r.landscape.optimum(), "stop": r.summary.stop_reason, "wall_s": round(r.wall_s, 2)})
    finally:
        heuristic.OutcomeIndex = original
    return out


def _scratch() -> str | None:
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None


def _summary(rows: list[dict], label: str) -> dict:
    out = {"landscape": label}
    for v in ("before", "after"):
        mine = [r for r in rows if r["variant"] == v]
        out[f"{v}_after_regression"] = sum(r["after"] for r in mine) / max(len(mine), 1)
        out[f"{v}_wasted"] = sum(r["after"] - r["after_won"] for r in mine) / max(len(mine), 1)
        out[f"{v}_evals"] = sum(r["evaluations"] for r in mine) / max(len(mine), 1)
        out[f"{v}_final"] = statistics.median(r["final_true"] for r in mine) if mine else None
        out[f"{v}_final_min"] = min((r["final_true"] for r in mine), default=None)
    b, a = out["before_after_regression"], out["after_after_regression"]
    out["change"] = f"{(a - b) / b:+.0%}" if b else "-"
    return out


def replayed(args) -> int:  # type: ignore[no-untyped-def]
    started = time.monotonic()
    scratch = Path(tempfile.mkdtemp(prefix="arbor-family-ls-"))
    cases: list[tuple[str, str, dict]] = []
    try:
        for arch in ARCHETYPES:
            if args.only and arch.name not in args.only:
                continue
            p = scratch / f"{arch.name}.json"
            build_landscape(arch).dump(p)
            cases.append((arch.name, str(p), {"what": arch.what, "sibling_wins": arch.sibling_wins,
                                               "adversarial": arch.adversarial, "kind": "archetype"}))
        if not args.no_recorded:
            for p in landscape_paths(None):
                if args.only and p.stem not in args.only:
                    continue
                cases.append((p.stem, str(p), {"what": "recorded landscape", "sibling_wins": False,
                                               "adversarial": False, "kind": "recorded"}))
        seeds = list(range(args.seeds))
        jobs = [(label, path, v, seeds) for label, path, _ in cases for v in ("before", "after")]
        if args.jobs > 1:
            with ProcessPoolExecutor(args.jobs) as ex:
                results = list(ex.map(_run, jobs))
        else:
            results = [_run(j) for j in jobs]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    rows = [r for rs in results for r in rs]
    summ = [{**_summary([r for r in rows if r["landscape"] == label], label), **info} for label, _, info in cases]
    print(table(summ, [("landscape", "landscape"), ("before_after_regression", "after-regression evals before"),
                       ("after_after_regression", "after"), ("change", "change"), ("before_wasted", "not won before"),
                       ("after_wasted", "after"), ("before_evals", "evals before"),
                       ("after_evals", "evals after"), ("before_final", "final best before"),
                       ("after_final", "final best after")]))
    counted = [s for s in summ if not s["adversarial"]]
    before = sum(s["before_after_regression"] for s in counted)
    after = sum(s["after_after_regression"] for s in counted)
    w_before = sum(s["before_wasted"] for s in counted)
    w_after = sum(s["after_wasted"] for s in counted)
    losses = [s["landscape"] for s in counted if s["after_final"] is not None and s["before_final"] is not None
              and s["after_final"] < 0.98 * s["before_final"]]
    sibling = [s for s in counted if s["sibling_wins"]]
    sib_ok = all(s["after_final_min"] >= 0.98 * s["before_final"] for s in sibling)
    head = {"after_regression_before": round(before, 2), "after_regression_after": round(after, 2),
            "reduction": round(1 - after / before, 3) if before else None, "goal_reduction": 0.6,
            "not_won_before": round(w_before, 2), "not_won_after": round(w_after, 2),
            "not_won_reduction": round(1 - w_after / w_before, 3) if w_before else None,
            "final_best_losses": losses, "sibling_wins_kept": sib_ok}
    print(f"\nevaluations on a family after its first member regressed > 10% (mean per campaign, summed over "
          f"landscapes, adversarial case apart): before {before:.1f}, after {after:.1f}"
          + (f" ({1 - after / before:.0%} fewer; goal >= 60%)" if before else ""))
    print(f"of those, the ones that did not win (the waste): before {w_before:.1f}, after {w_after:.1f}"
          + (f" ({1 - w_after / w_before:.0%} fewer)" if w_before else ""))
    for kind in ("archetype", "recorded"):
        mine = [s for s in counted if s["kind"] == kind]
        b, a = sum(s["before_after_regression"] for s in mine), sum(s["after_after_regression"] for s in mine)
        if b:
            head[f"{kind}_reduction"] = round(1 - a / b, 3)
            print(f"  {kind} landscapes only: before {b:.1f}, after {a:.1f} ({1 - a / b:.0%} fewer)")
    print(f"final best worse by > 2% (median over seeds): {', '.join(losses) or 'nowhere'}; "
          f"where a sibling of a regressing member wins, every seed kept it: {sib_ok}")
    path = write_result(args.out, {"seeds": args.seeds, "budget": BUDGET, "regression": REGRESSION,
                                   "headline": head, "landscapes": summ, "runs": rows}, started)
    print(f"wrote {path} in {time.monotonic() - started:.0f} s")
    return 0


def from_stores(args) -> int:  # type: ignore[no-untyped-def]
    """The same count on finished campaigns (a suite's store before and after, say)."""
    from arbor.campaign.source import open_source

    rows = []
    for target in args.stores:
        _, store = open_source(target)
        try:
            for camp in store.list_campaigns():
                spend = family_spend(store, camp.id)
                rows.append({"store": Path(str(target)).name, "campaign": camp.name, **spend,
                             "regressed": ", ".join(spend["regressed"]) or "-", "stop": (camp.stop_reason or "")[:60]})
        finally:
            store.close()
    print(table(rows, [("store", "store"), ("campaign", "campaign"), ("evaluations", "evaluations"),
                       ("after", "after-regression evals"), ("regressed", "families that regressed > 10%"),
                       ("stop", "stop reason")]))
    for name in sorted({r["store"] for r in rows}):
        mine = [r for r in rows if r["store"] == name]
        print(f"{name}: {sum(r['after'] for r in mine)} evaluations after a family's first > 10% regression, "
              f"over {len(mine)} campaigns and {sum(r['evaluations'] for r in mine)} evaluations")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--only", nargs="*", help="archetype or recorded landscape names")
    ap.add_argument("--no-recorded", action="store_true", help="archetypes only")
    ap.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--stores", nargs="*", help="count on these finished stores instead of replaying")
    ap.add_argument("--out", default="family_arms")
    args = ap.parse_args(argv)
    if args.stores:
        return from_stores(args)
    return replayed(args)


if __name__ == "__main__":
    sys.exit(main())
