"""The dashboard's panels: pure functions of ``FeedState`` and the size they are given.

Each panel is built at render time for the exact width and height its layout region has (see
``Sized``), so a terminal resize re-flows every panel on the next refresh — long tables are cut
to fit rather than scrolled off screen.
"""

from __future__ import annotations

from datetime import datetime
from typing import Callable

from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.panel import Panel
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from arbor.search_tree.records import NodeRecord

from .charts import column_chart, sparkline
from .fmt import ago, clock, hms, hot_ops, utcnow, xfmt
from .feed import FeedState, verdict_stats

STATE_STYLE = {"accepted": "green", "rejected": "yellow", "failed": "red", "pruned": "dim",
               "queued": "cyan", "running": "bold cyan", "measured": "cyan", "proposed": "cyan"}
DECISION_STYLE = {"accept": "green", "reject": "yellow", "fail": "red", "remeasure": "cyan",
                  "needs_review": "magenta"}


class Sized:
    """Defers building a renderable until its region's size is known."""

    def __init__(self, build: Callable[[int, int], object]):
        self.build = build

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield self.build(options.max_width, options.height or console.height)


def node_label(n: NodeRecord) -> str:
    return n.move_id or ("baseline" if n.parent_id is None else n.specialist)


def wall_seconds(st: FeedState, now: datetime | None = None) -> float:
    """Stored wall time, plus the time since the last flush while a writer is visibly active."""
    camp = st.campaign
    if camp is None:
        return 0.0
    wall = camp.elapsed_s or 0.0
    if camp.status == "running" and camp.updated_at is not None and st.last_activity is not None:
        since = ((now or utcnow()) - camp.updated_at).total_seconds()
        if 0 < since and ((now or utcnow()) - st.last_activity).total_seconds() < 120:
            wall += since
    return wall


# --- header / footer ---------------------------------------------------------------------
def header(st: FeedState) -> Text:
    camp = st.campaign
    t = Text()  # styles go on the spans: a Text's own style would colour the whole line
    t.append(" arbor ", style="bold white on dark_green")
    if camp is None:
        return t.append(" waiting for a campaign", style="bold")
    target = (camp.spec or {}).get("target") or {}
    what = target.get("problem") or target.get("engine") or target.get("model") or ""
    what = "" if what == camp.kind else what  # never "serving serving"
    device = target.get("device")
    t.append(f" {camp.name} ", style="bold")
    t.append(f"· {camp.kind}{' ' + str(what) if what else ''}{' on ' + device if device else ''} · ")
    status_style = {"running": "bold cyan", "finished": "bold green", "interrupted": "bold yellow"}
    t.append(camp.status, style=status_style.get(camp.status, "bold"))
    t.append(f" · last write {ago(st.last_activity)}")
    final = st.final
    if final.is_win:
        t.append(f" · best [{final.node.id}] ", style="bold")
        t.append(f"{final.speedup:.3f}x", style="bold green")
        t.append(f" ({final.which}, Critic value {xfmt(final.critic)})" if final.verified else f" ({final.which})")
    return t


def footer(st: FeedState, interval: float) -> Text:
    p = st.poll
    t = Text(f" read-only · refresh {interval:.1f}s · poll {p.ms:.0f} ms, {p.rows} rows"
             f" ({p.changed} changed) · Ctrl-C to quit", style="dim")
    if p.error:
        t.append(f" · store: {p.error} (retrying)", style="bold red")
    return t


# --- progress ----------------------------------------------------------------------------
def _bar_row(t: Table, label: str, done: float, total: float | None, text: str, width: int) -> None:
    bar = ProgressBar(total=total or 1.0, completed=min(done, total) if total else 0, width=width)
    t.add_row(label, bar if total else Text("(no budget)", style="dim"), text)


def _inflight_row(t: Table, st: FeedState) -> None:
    """The node measuring now with its elapsed time against the typical measurement, and an ETA
    (evaluations left at the recent pace, capped by the wall budget left)."""
    import statistics

    typical = statistics.median(st.durations) if st.durations else None
    now = utcnow()
    running = [n for n in st.nodes.values() if n.state == "running"]
    if running:
        n = running[0]
        ran = max(0.0, (now - (n.updated_at or now)).total_seconds())
        t.add_row("now", Text(f"node {n.id} {node_label(n)}", overflow="ellipsis"),
                  f"{hms(ran)}" + (f" / ~{hms(typical)}" if typical else ""))
    b = st.budget
    camp = st.campaign
    if typical and camp is not None and camp.status == "running" and b.get("max_evaluations"):
        left = max(0, b["max_evaluations"] - st.evaluations) * typical
        if b.get("max_wall_s"):
            left = min(left, max(0.0, b["max_wall_s"] - wall_seconds(st)))
        t.add_row("ETA", Text(hms(left)), "")


