"""Terminal output for the CLI: progress lines while a campaign runs, and rich tables for the
read commands. Presentation only; data comes from ``history`` and ``arbor.campaign.run``."""

from __future__ import annotations

import time

from rich.console import Console
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, ProgressColumn, SpinnerColumn, TextColumn,
                           TimeElapsedColumn)
from rich.table import Table
from rich.text import Text

STATE_STYLE = {"accepted": "green", "rejected": "yellow", "failed": "red", "pruned": "dim",
               "queued": "cyan", "running": "cyan", "measured": "cyan", "proposed": "cyan"}


def _ms(s: float | None) -> str:
    return "—" if s is None else f"{s * 1e3:.3f} ms"


def _dur(s: float) -> str:
    return f"{s:.0f}s" if s < 120 else f"{s / 60:.0f}m"


class InFlightColumn(ProgressColumn):
    """What is measuring now and for how long (against its expected duration), and the ETA."""

    def render(self, task) -> Text:
        f = task.fields
        if not f.get("what"):
            return Text(task.description, style="dim")
        ran = time.monotonic() - f["since"]
        exp = f" / ~{_dur(f['expected'])}" if f.get("expected") else ""
        eta = f"  ETA {_dur(f['eta'])}" if f.get("eta") is not None else ""
        return Text(f"{f['what']} {_dur(ran)}{exp}{eta}", style="dim")


class Reporter:
    """Receives (kind, payload) from the loop; one line per verdict unless quiet.

    With ``total`` (the evaluation budget) and a terminal, a progress bar stays at the bottom
    while the lines scroll above it (use the reporter as a context manager). ``done`` is what
    earlier runs of a resumed campaign already measured."""

    def __init__(self, console: Console, quiet: bool = False, total: int | None = None, done: int = 0):
        self.console = console
        self.quiet = quiet
        self.t0 = time.monotonic()
        self._started: set[int] = set()
        self.progress: Progress | None = None
        if not quiet and total is not None and console.is_terminal:
            self.progress = Progress(
                SpinnerColumn(), TextColumn("[bold]evaluations"), BarColumn(), MofNCompleteColumn(),
                TimeElapsedColumn(), TextColumn("{task.fields[best]}"), InFlightColumn(),
                console=console, transient=True)
            self._task = self.progress.add_task("starting", total=total, completed=min(done, total), best="",
                                                what="", since=time.monotonic(), expected=None, eta=None)

    def __enter__(self) -> "Reporter":
        if self.progress is not None:
            self.progress.start()
        return self

    def __exit__(self, *exc) -> None:
        if self.progress is not None:
            self.progress.stop()

    def _advance(self, kind: str, data: dict) -> None:
        if self.progress is None:
            return
        if kind == "measuring":
            n = data["node"]
            if n.parent_id is not None and data["purpose"] == "primary":
                self._started.add(n.id)
            verb = "verifying" if data["purpose"] == "final" else "measuring"
            self.progress.update(self._task, what=f"{verb} node {n.id}", since=time.monotonic(),
                                 expected=data.get("expected_s"), eta=data.get("eta_s"))
        elif kind == "verdict" and data["node"].id in self._started:
            # an evaluation is a candidate measured at least once (as stopping.py counts them):
            # it counts when its first measurement has been judged
            self._started.discard(data["node"].id)
            self.progress.update(self._task, advance=1, what="")
        elif kind == "new_best":
            self.progress.update(self._task, best=f"[green]best {data['node'].speedup:.3f}x")

    def __call__(self, kind: str, data: dict) -> None:
        if self.quiet:
            return
        self._advance(kind, data)
        t = f"[dim]{time.monotonic() - self.t0:6.1f}s[/]"
        if kind == "measuring":
            n = data["node"]
            what = "baseline (A/A)" if n.parent_id is None else (n.move_id or "candidate")
            extra = "" if data["purpose"] == "primary" else f" \\[{data['purpose']}]"  # literal brackets
            self.console.print(f"{t} measuring node {n.id}: {what}{extra}", markup=True)
        elif kind == "verdict":
            n, j = data["node"], data["judgement"]
            style = {"accept": "green", "reject": "yellow", "fail": "red"}.get(j.decision, "cyan")
            self.console.print(f"{t}   [{style}]{j.decision:9s}[/] {j.diagnosis:14s} {j.reason}", markup=True)
        elif kind == "new_best":
            n = data["node"]
            self.console.print(f"{t} [bold green]new best[/]: node {n.id} {n.speedup:.3f}x", markup=True)
        elif kind == "store_retry":
            from rich.markup import escape

            self.console.print(f"{t} [yellow]store refused the {data['what']}[/] ({escape(data['error'])}): "
                               "kept in memory, retrying — free space or restart the database", markup=True)
        elif kind == "lease_taken_over":
            self.console.print(f"{t} took the campaign over from pid {data['pid']} on {data['host']} "
                               "(no longer running)", markup=True)
        elif kind == "requeued":
            self.console.print(f"{t} re-queued node(s) {data['nodes']} left running by a dead process",
                               markup=True)
        elif kind == "final_verification":
            for v in data["nodes"]:
                runs = ", ".join(f"{x:.3f}" for x in v["speedups"])
                got = f"median {v['speedup']:.3f}x" if v["speedup"] is not None else f"[red]failed[/] {v['failed']}"
                short = f" [yellow]({v['short']})[/]" if v.get("short") else ""
                self.console.print(f"{t} [bold]verified[/] node {v['node_id']}: {got} of {runs or 'no'} "
                                   f"measurement(s){short}", markup=True)
            for c in data.get("ancestor_checks", []):  # arbor/campaign/verify.py: _simplest
                pairs = ", ".join(f"{r:.3f}" for r in c["ratios"]) or "none that counted"
                kept = (f"node {c['node']} stays" if c["kept"] == "node"
                        else f"its parent {c['ancestor']} is the final best (the change did not show it helps)")
                self.console.print(f"{t}   node {c['node']} over its parent {c['ancestor']}, side by side: "
                                   f"{pairs}: {kept}", markup=False)
        elif kind == "restarted":
            self.console.print(f"{t} restarting: the old nodes are archived as campaign {data['archived_as']}",
                               markup=False)
        elif kind == "forked":
            self.console.print(f"{t} forked from {data['from']}: {data['note']}", markup=False)
        elif kind == "compile" and data.get("cache") not in (None, "off"):
            what = "loaded from the compile cache" if data["cache"] == "hit" else f"compiled ({data['cache']})"
            built = f"; import {data['import_s']:.1f} s (extensions are built there)" if data.get("import_s") else ""
            self.console.print(f"{t}   [dim]first call {data.get('compile_s') or 0:.1f} s: {what}{built}[/]", markup=True)
        elif kind in ("sandbox_warning", "sandbox_info"):  # isolation gaps, clock locks (arbor.campaign.sandbox_setup)
            from rich.markup import escape

            style = "bold yellow]warning" if kind == "sandbox_warning" else "cyan]sandbox"
            self.console.print(f"{t} [{style}[/]: {escape(data['text'])}", markup=True)


