"""The single-op benchmark's judgement of finished suite rows (``benchmarks/single_ops.py``): each
problem's eager, ``torch.compile`` and Arbor fractions of its speed of light, which bound binds,
whether its reference is in scope (more than ``IN_SCOPE_LEFT`` from its speed of light), and the
goals over the in-scope rows — development and held-out apart.

Pure functions over rows as ``arbor suite`` writes them (``arbor/suite/run.py``: ``eager``,
``compile``, ``best``, ``verified``, ``stop_reason``, ``campaign_s``; ``speed_of_light`` from
``arbor/suite/headroom.py``), so the table is checked on a fake run without measuring anything.
"""

from __future__ import annotations

import math

from arbor.suite.table import row_metrics

IN_SCOPE_LEFT = 1.3  # a reference within this of its speed of light has no headroom to judge a search by
GOALS = {"geomean_vs_best_of": 1.3, "memory_bound_sol_fraction": 0.5}
# the acceptance: no campaign stops "exhausted" (or on a candidate left queued for want of time:
# ``_gave_up``) with more than this share of its wall budget left while its speed of light shows
# more than IN_SCOPE_LEFT
EARLY_WALL_LEFT = 0.3


def _gave_up(reason: str) -> bool:
    """A stop that leaves the wall budget unspent by choice: no move left ("exhausted"), or a
    candidate left queued because it would not finish inside max_wall_s (a ReLU campaign once
    stopped so at 60 s of 180) — not an evaluation budget spent or a crash storm."""
    return reason.startswith("exhausted") or "would not finish inside max_wall_s" in reason


def _geomean(xs: list[float]) -> float | None:
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def judge(row: dict, wall_budget_s: float | None) -> dict:
    """One problem: speedups (Arbor's verified best, else the reference kept: 1.0), each side's
    fraction of the reference's speed of light, the bound, and how its campaign stopped."""
    sol = row.get("speed_of_light") or {}
    frac, left = sol.get("fraction"), sol.get("left")
    if left is None and isinstance(frac, (int, float)) and frac > 0:
        left = 1.0 / frac
    m = row_metrics(row)
    arbor = m["speedup_eager"]
    comp = row.get("compile")
    out = {"key": row.get("key"), "bound": sol.get("bound"), "reference_sol": frac, "left": left,
           "in_scope": bool(left and left > IN_SCOPE_LEFT), "eager": 1.0, "compile": comp, "arbor": arbor,
           "vs_best_of": m["speedup_best_of"], "verified": m["correct"], "error": row.get("error"),
           "stop_reason": row.get("stop_reason"), "campaign_s": row.get("campaign_s"),
           "wall_budget_s": wall_budget_s, "sol_note": sol.get("note"), "describe": sol.get("describe")}
    for side, ratio in (("eager", 1.0), ("compile", comp), ("arbor", arbor)):
        raw = frac * ratio if isinstance(frac, (int, float)) and ratio else None
        out[f"{side}_sol"] = min(1.0, raw) if raw is not None else None
        # faster than the bound: a bug, or (compute-bound) cheaper math than the bound assumes
        out[f"{side}_beyond"] = bool(raw is not None and raw > 1.2)
    used = row.get("campaign_s")
    wall_left = 1.0 - used / wall_budget_s if used is not None and wall_budget_s else None
    out["wall_left"] = wall_left
    out["exhausted_early"] = bool(_gave_up(row.get("stop_reason") or "") and wall_left is not None
                                  and wall_left > EARLY_WALL_LEFT and left and left > IN_SCOPE_LEFT)
    return out


