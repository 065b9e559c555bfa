"""Write a campaign report: one self-contained HTML file (figures embedded as base64 PNG, inline
CSS, no scripts, no external links — it can be mailed or attached to a ticket) and a Markdown
file beside its PNGs (for a repository or a wiki)."""

from __future__ import annotations

import base64
import difflib
import html
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from arbor.spec.kernel import precision_of
from arbor.targets import traits

from .data import ReportData, fingerprint_id
from .knowledge import tables as knowledge_tables
from .plots import FIGURES
from .profile import NUMERIC as PROFILE_NUMERIC
from .profile import tables as profile_tables

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2em auto;max-width:1100px;
color:#212121;padding:0 1em}h1{margin-bottom:.2em}h2{border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:1.6em}
table{border-collapse:collapse;font-size:.9em;margin:.6em 0}td,th{border:1px solid #ddd;padding:.3em .6em;text-align:left}
th{background:#f5f5f5}td.num{text-align:right;font-variant-numeric:tabular-nums}
pre{background:#f7f7f7;border:1px solid #e0e0e0;padding:.8em;overflow-x:auto;font-size:.85em}
img{max-width:100%;border:1px solid #eee}.muted{color:#757575}.accepted{color:#2e7d32}.rejected{color:#ef6c00}
.failed{color:#c62828}
"""


@dataclass
class ReportFiles:
    html: Path
    markdown: Path
    figures: dict[str, Path]


def _x(v) -> str:
    return "—" if not isinstance(v, (int, float)) else f"{v:.3f}x"


def _ms(v) -> str:
    return "—" if not isinstance(v, (int, float)) else f"{v * 1e3:.3f} ms"


def _p(v) -> str:
    return "—" if not isinstance(v, (int, float)) else f"{v:.2g}"


def summary_rows(d: ReportData) -> list[tuple[str, str]]:
    c = d.campaign
    target = (c.spec or {}).get("target") or {}
    budget = (c.spec or {}).get("budget") or {}
    best = d.best
    rows = [
        ("campaign", c.name), ("kind", c.kind),
        ("target", " · ".join(str(v) for v in (target.get("problem"), target.get("device"), precision_of(target)) if v)),
        ("status", c.status), ("stop reason", c.stop_reason or "—"),
        ("evaluations", f"{len(d.evaluations)} finished candidates (max_evaluations={budget.get('max_evaluations', '—')})"),
        ("measurement series", str(sum(len(v) for v in d.measurements.values()))),
        ("wall time", f"{c.elapsed_s:.0f} s"),
        ("nodes", ", ".join(f"{k} {v}" for k, v in d.counts().items())),
    ]
    if traits(c.kind).has_pareto_front and best is not None and best.parent_id is not None:
        st = d.final_stats(best.id)
        if isinstance(st.get("pareto_improvement_pct"), (int, float)):
            rows.append(("Pareto improvement", f"{st['pareto_improvement_pct']:+.1f}% hypervolume vs the baseline "
                                               f"(objective {st.get('metric', '?')})"))
    if best is not None:
        stats = d.final_stats(best.id) if best.parent_id is not None else {}
        number, which, est_ci = d.reported
        if est_ci is not None:  # the CI of the same estimate as the number (arbor/campaign/one_number.py)
            ci = f"; 95% CI {_x(est_ci[0])} – {_x(est_ci[1])}"
        else:
            ci = f"; 95% CI {_x(stats.get('ci_low'))} – {_x(stats.get('ci_high'))}" if stats else ""
        critic = f", Critic value {_x(best.speedup)}" if which != "Critic value" else ""
        rows.append(("best", f"node {best.id} {best.move_id or 'baseline'}: {_x(number)} ({which}{ci}){critic}, "
                             f"path {' → '.join(str(i) for i in d.best_path())}"))
    for c in d.ancestor_checks:  # a change must show it helps (arbor/campaign/verify.py)
        pairs = ", ".join(f"{r:.3f}" for r in c.get("ratios", [])) or "none that counted"
        verdict = "kept it" if c.get("kept") == "node" else "did not beat it: the parent is reported"
        rows.append(("final: child vs parent", f"node {c['node']} over its parent {c['ancestor']}, measured side by side "
                                               f"({pairs}): {verdict}"))
    return rows


def candidate_rows(d: ReportData) -> tuple[list[str], list[list[str]]]:
    head = ["rank", "node", "move", "speedup", "95% CI", "p (Mann-Whitney)", "candidate median",
            "reference median", "rounds", "device", "fingerprint"]
    rows = []
    for i, c in enumerate(d.candidates):
        n, s = c.node, c.stats
        lo, hi = c.ci
        fp = c.fingerprint
        device = f"{fp.get('device', '?')} {fp.get('gpu_name') or fp.get('device_name') or ''}".strip() if fp else "—"
        rows.append(["ref" if n.parent_id is None else str(i), str(n.id), n.move_id or "baseline (A/A)",
                     _x(n.speedup if n.parent_id is not None else s.get("speedup")),
                     f"{_x(lo)} – {_x(hi)}" if lo is not None else "—", _p(s.get("mw_p")),
                     _ms(s.get("candidate_median_s")), _ms(s.get("baseline_median_s")),
                     str(s.get("rounds", "—")), device, fingerprint_id(fp)])
    return head, rows


def _diff(d: ReportData) -> str:
    if d.best is None or d.best.parent_id is None or d.root_source is None or d.best_source is None:
        return ""
    return "".join(difflib.unified_diff(d.root_source.splitlines(keepends=True),
                                        d.best_source.splitlines(keepends=True), "reference", f"node {d.best.id}"))


def _html_table(head: list[str], rows: list[list[str]], numeric: set[int] = frozenset()) -> str:
    out = ["<table><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr>"]
    for r in rows:
        out.append("<tr>" + "".join(f"<td{' class=num' if i in numeric else ''}>{html.escape(str(v))}</td>"
                                    for i, v in enumerate(r)) + "</tr>")
    return "\n".join(out + ["</table>"])


def _md_cell(v: str) -> str:
    return str(v).replace("|", "\\|").replace("\n", " ")


def _md_table(head: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(_md_cell(v) for v in r) + " |" for r in rows]
    return "\n".join(lines)


def _sections(d: ReportData, pngs: dict[str, bytes | None]) -> list[tuple[str, str, bytes | None, str]]:
    """(key, title, png or None, note when there is no figure)."""
    out = []
    for key, title, _ in FIGURES:
        if key == "pareto" and not traits(d.campaign.kind).has_pareto_front and pngs.get(key) is None:
            continue  # a single objective (kernels): no front to draw
        note = {"pareto": "no throughput–latency points recorded in this campaign's measurements yet"}.get(
            key, "nothing measured yet")
        out.append((key, title, pngs.get(key), note))
    return out


PROFILE_TITLE = "Bottleneck profile"
LEVEL_HEAD = ["load", "req/s", "out tok/s", "goodput req/s", "failed"] + [
    f"{m} {st} ms" for m in ("TTFT", "TPOT", "ITL") for st in ("mean", "median", "p99")]


def level_tables(d: ReportData) -> list[tuple[str, list[list[str]]]]:
    """Serving: per load level, the columns of `vllm bench serve` for the baseline and the best
    (medians over the interleaved rounds of the best's accepted measurement)."""
    best = d.best if d.best is not None and d.best.parent_id is not None else None
    stats = d.final_stats(best.id) if best is not None else (d.final_stats(d.root.id) if d.root else {})
    out = []
    for key, title in (("levels_baseline", "baseline"), ("levels_candidate", f"best (node {best.id})" if best else "")):
        levels = stats.get(key) or []
        if not levels or not title:
            continue
        num = lambda v, f="{:.1f}": "—" if v is None else f.format(v)  # noqa: E731
        rows = [[str(lv.get("label", "?")), num(lv.get("req_s"), "{:.2f}"), num(lv.get("out_tok_s"), "{:.0f}"),
                 num(lv.get("goodput_req_s"), "{:.2f}"), num(lv.get("failed"), "{:.0f}")]
                + [num(lv.get(f"{m}_{st}_ms")) for m in ("ttft", "tpot", "itl") for st in ("mean", "p50", "p99")]
                for lv in levels]
        out.append((f"Per load level: {title}", rows))
    return out


def render_html(d: ReportData, pngs: dict[str, bytes | None], generated: str) -> str:
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>Arbor report: {html.escape(d.campaign.name)}"
             f"</title><style>{CSS}</style></head><body>",
             f"<h1>Arbor report: {html.escape(d.campaign.name)}</h1>",
             f"<p class=muted>generated {html.escape(generated)} from the campaign store (read-only)</p>",
             "<h2>Summary</h2>", _html_table(["", ""], [list(r) for r in summary_rows(d)])]
    for key, title, png, note in _sections(d, pngs):
        parts.append(f"<h2>{html.escape(title)}</h2>")
        if png is None:
            parts.append(f"<p class=muted>{html.escape(note)}</p>")
        else:
            b64 = base64.b64encode(png).decode("ascii")
            parts.append(f"<img alt='{html.escape(title)}' src='data:image/png;base64,{b64}'>")
        if key == "tree" and d.diagnoses():
            parts.append("<p>Candidates by the Critic's diagnosis:</p>")
            parts.append(_html_table(["diagnosis", "candidates"], [[k, str(v)] for k, v in d.diagnoses().items()], {1}))
    for cap, head, rows in knowledge_tables(d.warm_start, d.calibration):
        parts += [f"<h2>{'Warm start' if cap.startswith('Warm') else 'Calibration'}</h2>",
                  f"<p>{html.escape(cap)}</p>", _html_table(head, rows)]
    for title, rows in level_tables(d):
        parts += [f"<h2>{html.escape(title)}</h2>", _html_table(LEVEL_HEAD, rows, set(range(1, len(LEVEL_HEAD))))]
    if d.profiles:
        parts.append(f"<h2>{PROFILE_TITLE}</h2>")
        for cap, head, rows in profile_tables(d.profiles):
            parts.append(f"<p>{html.escape(cap)}</p>")
            if rows:
                parts.append(_html_table(head, rows, PROFILE_NUMERIC))
    head, rows = candidate_rows(d)
    parts += ["<h2>Top candidates</h2>",
              "<p class=muted>Speedups and confidence intervals are the Critic's (paired bootstrap over "
              "interleaved rounds); timings are only comparable between equal fingerprints.</p>",
              _html_table(head, rows, {3, 5, 6, 7, 8})]
    parts.append("<h2>Best artifact</h2>")
    if d.best is None or d.best_source is None:
        parts.append("<p class=muted>no accepted candidate yet</p>")
    else:
        parts.append(f"<p>node {d.best.id} ({html.escape(d.best.move_id or 'baseline')}, {_x(d.best.speedup)}): "
                     f"{html.escape(d.best.hypothesis)}</p><pre>{html.escape(d.best_source)}</pre>")
        diff = _diff(d)
        if diff:
            parts.append(f"<details><summary>diff against the reference</summary><pre>{html.escape(diff)}</pre></details>")
    parts.append("</body></html>")
    return "\n".join(parts)


def render_markdown(d: ReportData, pngs: dict[str, bytes | None], files: dict[str, Path], generated: str) -> str:
    parts = [f"# Arbor report: {d.campaign.name}", "", f"_generated {generated} from the campaign store (read-only)_",
             "", "## Summary", "", _md_table(["", ""], [list(r) for r in summary_rows(d)])]
    for key, title, png, note in _sections(d, pngs):
        parts += ["", f"## {title}", ""]
        parts.append(f"![{title}]({files[key].name})" if png is not None and key in files else f"_{note}_")
        if key == "tree" and d.diagnoses():
            parts += ["", "Candidates by the Critic's diagnosis:", "",
                      _md_table(["diagnosis", "candidates"], [[k, str(v)] for k, v in d.diagnoses().items()])]
    for cap, head, rows in knowledge_tables(d.warm_start, d.calibration):
        parts += ["", f"## {'Warm start' if cap.startswith('Warm') else 'Calibration'}", "", cap, "",
                  _md_table(head, rows)]
    for title, rows in level_tables(d):
        parts += ["", f"## {title}", "", _md_table(LEVEL_HEAD, rows)]
    if d.profiles:
        parts += ["", f"## {PROFILE_TITLE}"]
        for cap, head, rows in profile_tables(d.profiles):
            parts += ["", cap] + (["", _md_table(head, rows)] if rows else [])
    head, rows = candidate_rows(d)
    parts += ["", "## Top candidates", "", _md_table(head, rows), "", "## Best artifact", ""]
    if d.best is None or d.best_source is None:
        parts.append("_no accepted candidate yet_")
    else:
        parts += [f"node {d.best.id} ({d.best.move_id or 'baseline'}, {_x(d.best.speedup)}): {d.best.hypothesis}",
                  "", "```python", d.best_source.rstrip(), "```"]
        diff = _diff(d)
        if diff:
            parts += ["", "Diff against the reference:", "", "```diff", diff.rstrip(), "```"]
    return "\n".join(parts) + "\n"


def write_report(d: ReportData, out_dir: Path) -> ReportFiles:
    out_dir.mkdir(parents=True, exist_ok=True)
    generated = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    pngs = {key: fn(d) for key, _, fn in FIGURES}
    files: dict[str, Path] = {}
    for key, png in pngs.items():
        target = out_dir / f"{key}.png"
        if png is not None:
            target.write_bytes(png)
            files[key] = target
        elif target.exists():
            target.unlink()  # a stale figure from an earlier report must not be mistaken for this one
    html_path, md_path = out_dir / "report.html", out_dir / "report.md"
    html_path.write_text(render_html(d, pngs, generated), encoding="utf-8")
    md_path.write_text(render_markdown(d, pngs, files, generated), encoding="utf-8")
    return ReportFiles(html_path, md_path, files)