def print_summary(console: Console, s) -> None:
    console.rule(f"campaign {s.campaign}")
    console.print(f"stop reason   {s.stop_reason}")
    if getattr(s, "serving", None):
        from .terminal_serving import print_serving

        print_serving(console, s)
    else:
        paired = "  (reference and candidate in the paired measurement the speedup is read from)"
        console.print(f"baseline      {_ms(s.baseline_s)}" + (paired if s.best_s != s.baseline_s else ""))
        clock = "; CPU time of the timing thread" if getattr(s, "clock", None) == "cpu" else ""
        console.print(f"best          {_ms(s.best_s)}  (node {s.best_node}{clock})")
    if s.speedup is not None and not getattr(s, "serving", None):
        fv = getattr(s, "verified", None)
        if fv:
            runs = ", ".join(f"{x:.3f}" for x in fv["speedups"])
            ci = f"  95% CI [{s.ci[0]:.3f}, {s.ci[1]:.3f}]" if s.ci and s.ci[0] is not None else ""
            node = getattr(s, "node_speedup", None)
            critic = f"; node {s.best_node}'s Critic value {node:.3f}x, as history/tree/show give it" if node else ""
            console.print(f"speedup       {s.speedup:.3f}x{ci}  (verified: median of {len(fv['speedups'])} "
                          f"measurements: {runs}{critic}{'; ' + fv['short'] if fv.get('short') else ''})")
        else:
            ci = f"  95% CI [{s.ci[0]:.3f}, {s.ci[1]:.3f}]" if s.ci and s.ci[0] is not None else ""
            console.print(f"speedup       {s.speedup:.3f}x{ci}  (node {s.best_node}'s Critic value)")
    if getattr(s, "speed_of_light", None):
        console.print(Text(f"speed of light {s.speed_of_light}"))
    counts = ", ".join(f"{k} {v}" for k, v in sorted(s.counts.items()))
    console.print(f"nodes         {sum(s.counts.values())}: {counts}")
    console.print(f"measurements  {s.measurements}   wall time {s.elapsed_s:.0f} s")
    comp = getattr(s, "compile", None)
    if comp and comp.get("first_compile_s") is not None:
        later = (f"; later measurements {comp['later_measurement_s']:.1f} s with a first call of "
                 f"{comp['later_compile_s']:.1f} s ({comp['cache_hits']} loaded from the compile cache)"
                 if comp.get("later_measurement_s") is not None and comp.get("later_compile_s") is not None else "")
        built = (f"; its extension built at import: {comp['first_import_s']:.1f} s"
                 + (f", {comp['later_import_s']:.1f} s later" if comp.get("later_import_s") else "")
                 if comp.get("first_import_s") else "")
        console.print(f"compile       best's first call {comp['first_compile_s']:.1f} s in a "
                      f"{comp['first_measurement_s']:.1f} s measurement{later}{built}")
    if getattr(s, "llm", None):
        u = s.llm
        console.print(f"LLM usage     {u['prompt_tokens']:,} prompt + {u['completion_tokens']:,} completion tokens, "
                      f"${u['cost_usd']:.4f}")
    if s.best_path:
        console.print(f"best artifact {s.best_path}")