def progress_panel(st: FeedState, width: int, height: int) -> Panel:
    b = st.budget
    bar_w = max(8, min(60, width - 38))  # label 11 + value 19 + borders and padding
    t = Table.grid(padding=(0, 1), expand=True)
    t.add_column(style="bold", no_wrap=True, min_width=11)
    t.add_column(no_wrap=True, overflow="ellipsis", ratio=1)
    t.add_column(no_wrap=True, min_width=19)
    max_evals = b.get("max_evaluations")
    _bar_row(t, "evaluations", st.evaluations, max_evals,
             f"{st.evaluations} / {max_evals}" if max_evals else str(st.evaluations), bar_w)
    wall, max_wall = wall_seconds(st), b.get("max_wall_s")
    _bar_row(t, "wall time", wall, max_wall, f"{hms(wall)} / {hms(max_wall)}" if max_wall else hms(wall), bar_w)
    max_tokens = b.get("max_tokens")
    if max_tokens or st.tokens:  # heuristic agents spend none: the rows go to what runs now and the ETA
        _bar_row(t, "tokens", st.tokens, max_tokens,
                 f"{st.tokens:,}" + (f" / {max_tokens:,}" if max_tokens else ""), bar_w)
    max_cost = b.get("max_cost_usd")
    if max_cost or st.cost_usd:
        _bar_row(t, "cost", st.cost_usd, max_cost,
                 f"${st.cost_usd:.4f}" + (f" / ${max_cost:.2f}" if max_cost else ""), bar_w)
    counts = Text()
    for state in ("accepted", "rejected", "failed", "pruned", "running", "queued", "measured", "proposed"):
        if st.counts.get(state):
            counts.append(f"{state} {st.counts[state]}  ", style=STATE_STYLE.get(state, ""))
    t.add_row("nodes", counts or Text("none yet", style="dim"), str(sum(st.counts.values())))
    _inflight_row(t, st)
    final = st.final  # the same node and figures as the header, the run summary and the report
    if final.node is not None and final.speedup is not None:
        path = st.best_path()
        figure = Text(f"{final.speedup:.3f}x", style="bold green")
        if final.verified:
            figure.append(f" verified · Critic {xfmt(final.critic)}", style="green")
        t.add_row("best", figure, f"node {final.node.id} · depth {len(path) - 1}")
    camp = st.campaign
    body: object = t
    if camp is not None and camp.stop_reason:  # outside the grid: a long reason must not squeeze it
        body = Group(t, Text.assemble(("stopped     ", "bold"), camp.stop_reason, overflow="ellipsis",
                                      no_wrap=True))
    return Panel(body, title="progress vs budget", border_style="blue", height=height)


# --- best score ---------------------------------------------------------------------------
def score_panel(st: FeedState, width: int, height: int) -> Panel:
    inner_w, inner_h = max(10, width - 4), max(1, height - 2)
    lines: list[Text] = []
    hot = hot_ops(st.profile)  # where the time goes in the latest profiled node (baseline, new best)
    if hot:
        lines.append(Text.assemble(("hot ops ", "bold"), (f"(node {st.profile_node}) ", "dim"), hot,
                                   no_wrap=True, overflow="ellipsis"))
    if not st.best_series:
        lines.append(Text("no finished candidate yet", style="dim"))
    else:
        final = st.final  # after the final verification the series' top may not be the final best
        verified = final.verified and final.node is not None
        chart_h = max(1, inner_h - 2 - len(lines) - verified)
        lo = min(1.0, min(st.best_series))
        hi = max(max(st.best_series), lo * 1.1)  # a flat series sits low, not mid-panel
        for row in column_chart(st.best_series, inner_w, chart_h, lo=lo, hi=hi, fmt="{:.2f}x"):
            lines.append(Text(row, style="green"))
        if verified:
            lines.append(Text(f"final best [{final.node.id}] {final.figures()}", style="bold green",
                              no_wrap=True, overflow="ellipsis"))
        lines.append(Text(f"best Critic value {xfmt(st.best_series[-1])} after {len(st.best_series)} "
                          "finished candidates", style="bold"))
    if st.speedups and len(lines) < inner_h:
        lo, hi = min(st.speedups), max(st.speedups)
        spark = sparkline(st.speedups[-(inner_w - 24):], max(4, inner_w - 24))
        lines.append(Text.assemble((f"each {lo:.2f}x ", "dim"), (spark, "cyan"), (f" {hi:.2f}x", "dim")))
    return Panel(Group(*lines[:inner_h]), title="best speedup over time", border_style="green", height=height)


