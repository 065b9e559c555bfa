"""Markdown tables for docs/performance.md, from ``benchmarks/results/*.json``.

    python -m benchmarks.report            # prints the tables of the latest results

Generating the published numbers from the result files (rather than copying them by hand) keeps the
two in step; rerun the benchmarks, then this, and paste.
"""

from __future__ import annotations

import json
import sys

from benchmarks.common import RESULTS, fmt


def _load(name: str) -> dict | None:
    p = RESULTS / f"{name}.json"
    return json.loads(p.read_text()) if p.is_file() else None


def _md(rows: list[list], head: list[str]) -> str:
    out = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def _machine(d: dict) -> str:
    m = d.get("machine", {})
    load = m.get("load_avg_at_start")
    return (f"{m.get('cores')} cores ({m.get('cpu')}), shared; load average at start "
            f"{load[0] if load else '?'}; commit {m.get('commit')}; {d.get('finished')}; {d.get('duration_s')} s")


def search(d: dict) -> str:
    parts = [f"*{_machine(d)}; {d['seeds']} seeds, target {d['threshold']:.0%} of the optimum*", ""]
    rows = []
    for name, ls in d["landscapes"].items():
        info = ls["info"]
        for k, r in enumerate(ls["summary"]):
            iqr = f"{fmt(r['q1'], 0)}–{fmt(r['q3'], 0)}"
            rows.append([name if k == 0 else "", r["method"], fmt(r["median"], 0), iqr,
                         f"{r['reached']}/{r['n']}", fmt(r["vs_tpe"], 2), fmt(r["vs_random"], 2)])
        rows.append([f"↳ {info['ok_points']} points, optimum {info['optimum']:.2f}x, {info['within_threshold']} "
                     f"within target, default {info['default_speedup'] or 0:.2f}x", "", "", "", "", "", ""])
    parts.append(_md(rows, ["landscape", "searcher", "evaluations (median)", "IQR", "reached", "× TPE", "× random"]))
    return "\n".join(parts)


def overhead(d: dict) -> str:
    rows = [[f"{r['nodes']:,}", fmt(r["step_wall_ms_median"]), fmt(r["step_wall_ms_p90"]),
             fmt(r["step_cpu_ms_median"]), fmt(r["phases_ms_median"]["select"]), fmt(r["phases_ms_median"]["critique"]),
             fmt(r.get("graph_ms_median")), fmt(r["first_step_ms"] / 1e3, 1)] for r in d["results"]]
    return f"*{_machine(d)}*\n\n" + _md(rows, ["nodes", "step ms (median)", "p90", "CPU ms", "select ms",
                                                "critique ms", "LangGraph ms", "first step s (index load)"])


def fidelity(d: dict) -> str:
    out = [f"*{_machine(d)}*", ""]
    rm = d.get("repeated_measurements")
    if rm:
        out.append(f"- one kernel ({rm['kernel']}, reference vs itself), {len(rm['runs'])} real runs: within-run robust "
                   f"CV {100 * rm['within_run_robust_cv_median']:.1f}%, between-run CV of the median "
                   f"{100 * (rm['between_run_cv_of_median'] or 0):.1f}%, of the A/A speedup "
                   f"{100 * (rm['between_run_cv_of_speedup'] or 0):.1f}% (A/A speedups "
                   f"{rm['aa_speedup_range'][0]:.3f}–{rm['aa_speedup_range'][1]:.3f})")
    fa = d.get("aa_false_accept") or {}
    if fa.get("trials"):
        out.append(f"- A/A false accepts through the Critic: {fa['false_accepts']}/{fa['trials']} = "
                   f"{100 * fa['rate']:.2f}% (95% CI {100 * fa['wilson95'][0]:.2f}–{100 * fa['wilson95'][1]:.2f}%)")
    ia = d.get("integrity_aa_false_accept")
    if ia:
        out.append(f"- the integrity A/A benchmark ({ia.get('source')}) is included in the JSON")
    out.append("")
    rows = [[r["landscape"], fmt(100 * (r["within_run_robust_cv_median"] or 0), 1),
             fmt(100 * (r["between_run_speedup_cv_median"] or 0), 1), fmt(100 * (r["between_run_speedup_cv_p90"] or 0), 1)]
            for r in d.get("landscape_noise", [])]
    out.append(_md(rows, ["landscape", "within-run robust CV %", "between-run CV of speedup % (median)", "p90"]))
    out.append("")
    rows = [[r["landscape"], ", ".join(f"{f['reported']:.3f}" for f in r["finals"]), fmt(r["reported_spread_pp"], 1),
             fmt(r["reported_spread_rel_pct"], 1), r["distinct_finals"]] for r in d.get("campaign_spread", [])]
    out.append(_md(rows, ["landscape (5 identical replayed campaigns)", "final reported speedups", "spread pp",
                          "spread % of result", "distinct final configs"]))
    return "\n".join(out)


def store(d: dict) -> str:
    rows = []
    for r in d["results"]:
        s = r["select_ms"]
        rows.append([f"{r['nodes']:,}", fmt(r["api_nodes_per_s_empty"], 0), fmt(r["api_nodes_per_s_full"], 0),
                     fmt(r["bulk_nodes_per_s"], 0), fmt(r["bytes_per_node"], 0), fmt(r["index_load_s"], 1),
                     fmt(s["total"]), fmt(s["orchestrator"]), fmt(s["refresh"]), fmt(s.get("eval_count_once", s.get("eval_count"))),
                     fmt(max(r["dashboard_ms"].values()))])
    head = ["nodes", "API nodes/s (empty)", "API nodes/s (full)", "bulk nodes/s", "bytes/node", "index load s",
            "select ms/step", "orchestrator ms", "refresh ms", "eval count ms (once per run)", "slowest dashboard query ms"]
    out = [f"*{_machine(d)}*", "", _md(rows, head), ""]
    for r in d["results"]:
        out.append(f"Dashboard queries at {r['nodes']:,} nodes (ms): " +
                   ", ".join(f"{k} {v:.1f}" for k, v in r["dashboard_ms"].items()))
    return "\n".join(out)


def main() -> int:
    for name, fn in (("search_efficiency", search), ("overhead", overhead), ("fidelity", fidelity),
                     ("store_scale", store)):
        d = _load(name)
        print(f"\n### {name}\n")
        print(fn(d) if d else f"(no benchmarks/results/{name}.json yet)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
