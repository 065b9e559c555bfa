"""The report's figures as PNG bytes (matplotlib, object API: no pyplot state, no display).

Each function takes ``ReportData`` and returns PNG bytes, or None when the campaign has nothing
to draw for that figure yet (the report then says so instead of showing an empty chart).
"""

from __future__ import annotations

import io

from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from arbor.targets import traits

from .data import ReportData

COLORS = {"accepted": "#2e7d32", "rejected": "#ef6c00", "failed": "#c62828", "pruned": "#9e9e9e",
          "pending": "#1e88e5", "rejected: unstable": "#ffcc80"}
DPI = 110


def _png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight", metadata={"Software": None})
    return buf.getvalue()


def _color(state: str) -> str:
    return COLORS.get(state, COLORS["pending"])


def _score_name(data: ReportData) -> str:
    return traits(data.campaign.kind).score_label


def best_marker_labels(data: ReportData) -> list[str]:
    """The plots' labels for the final best (``arbor/campaign/final_best.py``): its node with both
    figures, and its verified median's own line when there is one; [] without a win."""
    final = data.final
    if final is None or not final.is_win or not final.critic:
        return []
    labels = [f"best [{final.node.id}] {final.figures(2)}"]
    if final.verified:
        labels.append(f"its verified median {final.speedup:.2f}x")
    return labels


def score_over_evaluations(data: ReportData) -> bytes | None:
    evs = data.evaluations
    if not evs:
        return None
    fig = Figure(figsize=(7.5, 3.6))
    ax = fig.add_subplot()
    xs = [e.index for e in evs]
    ax.step([0] + xs, [1.0] + [e.best_so_far for e in evs], where="post", color="#1b5e20", lw=2,
            label="best accepted (Critic value)")
    final = data.final
    if final is not None and final.is_win and final.verified:  # the number the summary leads with
        ax.plot([xs[-1]], [final.speedup], marker="*", ms=12, color="#1b5e20", ls="none",
                label=f"final {best_marker_labels(data)[0]}")
    for state in ("accepted", "rejected", "failed"):
        pts = [(e.index, e.speedup) for e in evs if e.node.state == state and e.speedup is not None
               and e.node.diagnosis != "unstable"]
        if pts:
            ax.scatter(*zip(*pts), s=28, color=_color(state), label=f"{state} (measured)", zorder=3)
    noisy = [(e.index, e.speedup) for e in evs if e.node.diagnosis == "unstable" and e.speedup is not None]
    if noisy:  # too noisy to trust: drawn hollow so a lucky outlier does not read as a result
        ax.scatter(*zip(*noisy), s=28, facecolors="none", edgecolors=COLORS["rejected"], zorder=3,
                   label="rejected: unstable (estimate not trusted)")
    nospeed = [e.index for e in evs if e.speedup is None]
    if nospeed:
        ax.scatter(nospeed, [1.0] * len(nospeed), marker="x", s=30, color=COLORS["failed"],
                   label="no timing (failed / guard)", zorder=3)
    ax.axhline(1.0, color="#555", lw=0.8, ls="--")
    ax.set_xlabel("finished candidate #")
    ax.set_ylabel(_score_name(data))
    ax.set_title(f"{data.campaign.name}: score over evaluations")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    return _png(fig)


def speedup_distribution(data: ReportData) -> bytes | None:
    groups: dict[str, list[float]] = {}
    for e in data.evaluations:
        if e.speedup is not None:
            key = "rejected: unstable" if e.node.diagnosis == "unstable" else e.node.state
            groups.setdefault(key, []).append(e.speedup)
    if not groups:
        return None
    fig = Figure(figsize=(7.5, 3.2))
    ax = fig.add_subplot()
    states = [s for s in ("accepted", "rejected", "rejected: unstable", "failed") if s in groups]
    n = sum(len(v) for v in groups.values())
    ax.hist([groups[s] for s in states], bins=min(40, max(10, 2 * n)),
            stacked=True, color=[_color(s) for s in states], label=states, edgecolor="white")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.axvline(1.0, color="#555", lw=0.8, ls="--", label="reference")
    final, labels = data.final, best_marker_labels(data)
    if labels:  # the final best: its Critic value (where the histogram counts it), then its verified median
        ax.axvline(final.critic, color="#1b5e20", lw=1.5, label=labels[0])
        if final.verified:
            ax.axvline(final.speedup, color="#1b5e20", lw=1.5, ls=":", label=labels[1])
    ax.set_xlabel(f"measured {_score_name(data)}")
    ax.set_ylabel("candidates")
    ax.set_title("speedup distribution of measured candidates")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return _png(fig)


