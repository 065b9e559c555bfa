"""``arbor compare A B``: two campaigns side by side (see arbor/report/compare.py)."""

from __future__ import annotations

from contextlib import closing
from pathlib import Path
from typing import Optional

import typer

from .common import JsonOpt, fail, out, print_json, user_errors


def _load(target: str, name: Optional[str]):
    from arbor.campaign.source import open_campaign
    from arbor.report import data as report_data
    from arbor.report.compare import side

    _, store, camp = open_campaign(target, name)
    with closing(store):
        return side(report_data.load(store, camp))


def compare(a: str = typer.Argument(..., help="first campaign: YAML, store URL or arbor.db"),
            b: str = typer.Argument(..., help="second campaign: YAML, store URL or arbor.db"),
            campaign_a: Optional[str] = typer.Option(None, "--campaign-a", help="campaign name in A's store"),
            campaign_b: Optional[str] = typer.Option(None, "--campaign-b", help="campaign name in B's store"),
            output: Optional[Path] = typer.Option(None, "--output", "-o", help="write compare.md and compare.png here"),
            json_out: bool = JsonOpt) -> None:
    """Two campaigns side by side: best, evaluations to best, outcome per move family, a plot."""
    from rich.table import Table

    from arbor.report.compare import markdown, plot, rows

    try:
        sa, sb = _load(a, campaign_a), _load(b, campaign_b)
    except user_errors() as exc:
        fail(exc, json_out=json_out)
    if output is not None:
        output.mkdir(parents=True, exist_ok=True)
        png = plot(sa, sb)
        if png:
            (output / "compare.png").write_bytes(png)
        (output / "compare.md").write_text(markdown(sa, sb, "compare.png" if png else None))
    if json_out:
        print_json({"a": sa.to_dict(), "b": sb.to_dict(), "output": str(output) if output else None})
        return
    t = Table(title=f"{sa.name} vs {sb.name}")
    for col in ("", sa.name, sb.name):
        t.add_column(col, overflow="fold")
    for r in rows(sa, sb):
        t.add_row(*r)
    out.print(t)
    if output is not None:
        out.print(f"wrote {output / 'compare.md'}")