# --- tree ---------------------------------------------------------------------------------
def _tree_choice(st: FeedState, budget: int) -> set[int]:
    """Which nodes to draw: best path, then nodes in flight, then the latest finished ones, then
    the best other accepted nodes (the expandable frontier) — with their ancestors — until the
    panel is full."""
    path = [n.id for n in st.best_path()]
    root = st.campaign.root_node_id if st.campaign else None
    wanted = list(path) + ([root] if root is not None else [])
    wanted += sorted(st.pending, reverse=True)
    wanted += list(reversed(st.recent_finished))
    wanted += st.top_accepted
    show: set[int] = set()
    for nid in wanted:
        chain, cur = [], st.nodes.get(nid)
        while cur is not None and cur.id not in show:
            chain.append(cur.id)
            cur = st.nodes.get(cur.parent_id) if cur.parent_id is not None else None
        if not chain:
            continue
        trial = show | set(chain)
        elided = sum(1 for s in trial if any(c not in trial for c in st.children.get(s, ())))
        if len(trial) + elided > budget and show:
            break
        show = trial
    return show


def tree_panel(st: FeedState, width: int, height: int) -> Panel:
    budget = max(3, height - 2)
    show = _tree_choice(st, budget)
    on_path = {n.id for n in st.best_path()}
    roots = sorted(i for i in show if st.nodes[i].parent_id is None or st.nodes[i].parent_id not in show)
    if not roots:
        body: object = Text("no nodes yet", style="dim")
    else:
        body = Group(*[_subtree(st, r, show, on_path) for r in roots])
    title = f"tree — ★ best path, in flight, recent ({len(st.nodes)} nodes)"
    return Panel(body, title=title, border_style="magenta", height=height)


def _label(st: FeedState, n: NodeRecord, on_path: bool) -> Text:
    t = Text()
    t.append("★ " if on_path else "  ", style="bold yellow")
    t.append(f"[{n.id}] ", style="dim")
    t.append(node_label(n), style="bold" if on_path else "")
    if n.speedup is not None:
        t.append(f" {n.speedup:.3f}x", style="green")
    t.append(f" {n.state}", style=STATE_STYLE.get(n.state, ""))
    if n.diagnosis and n.state not in ("accepted",):
        t.append(f" ({n.diagnosis})", style="dim")
    return t


def _subtree(st: FeedState, nid: int, show: set[int], on_path: set[int]) -> Tree:
    tree = Tree(_label(st, st.nodes[nid], nid in on_path), guide_style="dim")
    stack = [(tree, nid)]
    while stack:
        branch, cur = stack.pop()
        kids = st.children.get(cur, [])
        hidden = [c for c in kids if c not in show]
        for c in kids:
            if c in show:
                stack.append((branch.add(_label(st, st.nodes[c], c in on_path)), c))
        if hidden:
            states: dict[str, int] = {}
            for c in hidden:
                states[st.nodes[c].state] = states.get(st.nodes[c].state, 0) + 1
            summary = ", ".join(f"{v} {k}" for k, v in sorted(states.items()))
            branch.add(Text(f"… {len(hidden)} more ({summary})", style="dim"))
    return tree


# --- verdicts and activity ------------------------------------------------------------------
def verdicts_full_panel(st: FeedState, width: int, height: int) -> Panel:
    """The compact layout's verdict page: one line per verdict, its reason wrapped in full below."""
    lines: list[Text] = []
    for v in list(st.verdicts)[::-1][:max(1, height - 2)]:
        n = st.nodes.get(v.node_id)
        sp = verdict_stats(v).get("speedup")
        head = Text(f"{clock(v.created_at)} node {v.node_id} {node_label(n) if n else '?'} ", style="bold")
        head.append(v.decision, style=DECISION_STYLE.get(v.decision, ""))
        head.append(f" {v.diagnosis}" + (f" {sp:.3f}x" if isinstance(sp, (int, float)) else ""))
        lines += [head, Text("  " + (v.reason or ""))]
    body = Group(*lines) if lines else Text("no verdict yet", style="dim")
    return Panel(body, title="latest verdicts (Critic), reasons in full", border_style="yellow", height=height)


