"""The suite's report page: the table and one figure (speedups per problem, log scale)."""

from __future__ import annotations

import base64
import html
import io
from pathlib import Path

from .table import markdown, row_metrics


def plot_png(rows: list[dict]) -> bytes | None:
    from matplotlib.figure import Figure

    done = [r for r in rows if "error" not in r]
    if not done:
        return None
    fig = Figure(figsize=(max(6.0, 0.45 * len(done)), 3.8))
    ax = fig.add_subplot()
    xs = range(len(done))
    mets = [row_metrics(r) for r in done]
    best = [m["speedup_eager"] for m in mets]
    comp = [r.get("compile") or 0 for r in done]
    ax.bar([x - 0.2 for x in xs], comp, width=0.4, label="torch.compile default", color="#90a4ae")
    bars = ax.bar([x + 0.2 for x in xs], best, width=0.4, label="Arbor (verified best)", color="#2e7d32")
    for bar, m in zip(bars, mets):  # wins from an algebraic collapse, hatched (collapse.py)
        if m["collapse"]:
            bar.set_hatch("//")
            bar.set_facecolor("#a5d6a7")
    if any(m["collapse"] for m in mets):
        from matplotlib.patches import Patch

        handles, _ = ax.get_legend_handles_labels()
        ax.legend(handles=handles + [Patch(facecolor="#a5d6a7", hatch="//", label="Arbor, algebraic collapse")],
                  fontsize=8)
    ax.axhline(1.0, color="black", lw=0.8)
    ax.set_yscale("log")
    ax.set_ylabel("speedup vs eager (x)")
    ax.set_xticks(list(xs), [r["key"] for r in done], rotation=60, ha="right", fontsize=7)
    if not any(m["collapse"] for m in mets):
        ax.legend(fontsize=8)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    return buf.getvalue()


def write_page(out_dir: Path, rows: list[dict], summ: dict, meta: dict) -> Path:
    png = plot_png(rows)
    table = markdown(rows, summ)
    img = f'<img alt="speedups" src="data:image/png;base64,{base64.b64encode(png).decode()}">' if png else ""
    body = (f"<html><head><meta charset='utf-8'><title>Arbor suite</title></head><body>"
            f"<h1>Arbor suite: {html.escape(str(meta.get('dir', '')))}</h1>"
            f"<p>{html.escape(str({k: v for k, v in meta.items() if k != 'dir'}))}</p>{img}"
            f"<pre>{html.escape(table)}</pre></body></html>")
    path = out_dir / "suite_report.html"
    path.write_text(body)
    (out_dir / "suite_table.md").write_text(table)
    return path
