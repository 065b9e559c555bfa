"""The suite's table: per problem correct?, speedup vs eager and vs compile; fast_p and geomeans,
with and without the wins that come from an algebraic collapse (``collapse.py``).

Every row names the precision mode it was measured in (``target.precision``: fp32, fp16, bf16), and
the summary line names the modes of the whole table: speedups in different modes are not
comparable, and a bf16 result must never read as an fp32 one."""

from __future__ import annotations

import math

from .headroom import cell as sol_cell

FAST_P = (1.0, 1.1, 1.2, 1.5, 2.0)


def row_metrics(row: dict) -> dict:
    """Derived columns of one problem's row (its measured eager/compile/best ratios)."""
    best, comp = row.get("best"), row.get("compile")
    correct = bool(row.get("verified")) and best is not None
    speedup = best if correct else 1.0  # no verified result: the user keeps the reference
    out = {"correct": correct, "speedup_eager": speedup}
    # what the user ends with is correct either way: the verified win, or the reference itself kept
    # because nothing beat it (KernelBench counts a correct program at 1.0x as correct, not fast)
    out["result_ok"] = correct or (row.get("eager") is not None and "error" not in row)
    out["speedup_compile"] = speedup / comp if comp else None
    out["speedup_best_of"] = speedup / max(1.0, comp or 1.0)
    # a verified win whose move path collapsed the graph (None: not known for this row)
    marks = row.get("collapse")
    out["collapse"] = (bool(marks) and correct) if marks is not None else None
    return out


def _geomean(xs: list[float]) -> float | None:
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def summary(rows: list[dict]) -> dict:
    done = [r for r in rows if "error" not in r]
    mets = [row_metrics(r) for r in done]
    n = len(rows)
    out = {
        "precision": precisions(rows),
        "problems": n,
        "finished": len(done),
        "verified_fraction": sum(m["correct"] for m in mets) / n if n else 0.0,
        "result_fraction": sum(m["result_ok"] for m in mets) / n if n else 0.0,
        "geomean_vs_eager": _geomean([m["speedup_eager"] for m in mets]),
        "geomean_vs_compile": _geomean([m["speedup_compile"] for m in mets if m["speedup_compile"]]),
        "geomean_vs_best_of": _geomean([m["speedup_best_of"] for m in mets]),
        "slower_than_eager": sum(1 for m in mets if m["speedup_eager"] < 1.0),
    }
    # without the algebraic collapses: one 100x problem lifts a geomean more than every other win
    rest = [m for m in mets if not m["collapse"]]
    out.update(collapses=sum(1 for m in mets if m["collapse"]),
               collapse_unknown=sum(1 for m in mets if m["collapse"] is None),
               geomean_vs_eager_no_collapse=_geomean([m["speedup_eager"] for m in rest]),
               geomean_vs_best_of_no_collapse=_geomean([m["speedup_best_of"] for m in rest]))
    for p in FAST_P:  # KernelBench fast_p: correct and faster than p x eager, over all problems
        out[f"fast_{p:g}"] = sum(1 for m in mets if m["correct"] and m["speedup_eager"] > p) / n if n else 0.0
    return out


def precisions(rows: list[dict]) -> str:
    """The precision modes of the rows, e.g. ``fp32`` or ``bf16, fp32`` (rows from before
    precision modes count as fp32, what they measured)."""
    return ", ".join(sorted({r.get("precision") or "fp32" for r in rows})) or "fp32"


def _f(x, digits: int = 2) -> str:  # type: ignore[no-untyped-def]
    return "-" if x is None else f"{x:.{digits}f}"


def _collapse_cell(row: dict, m: dict) -> str:
    if m["collapse"] is None:
        return "?"
    return ", ".join(row["collapse"]) if m["collapse"] else "-"


def _without_line(summ: dict) -> str:
    n = summ.get("collapses", 0)
    unknown = summ.get("collapse_unknown", 0)
    tail = f" ({unknown} row(s) not known: no store to read their move path)" if unknown else ""
    return (f"without the {n} win(s) from an algebraic collapse: geomean vs eager "
            f"{_f(summ.get('geomean_vs_eager_no_collapse'))}x, vs best-of(eager, compile) "
            f"{_f(summ.get('geomean_vs_best_of_no_collapse'))}x{tail}")


def markdown(rows: list[dict], summ: dict) -> str:
    lines = ["| problem | level | precision | scale | eager ms | verified win | vs eager | compile vs eager "
             "| vs compile | vs best-of | collapse | reference vs speed of light |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        mode = r.get("precision") or "fp32"
        if "error" in r:
            lines.append(f"| {r['key']} | {r.get('level') or '-'} | {mode} | - | - | error | - | - | - | - | - | - |")
            continue
        m = row_metrics(r)
        lines.append(f"| {r['key']} | {r.get('level') or '-'} | {mode} | {r.get('scale', '-')} | "
                     f"{_f(r.get('eager_ms'), 1)} | "
                     f"{'yes' if m['correct'] else 'no'} | {_f(m['speedup_eager'])} | {_f(r.get('compile'))} | "
                     f"{_f(m['speedup_compile'])} | {_f(m['speedup_best_of'])} | {_collapse_cell(r, m)} | {sol_cell(r)} |")
    fast = ", ".join(f"fast_{p:g} {summ[f'fast_{p:g}']:.0%}" for p in FAST_P)
    lines += ["", f"precision {summ.get('precision') or precisions(rows)}: "
                  f"geomean vs eager {_f(summ['geomean_vs_eager'])}x, vs compile {_f(summ['geomean_vs_compile'])}x, "
                  f"vs best-of(eager, compile) {_f(summ['geomean_vs_best_of'])}x; "
                  f"correct results {summ['result_fraction']:.0%} (verified wins {summ['verified_fraction']:.0%}, "
                  "the reference kept elsewhere); "
                  f"slower than eager: {summ['slower_than_eager']}; {fast}",
              "", _without_line(summ)]
    for r in rows:
        if "error" in r:
            lines.append(f"- {r['key']}: {r['error']}")
    return "\n".join(lines) + "\n"
