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
            which = (f"verified: median of {len(s.verified.get('speedups') or [])} measurements"
                     if s.verified else "Critic value")
            console.print(f"throughput ratio {s.speedup:.3f}x ({what}){ci}  ({which})")
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
    print_levels(console, sv)


def levels_tables(levels: list[dict], title: str) -> tuple[Table, Table]:
    """Per load level, the numbers `vllm bench serve` prints: request and output-token throughput,
    goodput and failures; TTFT/TPOT/ITL mean, median and p99 (ms). Two tables, so both fit 80
    columns."""
    thr = Table(title=f"{title}: throughput")
    for col, justify in (("load", "left"), ("req/s", "right"), ("out tok/s", "right"), ("goodput req/s", "right"),
                         ("failed", "right")):
        thr.add_column(col, justify=justify)
    lat = Table(title=f"{title}: latency (ms)")
    for col, justify in (("load", "left"), ("metric", "left"), ("mean", "right"), ("median", "right"),
                         ("p99", "right")):
        lat.add_column(col, justify=justify)
    for lv in levels:
        label = lv.get("label", "?")
        thr.add_row(label, _num(lv.get("req_s"), "{:.2f}"), _num(lv.get("out_tok_s"), "{:.0f}"),
                    _num(lv.get("goodput_req_s"), "{:.2f}"), _num(lv.get("failed"), "{:.0f}"))
        for m in ("ttft", "tpot", "itl"):
            lat.add_row(label if m == "ttft" else "", m.upper(),
                        *(_num(lv.get(f"{m}_{st}_ms"), "{:.1f}") for st in ("mean", "p50", "p99")))
    return thr, lat


def print_levels(console: Console, sv: dict, candidate: str = "best") -> None:
    for key, title in (("levels_baseline", "baseline"), ("levels_candidate", candidate)):
        if sv.get(key) and not (key == "levels_candidate" and sv.get("best_is_baseline")):
            for table in levels_tables(sv[key], f"{title} per load level"):
                console.print(table)


def print_node_levels(console: Console, verdicts: list[dict]) -> None:
    """``arbor show`` of a serving node: the per-level tables of its latest measured verdict."""
    for v in reversed(verdicts):
        stats = next((g["stats"] for g in v.get("gates") or [] if isinstance(g, dict) and "stats" in g), None)
        if stats and stats.get("levels_candidate"):
            print_levels(console, {**stats, "best_is_baseline": False}, candidate="this node")
            return