def history_table(rows: list[dict], name: str) -> Table:
    """Readable at 80 columns: move names are never split (the column is as wide as the longest,
    up to 28, then cut with an ellipsis); the reason wraps at word boundaries."""
    t = Table(title=f"{name}: {len(rows)} nodes", expand=True)
    move_w = min(28, max([len(r["move"] or "(baseline)") for r in rows] + [4]))
    t.add_column("id", no_wrap=True, justify="right")
    t.add_column("parent", no_wrap=True, justify="right")
    t.add_column("state", no_wrap=True)
    t.add_column("move", no_wrap=True, overflow="ellipsis", min_width=move_w, max_width=28)
    t.add_column("speedup", no_wrap=True, justify="right")
    t.add_column("diagnosis", no_wrap=True, overflow="ellipsis", max_width=16)
    t.add_column("reason", ratio=1, overflow="fold", min_width=12)
    for r in rows:
        t.add_row(str(r["id"]), str(r["parent"] or "—"), Text(r["state"], style=STATE_STYLE.get(r["state"], "")),
                  r["move"] or "(baseline)", f"{r['speedup']:.3f}x" if r["speedup"] else "—",
                  r["diagnosis"] or "", (r["reason"] or "")[:160])
    return t


def print_history(console: Console, rows: list[dict], name: str) -> None:
    """The table where it fits (120 columns and more); below that one line per node and its reason
    on the next, indented and wrapped at word boundaries — never a move name cut mid-word."""
    if console.width >= 120:
        console.print(history_table(rows, name))
        return
    from rich.padding import Padding

    console.print(Text(f"{name}: {len(rows)} nodes", style="bold"))
    move_w = min(28, max([len(r["move"] or "(baseline)") for r in rows] + [4]))
    for r in rows:
        line = Text(f"{r['id']:>4} ← {str(r['parent'] or '—'):>4}  ")
        line.append(f"{r['state']:<9}", style=STATE_STYLE.get(r["state"], ""))
        move = r["move"] or "(baseline)"
        line.append(f"{move if len(move) <= move_w else move[:move_w - 1] + '…':<{move_w}}  ")
        line.append(f"{r['speedup']:.3f}x  " if r["speedup"] else "     —  ")
        line.append(r["diagnosis"] or "", style="dim")
        console.print(line, soft_wrap=False, no_wrap=True, overflow="ellipsis")
        if r["reason"]:
            console.print(Padding(Text(r["reason"], style="dim"), (0, 0, 0, 13)), soft_wrap=False)


def print_tree(console: Console, lines, final=None) -> None:  # type: ignore[no-untyped-def]
    """Box-drawing branches (as the dashboard draws them), so siblings and their parents line up.
    ``final`` (a ``FinalBest``): its node shows its verified median beside its Critic value."""
    from rich.tree import Tree

    root: Tree | None = None
    stack: list[Tree] = []
    for depth, n, on_path in lines:
        label = Text(("★ " if on_path else "") + f"[{n.id}] {n.move_id or 'baseline'}",
                     style="bold" if on_path else "")
        label.append(f" {n.state}", style=STATE_STYLE.get(n.state, ""))
        if final is not None and final.verified and final.node is not None and final.node.id == n.id:
            label.append(f" final best {final.figures()}", style="bold green")
        elif n.speedup:
            label.append(f" {n.speedup:.3f}x")
        if n.diagnosis and n.state != "accepted":
            label.append(f" ({n.diagnosis})", style="dim")
        if n.parent_id is not None:  # the prior it was expanded with (family posteriors shape it)
            label.append(f" P={n.prior:.2f}", style="dim")
        if depth == 0 or not stack:
            if root is not None:
                console.print(root)
            root = Tree(label, guide_style="dim")
            stack = [root]
            continue
        del stack[depth:]
        stack.append(stack[-1].add(label))
    if root is not None:
        console.print(root)


