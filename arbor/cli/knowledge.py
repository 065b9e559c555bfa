"""``arbor knowledge ls|export|import|revoke`` over the user-level knowledge store, and
``arbor calibration [CAMPAIGN]``: how well each agent's P(accept) and predicted gains held up."""

from __future__ import annotations

from contextlib import closing
from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from .common import CampaignArg, CampaignOpt, JsonOpt, fail, out, print_json, user_errors

knowledge_app = typer.Typer(add_completion=False, no_args_is_help=True,
                            help="The knowledge store shared across campaigns (warm-start records).")
UrlOpt = typer.Option(None, "--url", "-u", help="knowledge store URL (default: $XDG_DATA_HOME/arbor/knowledge.db)")


def _open(url: Optional[str]):
    from arbor.search_tree.knowledge import KnowledgeError, KnowledgeStore

    try:
        return KnowledgeStore(url)
    except KnowledgeError as exc:
        fail(exc)


@knowledge_app.command("ls")
def ls(url: Optional[str] = UrlOpt, json_out: bool = JsonOpt) -> None:
    """Every record: campaign, node, hardware class, move, outcome."""
    ks = _open(url)
    recs = ks.records()
    ks.close()
    if json_out:
        print_json([r.to_json() for r in recs])
        return
    t = Table(title=f"{len(recs)} knowledge records ({ks.url})")
    for c in ("campaign", "node", "hardware", "move", "family", "diagnosis", "speedup", "P(accept)", "status"):
        t.add_column(c)
    for r in recs:
        status = f"revoked: {r.revoked}" if r.revoked else ("ok" if r.integrity_ok else "flagged")
        t.add_row(r.campaign, str(r.node_id), r.hardware.get("class", "?"), r.move_id, r.family or "-",
                  r.diagnosis or "-", f"{r.speedup:.3f}" if r.speedup else "-",
                  f"{r.p_accept:.2f}" if r.p_accept is not None else "-", status)
    out.print(t)


@knowledge_app.command("export")
def export(path: Path = typer.Argument(..., help="JSON-lines file to write"), url: Optional[str] = UrlOpt) -> None:
    """Write every record (revocations included) as JSON lines."""
    ks = _open(url)
    n = ks.export(path)
    ks.close()
    out.print(f"{n} records written to {path}")


@knowledge_app.command("import")
def import_(path: Path = typer.Argument(..., help="JSON-lines file from 'arbor knowledge export'"),
            url: Optional[str] = UrlOpt) -> None:
    """Add records from another store's export (records already present are skipped)."""
    from arbor.search_tree.knowledge import KnowledgeError

    ks = _open(url)
    try:
        n = ks.import_file(path)
    except KnowledgeError as exc:
        fail(exc)
    finally:
        ks.close()
    out.print(f"{n} new records imported from {path}")


@knowledge_app.command("revoke")
def revoke(sha: str = typer.Argument(..., help="artifact sha256 of the candidate"),
           reason: str = typer.Option(..., "--reason", "-r", help="why (hostile, incorrect, ...)"),
           url: Optional[str] = UrlOpt) -> None:
    """Mark a candidate's records as hostile or incorrect: never used as positive evidence again."""
    ks = _open(url)
    n = ks.revoke(sha, reason)
    ks.close()
    if not n:
        fail(ValueError(f"no knowledge record of artifact {sha} — see 'arbor knowledge ls --json'"))
    out.print(f"{n} records revoked")


def calibration_table(data: dict) -> Table:
    t = Table(title="calibration: Brier score of P(accept), error of predicted log-speedup")
    for c in ("by", "name", "n", "Brier", "accept rate", "log MAE", "log bias"):
        t.add_column(c)
    for by in ("agents", "families"):
        for name, r in data.get(by, {}).items():
            fmt = lambda x: "-" if x is None else f"{x:.3f}"  # noqa: E731
            t.add_row(by[:-1] if by == "agents" else "family", name, str(r["n"]), fmt(r["brier"]),
                      fmt(r["accept_rate"]), fmt(r["log_mae"]), fmt(r["log_bias"]))
    return t


def calibration(target: Optional[str] = CampaignArg, campaign: Optional[str] = CampaignOpt,
                json_out: bool = JsonOpt) -> None:
    """Brier score of P(accept) and error of the predicted log-speedup, per agent and move family."""
    from arbor.campaign.knowledge import calibration as compute
    from arbor.campaign.source import open_campaign

    try:
        _, store, camp = open_campaign(target, campaign)
        with closing(store):
            data = compute(store, camp.id).to_json()
    except user_errors() as exc:
        fail(exc)
    if json_out:
        print_json(data)
    elif not data["agents"]:
        out.print(f"campaign {camp.name}: no judged proposal yet")
    else:
        out.print(calibration_table(data))
