"""The serving part of the campaign summary: objective, Pareto improvement and both fronts."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table


def _num(v, fmt: str = "{:.1f}") -> str:
    return "—" if v is None else fmt.format(v)


def print_serving(console: Console, s) -> None:
    sv = s.serving
    what = "throughput at the SLO" if sv.get("metric") == "throughput_at_slo" else "hypervolume"
    console.print(f"objective     {what} (the Critic's metric for this campaign)")
    console.print(f"baseline      {_num(sv.get('objective_baseline'), '{:.2f}')} req/s at the SLO")
    if sv.get("best_is_baseline"):
        console.print("best          the baseline (no candidate was accepted)")
    else:
        ci = ""
        if sv.get("ci_low") is not None:
            ci = f"  95% CI [{sv['ci_low']:.3f}, {sv['ci_high']:.3f}]"
        console.print(f"best          {_num(sv.get('objective_candidate'), '{:.2f}')} req/s at the SLO  "
                      f"(node {s.best_node})")
        if s.speedup is not None:
            console.print(f"improvement   {s.speedup:.3f}x {what}{ci}  (Critic-verified)")
        ref = sv.get("reference_point") or [0, 0]
        console.print(f"Pareto        {sv.get('pareto_improvement_pct', 0.0):+.1f}% hypervolume vs the baseline "
                      f"(reference point {ref[0]:g} req/s, {ref[1]:.0f} ms)")
    if sv.get("best_config"):
        console.print("best config   " + ", ".join(f"{k}={v}" for k, v in sv["best_config"].items()))
    lv_b, lv_c = sv.get("levels_baseline") or [], sv.get("levels_candidate") or []
    on_b = {p[2] for p in sv.get("front_baseline") or []}
    on_c = {p[2] for p in sv.get("front_candidate") or []}
    lat = next((k for k in (lv_b[0] if lv_b else {}) if k.startswith("e2e_p")), "e2e_p99_ms")
    pct = lat[len("e2e_"):-len("_ms")]
    t = Table(title="throughput–latency fronts (median over rounds; * = on the Pareto front)")
    t.add_column("load")
    for col in ("baseline req/s", f"{pct} E2E ms", "SLO"):
        t.add_column(col, justify="right")
    if not sv.get("best_is_baseline"):
        for col in ("best req/s", f"{pct} E2E ms", "SLO"):
            t.add_column(col, justify="right")
    for i, b in enumerate(lv_b):
        row = [b["label"], _num(b["req_s"], "{:.2f}") + ("*" if b["label"] in on_b else ""), _num(b.get(lat), "{:.0f}"),
               "ok" if b.get("meets_slo") else "miss"]
        if not sv.get("best_is_baseline") and i < len(lv_c):
            c = lv_c[i]
            row += [_num(c["req_s"], "{:.2f}") + ("*" if c["label"] in on_c else ""), _num(c.get(lat), "{:.0f}"),
                    "ok" if c.get("meets_slo") else "miss"]
        t.add_row(*row)
    console.print(t)