def verdicts_panel(st: FeedState, width: int, height: int) -> Panel:
    rows = max(1, height - 3)
    t = Table(expand=True, box=None, padding=(0, 1), show_edge=False)
    for name, kw in (("time", {"no_wrap": True}), ("node", {"justify": "right", "no_wrap": True}),
                     ("move", {"no_wrap": True, "max_width": 28}), ("verdict", {"no_wrap": True}),
                     ("diagnosis", {"no_wrap": True}), ("speedup", {"justify": "right", "no_wrap": True}),
                     ("reason", {"no_wrap": True, "overflow": "ellipsis", "ratio": 1})):
        t.add_column(name, header_style="bold", **kw)
    for v in list(st.verdicts)[::-1][:rows]:
        n = st.nodes.get(v.node_id)
        sp = verdict_stats(v).get("speedup")
        t.add_row(clock(v.created_at), str(v.node_id), node_label(n) if n else "?",
                  Text(v.decision, style=DECISION_STYLE.get(v.decision, "")), v.diagnosis,
                  f"{sp:.3f}x" if isinstance(sp, (int, float)) else "", v.reason)
    body = t if st.verdicts else Text("no verdict yet", style="dim")
    return Panel(body, title="latest verdicts (Critic)", border_style="yellow", height=height)


def _event_detail(kind: str, p: dict) -> str:
    if kind == "verdict":
        return f"{p.get('decision')} / {p.get('diagnosis')}"
    if kind == "select":
        return f"expand node {p.get('parent')}: {p.get('why', '')}"
    if kind == "propose":
        return f"{p.get('move')} (prior {p.get('prior')})"
    if kind == "baseline":
        nf = p.get("noise_floor")
        return f"noise floor {nf:.1%}" if isinstance(nf, (int, float)) else ""
    if kind == "new_best":
        sp = p.get("speedup")
        return f"node {p.get('node')} {sp:.3f}x" if isinstance(sp, (int, float)) else f"node {p.get('node')}"
    if kind == "profile":
        return hot_ops(p)
    if kind in ("run_finished",):
        return str(p.get("stop_reason", ""))
    if kind == "requeued":
        return str(p.get("reason", ""))
    return ", ".join(f"{k}={v}" for k, v in list(p.items())[:3])


def activity_panel(st: FeedState, width: int, height: int) -> Panel:
    rows = max(1, height - 3)
    t = Table(expand=True, box=None, padding=(0, 1), show_edge=False)
    with_time = width >= 80  # a narrow panel keeps the detail column rather than the clock
    if with_time:
        t.add_column("time", no_wrap=True, header_style="bold")
    t.add_column("agent", no_wrap=True, header_style="bold", max_width=14)
    t.add_column("event", no_wrap=True, header_style="bold", max_width=12)
    t.add_column("node", justify="right", no_wrap=True, header_style="bold")
    t.add_column("detail", no_wrap=True, overflow="ellipsis", ratio=1, header_style="bold")
    for e in list(st.events)[::-1][:rows]:
        detail = _event_detail(e.kind, e.payload or {})
        if e.prompt_tokens or e.completion_tokens:
            detail += f" [{e.prompt_tokens + e.completion_tokens} tok ${e.cost_usd:.4f}]"
        cells = [e.agent or "", e.kind, str(e.node_id or ""), detail]
        t.add_row(*([clock(e.created_at)] if with_time else []), *cells)
    title = f"agent activity — {st.event_count} events, {st.tokens:,} tokens, ${st.cost_usd:.2f}"
    body = t if st.events else Text("no activity yet", style="dim")
    return Panel(body, title=title, border_style="cyan", height=height)


def waiting_panel(st: FeedState, source: str, width: int, height: int) -> Panel:
    body = Text.assemble(
        ("Waiting for the campaign to start.\n\n", "bold"),
        (f"{st.waiting}\n\n", ""),
        (f"Watching {source} (read-only). Start the campaign in another terminal with\n", "dim"),
        ("  arbor run CAMPAIGN.yaml\n", "bold cyan"),
        ("and this screen attaches as soon as it appears.", "dim"),
    )
    return Panel(body, title="arbor dashboard", border_style="blue", height=height, padding=(1, 2))
