"""``arbor dashboard``, ``arbor report`` and ``arbor export``: the read-only views of a campaign.

All three open the store read-only (no migration, no writes, no file creation), so they are safe
to point at a campaign another terminal is running.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from arbor.campaign.source import open_campaign, resolve_source
from arbor.search_tree.store import StoreError

from .common import CampaignArg, CampaignOpt, JsonOpt, fail, out, print_json, user_errors

EXPORT_FORMATS = ("json", "csv")


def dashboard(target: Optional[str] = CampaignArg, campaign: Optional[str] = CampaignOpt,
              once: bool = typer.Option(False, "--once", help="render one frame and exit"),
              svg: Optional[Path] = typer.Option(None, "--svg", help="render one frame into this SVG file"),
              interval: float = typer.Option(1.0, "--interval", min=0.1, max=1.0,
                                             help="seconds between polls of the store (0.1-1)"),
              width: Optional[int] = typer.Option(None, "--width", min=40, help="frame width (--once/--svg)"),
              height: Optional[int] = typer.Option(None, "--height", min=10, help="frame height (--once/--svg)"),
              page: Optional[str] = typer.Option(None, "--page", help="compact layout (under 110x44): the page for "
                                                 "--once/--svg (environment, score, tree, verdicts, activity)"),
              ) -> None:
    """Live read-only view of a running or finished campaign (attach from another terminal).

    Under 110 columns by 44 rows the progress stays on top and the other panels are pages:
    keys 1-5 pick one, Tab the next, 0 lets them turn every few seconds."""
    from arbor.dashboard import CampaignFeed, render_frame, run_live

    from arbor.dashboard.app import PAGE_NAMES

    if page is not None and page not in PAGE_NAMES:
        fail(ValueError(f"--page {page!r}: use one of {', '.join(PAGE_NAMES)}"))
    feed = None
    try:
        feed = CampaignFeed(resolve_source(target, campaign))
        if svg is not None:
            w, h = width or 150, height or 46
            console = Console(record=True, width=w, height=h, file=io.StringIO(), force_terminal=True,
                              color_system="truecolor")
            render_frame(feed, console, width=w, height=h, page=page)
            svg.parent.mkdir(parents=True, exist_ok=True)
            svg.write_text(console.export_svg(title=f"arbor dashboard {target or ''}".strip()), encoding="utf-8")
            out.print(f"wrote {svg}")
        elif once:
            render_frame(feed, Console(highlight=False, width=width, height=height), width=width, height=height,
                         page=page)
        else:
            run_live(feed, Console(highlight=False), interval=interval)
    except user_errors() as exc:
        fail(exc)
    except KeyboardInterrupt:
        pass
    finally:
        if feed is not None:
            feed.close()


def report(target: Optional[str] = CampaignArg, campaign: Optional[str] = CampaignOpt,
           output: Optional[Path] = typer.Option(
               None, "--output", "-o",
               help="directory for report.html, report.md and the PNGs "
                    "(default: arbor_runs/NAME/report beside the campaign YAML, else ./arbor_report_NAME)"),
           json_out: bool = JsonOpt) -> None:
    """Write a self-contained HTML report and a Markdown report with PNG plots."""
    from arbor.report import load, write_report

    try:
        source, store, camp = open_campaign(target, campaign)
        try:
            data = load(store, camp)
        finally:
            store.close()
        out_dir = output or ((source.runs_dir / "report") if source.runs_dir else Path(f"arbor_report_{camp.name}"))
        files = write_report(data, out_dir)
    except user_errors() as exc:
        fail(exc)
    info = {"html": str(files.html), "markdown": str(files.markdown),
            "figures": {k: str(v) for k, v in files.figures.items()}}
    if json_out:
        print_json(info)
    else:
        out.print(f"wrote {files.html}\nwrote {files.markdown} (+ {len(files.figures)} PNG figures)")


class ExportError(StoreError):
    """A bad ``arbor export`` option (one line, exit 2)."""


def export(target: Optional[str] = CampaignArg, campaign: Optional[str] = CampaignOpt,
           fmt: str = typer.Option("json", "--format", "-f", help="json (one document) or csv (one file per table)"),
           output: Optional[Path] = typer.Option(
               None, "--output", "-o", help="json: a file (default: stdout); csv: a directory (default: ./NAME_export)"),
           ) -> None:
    """Export the campaign's nodes, measurements and verdicts as JSON or CSV."""
    from arbor.report.export import collect, to_json, write_csv

    try:
        if fmt not in EXPORT_FORMATS:
            raise ExportError(f"--format {fmt}: unknown format — use json or csv")
        _, store, camp = open_campaign(target, campaign)
        try:
            data = collect(store, camp)
        finally:
            store.close()
        if fmt == "json":
            text = to_json(data)
            if output is None:
                typer.echo(text, nl=False)
                return
            output.parent.mkdir(parents=True, exist_ok=True)
            output.write_text(text, encoding="utf-8")
            written = [output]
        else:
            written = write_csv(data, output or Path(f"{camp.name}_export"))
    except user_errors() as exc:
        fail(exc)
    counts = ", ".join(f"{len(data[t])} {t}" for t in ("nodes", "measurements", "verdicts"))
    out.print(f"exported {counts} to " + ", ".join(str(p) for p in written))
