"""``arbor compare A B``: two campaigns side by side — best, evaluations to the best, outcome
per move family, and the best-so-far curves of both in one plot. Built on the report's data
(``data.load``), so both sides are read exactly as their own reports read them."""

from __future__ import annotations

import io
from collections import Counter
from dataclasses import dataclass, field

from .data import ReportData


@dataclass
class Side:
    name: str
    evaluations: int
    best_speedup: float | None  # None: nothing beat the baseline
    best_node: int | None
    evals_to_best: int | None
    stop_reason: str | None
    curve: list[float] = field(default_factory=list)  # best so far after each finished candidate
    families: dict[str, Counter] = field(default_factory=dict)  # family -> state counts

    def to_dict(self) -> dict:
        return {"name": self.name, "evaluations": self.evaluations, "best_speedup": self.best_speedup,
                "best_node": self.best_node, "evals_to_best": self.evals_to_best, "stop_reason": self.stop_reason,
                "curve": self.curve, "families": {k: dict(v) for k, v in self.families.items()}}


def side(d: ReportData) -> Side:
    best = d.best if d.best is not None and d.best.parent_id is not None else None
    to_best = next((e.index for e in d.evaluations if best is not None and e.node.id == best.id), None)
    families: dict[str, Counter] = {}
    for n in d.nodes:
        if n.parent_id is None or n.state not in ("accepted", "rejected", "failed", "pruned"):
            continue
        fam = n.family or (n.move_id or "?").split(":")[0]
        families.setdefault(fam, Counter())[n.state] += 1
    return Side(d.campaign.name, len(d.evaluations), best.speedup if best else None, best.id if best else None,
                to_best, d.campaign.stop_reason, [e.best_so_far for e in d.evaluations], families)


def rows(a: Side, b: Side) -> list[list[str]]:
    def x(v):
        return "no win" if v is None else f"{v:.3f}x"

    out = [["best", x(a.best_speedup), x(b.best_speedup)],
           ["best node", str(a.best_node or "—"), str(b.best_node or "—")],
           ["evaluations to best", str(a.evals_to_best or "—"), str(b.evals_to_best or "—")],
           ["evaluations", str(a.evaluations), str(b.evaluations)],
           ["stop reason", a.stop_reason or "—", b.stop_reason or "—"]]
    for fam in sorted(set(a.families) | set(b.families)):
        def cell(s: Side) -> str:
            c = s.families.get(fam)
            return "—" if not c else ", ".join(f"{k} {v}" for k, v in sorted(c.items()))
        out.append([f"family {fam}", cell(a), cell(b)])
    return out


def plot(a: Side, b: Side) -> bytes | None:
    if not a.curve and not b.curve:
        return None
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 4), dpi=100)
    ax = fig.add_subplot()
    for s, style in ((a, "-"), (b, "--")):
        if s.curve:
            ax.step(range(1, len(s.curve) + 1), s.curve, style, where="post", label=s.name)
    ax.set_xlabel("evaluation")
    ax.set_ylabel("best speedup so far (x)")
    ax.axhline(1.0, color="grey", linewidth=0.8)
    ax.legend()
    ax.grid(alpha=0.3)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    return buf.getvalue()


def markdown(a: Side, b: Side, png_name: str | None) -> str:
    lines = [f"# Arbor compare: {a.name} vs {b.name}", "", f"| | {a.name} | {b.name} |", "| --- | --- | --- |"]
    lines += [f"| {r[0]} | {r[1]} | {r[2]} |" for r in rows(a, b)]
    if png_name:
        lines += ["", f"![best speedup over evaluations]({png_name})"]
    return "\n".join(lines) + "\n"