def pareto_fronts(data: ReportData) -> bytes | None:
    if not data.fronts:
        return None
    fig = Figure(figsize=(6.5, 4.0))
    ax = fig.add_subplot()
    for f, color in zip(data.fronts, ("#757575", "#2e7d32", "#1e88e5")):
        xs, ys = zip(*f.points)
        ax.plot(xs, ys, marker="o", color=color, label=f.label)
    ax.set_xlabel(data.fronts[0].x_name)
    ax.set_ylabel(data.fronts[0].y_name)
    ax.set_title("throughput–latency Pareto fronts")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _png(fig)


def _layout(data: ReportData) -> dict[int, tuple[float, int]]:
    """Tidy-ish tree layout: leaves on consecutive x, parents centred over their children."""
    children: dict[int, list[int]] = {}
    for n in data.nodes:
        if n.parent_id is not None:
            children.setdefault(n.parent_id, []).append(n.id)
    depth = {n.id: n.depth for n in data.nodes}
    pos: dict[int, tuple[float, int]] = {}
    next_x = 0.0
    roots = [n.id for n in data.nodes if n.parent_id is None]
    for r in roots:  # iterative post-order
        stack = [(r, False)]
        while stack:
            nid, done = stack.pop()
            kids = children.get(nid, [])
            if done or not kids:
                if kids:
                    pos[nid] = (sum(pos[k][0] for k in kids) / len(kids), depth[nid])
                else:
                    pos[nid] = (next_x, depth[nid])
                    next_x += 1.0
                continue
            stack.append((nid, True))
            stack.extend((k, False) for k in reversed(kids))
    return pos


def tree_figure(data: ReportData) -> bytes | None:
    if not data.nodes:
        return None
    pos = _layout(data)
    leaves = max(1, sum(1 for n in data.nodes if all(m.parent_id != n.id for m in data.nodes)))
    max_depth = max(p[1] for p in pos.values())
    fig = Figure(figsize=(min(16, max(6.5, 0.45 * leaves)), min(10, max(3.0, 1.1 * (max_depth + 1)))))
    ax = fig.add_subplot()
    on_path = set(data.best_path())
    for n in data.nodes:
        if n.parent_id is not None and n.parent_id in pos:
            (x0, y0), (x1, y1) = pos[n.parent_id], pos[n.id]
            best_edge = n.id in on_path and n.parent_id in on_path
            ax.plot([x0, x1], [-y0, -y1], color="#f9a825" if best_edge else "#bdbdbd",
                    lw=3 if best_edge else 1, zorder=1)
    label_all = len(data.nodes) <= 60
    for n in data.nodes:
        x, y = pos[n.id]
        state = n.state if n.state in COLORS else "pending"
        marker = "X" if n.state == "failed" else ("s" if n.parent_id is None else "o")
        ax.scatter([x], [-y], s=140 if n.id in on_path else 70, color=_color(state), marker=marker,
                   edgecolors="#f9a825" if n.id in on_path else "white", linewidths=2, zorder=3)
        if label_all or n.id in on_path:
            text = f"{n.id}" + (f"\n{n.speedup:.2f}x" if n.state == "accepted" and n.speedup else "")
            ax.annotate(text, (x, -y), textcoords="offset points", xytext=(0, 9), ha="center", fontsize=7)
    handles = [Line2D([], [], marker="o", ls="", color=_color(s), label=s)
               for s in ("accepted", "rejected", "failed", "pending")]
    handles.append(Line2D([], [], color="#f9a825", lw=3, label="best path"))
    ax.legend(handles=handles, fontsize=7, loc="lower right", ncol=5, frameon=False)
    ax.set_yticks([-d for d in range(max_depth + 1)], [f"depth {d}" for d in range(max_depth + 1)])
    ax.set_xticks([])
    ax.set_ylim(-max_depth - 0.8, 0.6)
    for side in ("top", "right", "bottom"):
        ax.spines[side].set_visible(False)
    ax.set_title(f"search tree: {len(data.nodes)} nodes (accepted / rejected / failed)")
    return _png(fig)


FIGURES = (
    ("score", "Score over evaluations", score_over_evaluations),
    ("speedups", "Speedup distribution", speedup_distribution),
    ("pareto", "Pareto fronts (serving)", pareto_fronts),
    ("tree", "The tree", tree_figure),
)
