"""``arbor doctor [CAMPAIGN.yaml]``: a table of readiness checks, each failure with its fix.

Exit code 0 when nothing failed (warnings allowed), 1 when a check failed, 2 for a bad campaign
file. ``--json`` prints the rows for scripts and CI.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape
from rich.table import Table

from .common import fail, out, print_json, user_errors

_STYLE = {"ok": "green", "warn": "yellow", "fail": "bold red", "skip": "dim"}


def doctor(spec_path: Optional[Path] = typer.Argument(None, help="campaign YAML whose settings to check"),
           skip_llm: bool = typer.Option(False, "--skip-llm", help="do not contact LLM endpoints"),
           json_out: bool = typer.Option(False, "--json", help="machine-readable output")) -> None:
    """Check torch/CUDA, GPU clocks, sandbox isolation, Docker, LLM endpoints and the store."""
    from .doctor_checks import run_checks

    spec = None
    try:
        if spec_path is not None:
            from arbor.spec import load_spec

            spec = load_spec(spec_path)
    except user_errors() as exc:
        fail(exc)
    rows = run_checks(spec, skip_llm=skip_llm)
    failed = any(r.status == "fail" for r in rows)
    if json_out:
        print_json({"ok": not failed, "checks": [r.to_dict() for r in rows]})
    else:
        table = Table(title="arbor doctor" + (f" — {spec.name}" if spec else ""), show_lines=False)
        for col in ("check", "status", "detail", "fix"):
            table.add_column(col, overflow="fold")
        for r in rows:
            table.add_row(r.name, f"[{_STYLE.get(r.status, '')}]{r.status}[/]", escape(r.detail), escape(r.fix))
        out.print(table)
        n = {s: sum(r.status == s for r in rows) for s in ("ok", "warn", "fail")}
        out.print(f"{n['ok']} ok, {n['warn']} warning(s), {n['fail']} failure(s)")
    if failed:
        raise typer.Exit(1)