def summarize(judged: list[dict]) -> dict:
    """Goals over the in-scope rows: Arbor's geomean over the best of eager and compile, and its
    fraction of the speed of light on each memory-bound one; campaigns that stopped early."""
    scope = [j for j in judged if j["in_scope"] and not j["error"]]
    memory = [j for j in scope if j["bound"] == "memory"]
    low = [j["key"] for j in memory if (j["arbor_sol"] or 0) < GOALS["memory_bound_sol_fraction"]]
    geo = _geomean([j["vs_best_of"] for j in scope])
    early = [j["key"] for j in judged if j["exhausted_early"]]
    return {"problems": len(judged), "in_scope": len(scope), "memory_bound": len(memory),
            "compute_bound": sum(1 for j in scope if j["bound"] == "compute"),
            "out_of_scope": [j["key"] for j in judged if not j["in_scope"] and not j["error"]],
            "errors": [j["key"] for j in judged if j["error"]],
            "geomean_vs_best_of": geo, "geomean_vs_eager": _geomean([j["arbor"] for j in scope]),
            "memory_bound_below_half": low, "exhausted_early": early,
            "beyond_bound": [j["key"] for j in judged if j.get("arbor_beyond") or j.get("compile_beyond")],
            "goals": {"geomean_vs_best_of": geo is not None and geo >= GOALS["geomean_vs_best_of"],
                      "memory_bound_sol_fraction": (not low) if memory else None,  # None: no such row
                      "no_early_exhausted": not early}}


def _pct(x: float | None, beyond: bool = False) -> str:
    return (">120%" if beyond else f"{x:.0%}") if isinstance(x, (int, float)) else "-"


def _met(ok: bool | None) -> str:
    return "n/a" if ok is None else "met" if ok else "NOT met"


def _x(x: float | None) -> str:
    return f"{x:.2f}x" if isinstance(x, (int, float)) else "-"


def markdown(judged: list[dict], summ: dict, title: str) -> str:
    """One table: per problem the bound, the reference's headroom, each side's speedup and fraction
    of the speed of light, and how the campaign stopped (its wall budget used)."""
    lines = [f"### {title}", "",
             "| problem | bound | left | eager | compile | Arbor | Arbor vs best-of | stop (wall used) |",
             "|---|---|---|---|---|---|---|---|"]
    for j in judged:
        if j["error"]:
            lines.append(f"| {j['key']} | error: {j['error'][:80]} | | | | | | |")
            continue
        scope = "" if j["in_scope"] else " (out of scope)"
        used = (f"{j['campaign_s']:.0f}/{j['wall_budget_s']:.0f} s" if j["campaign_s"] is not None
                and j["wall_budget_s"] else "-")
        stop = (j["stop_reason"] or "-").split(":")[0][:24] + ("  EARLY" if j["exhausted_early"] else "")
        lines.append(f"| {j['key']}{scope} | {j['bound'] or '-'} | {_x(j['left'])} | 1.00x ({_pct(j['eager_sol'])}) "
                     f"| {_x(j['compile'])} ({_pct(j['compile_sol'], j['compile_beyond'])}) "
                     f"| {_x(j['arbor'])} ({_pct(j['arbor_sol'], j['arbor_beyond'])}) "
                     f"| {_x(j['vs_best_of'])} | {stop} ({used}) |")
    g = summ["goals"]
    lines += ["", f"in scope (> {IN_SCOPE_LEFT}x from the speed of light): {summ['in_scope']} of {summ['problems']} "
                  f"({summ['memory_bound']} memory-bound, {summ['compute_bound']} compute-bound); "
                  f"Arbor geomean {_x(summ['geomean_vs_best_of'])} vs best of eager and compile "
                  f"(goal >= {GOALS['geomean_vs_best_of']}x: "
                  f"{_met(g['geomean_vs_best_of'] if summ['in_scope'] else None)}), "
                  f"{_x(summ['geomean_vs_eager'])} vs eager; memory-bound below 50% of the speed of light: "
                  f"{', '.join(summ['memory_bound_below_half']) or 'none'} "
                  f"({_met(g['memory_bound_sol_fraction'])}); beyond the bound (>120%: cheaper math than it "
                  f"assumes, or a bug): {', '.join(summ['beyond_bound']) or 'none'}; stopped 'exhausted' or on a "
                  f"candidate left queued with > "
                  f"{EARLY_WALL_LEFT:.0%} of the wall budget left and > {IN_SCOPE_LEFT}x headroom: "
                  f"{', '.join(summ['exhausted_early']) or 'none'}"]
    return "\n".join(lines)