def prior_trace_lines(trace: dict | None) -> list[str]:
    """How a node's prior was made: the skill's (or knowledge's) prior, then each factor, with the
    family's shared posterior behind its factor."""
    if not trace:
        return []
    out = [f"  {trace.get('source', 'skill')} prior {trace.get('base', 0):.3f}"]
    for st in trace.get("steps") or []:
        out.append(f"  x {st['factor']:.3g}  {st['why']}")
    fam = trace.get("family")
    if fam:
        seen = "; ".join(f"{m['move']} {m['speedup_over_parent']:.3f}x over node {m['parent']} (node {m['node']})"
                         for m in fam.get("measured") or [])
        out.append(f"  family {fam['name']}: P(win) {fam['p_win']:.3f} (before any measurement "
                   f"{fam['p_win_prior']:.3f}), expected {fam['expected_speedup']:.3f}x over its parent, from "
                   f"{fam['observations']} measured member(s): {seen}")
    return out


def print_node(console: Console, d: dict) -> None:
    n = d["node"]
    console.rule(f"node {n['id']} — {n['state']}")
    console.print(f"hypothesis: {d['hypothesis']}")
    src = d.get("prior_from") or {}
    if n.get("parent") is not None or src.get("source") == "knowledge":
        extra = (f" from knowledge ({src.get('records')} records: {src.get('wins')} wins, {src.get('failures')} "
                 f"failures, {src.get('flagged')} flagged; skill prior {src.get('base')})"
                 if src.get("source") == "knowledge" else f" from the {src.get('source', 'skill')}")
        gain = f", predicted gain {d['predicted_gain']:.3f}x" if d.get("predicted_gain") else ""
        console.print(f"prior (P(accept)): {d.get('prior', 0):.3f}{extra}{gain}")
        for line in prior_trace_lines(src.get("trace")):
            console.print(Text(line))
    if n["speedup"]:
        console.print(f"speedup: {n['speedup']:.3f}x" + ("" if n["state"] == "accepted" else " (measured; not accepted)"))
    if d.get("final_best"):  # the campaign's final best: the verified median beside the Critic value
        console.print(Text(f"final best: {d['final_best']}", style="bold green"))
    sol = d.get("speed_of_light") or {}
    if sol.get("note", "") and sol["note"].startswith("BUG"):
        console.print(Text(f"speed of light: {sol['note']}"))
    elif sol.get("fraction") is not None:
        note = f" ({sol['note']})" if sol.get("note") else ""
        console.print(Text(f"speed of light: {sol['fraction']:.0%} of {sol['describe']}{note}; more needs "
                           f"{sol['advice']}"))
    for v in d["verdicts"]:
        console.print(f"verdict: {v['decision']} / {v['diagnosis']}: {v['reason']}")
    from .terminal_serving import print_node_levels

    print_node_levels(console, d["verdicts"])  # serving nodes: TTFT/TPOT/ITL per load level
    for m in d["measurements"]:
        b, c = m["baseline_samples"] or [], m["candidate_samples"] or []
        from arbor.campaign.compile_times import line as compile_line

        console.print(f"measurement #{m['attempt']} ({m['purpose']}, {m['status']}"
                      f"{', ' + m['error_class'] if m['error_class'] else ''}): "
                      f"{len(b)} baseline / {len(c)} candidate samples, {m['duration_s']:.1f} s"
                      f"{compile_line((m.get('stats') or {}).get('compile'))}")
    if d.get("profile"):
        from arbor.sandbox.kernel.profile_job import format_profile

        console.print(Text(format_profile(d["profile"])))
    console.rule("diff against parent" if d["diff"] else "source")
    console.print(Text(d["diff"] or d["source"]))


def query_table(cols: list[str], rows: list[tuple]) -> Table:
    t = Table()
    for c in cols:
        t.add_column(c, overflow="fold")
    for r in rows:
        t.add_row(*("NULL" if v is None else str(v) for v in r))
    return t
