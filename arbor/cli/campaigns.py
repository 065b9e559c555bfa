"""``arbor campaigns ls | rm | rename``: the campaigns one store holds (Optuna's study commands)."""

from __future__ import annotations

from contextlib import closing
from typing import Optional

import typer

from .common import JsonOpt, fail, out, print_json, user_errors

campaigns_app = typer.Typer(help="List, delete or rename the campaigns of a store.", no_args_is_help=True)
StoreArg = typer.Option(None, "--store", "-s", help="campaign YAML, store URL or arbor.db (default ./arbor.db)")


def _open(target: Optional[str], write: bool):
    from arbor.campaign.source import open_source
    from arbor.search_tree import open_store

    source, store = open_source(target)
    if not write:
        return store
    store.close()
    return open_store(source.url)


def _row(store, c) -> dict:
    counts = store.count_by_state(c.id)
    accepted = [n.speedup for n in store.nodes(c.id, states=["accepted"]) if n.speedup and n.parent_id]
    return {"name": c.name, "kind": c.kind, "status": c.status, "nodes": sum(counts.values()),
            "best_speedup": max(accepted) if accepted else None, "elapsed_s": round(c.elapsed_s, 1),
            "stop_reason": c.stop_reason}


@campaigns_app.command("ls")
def ls(store_arg: Optional[str] = StoreArg, json_out: bool = JsonOpt) -> None:
    """Every campaign in the store: kind, status, nodes, best speedup."""
    from rich.table import Table

    try:
        with closing(_open(store_arg, write=False)) as store:
            rows = [_row(store, c) for c in store.list_campaigns()]
    except user_errors() as exc:
        fail(exc, json_out=json_out)
    if json_out:
        print_json(rows)
        return
    t = Table()
    for col in ("name", "kind", "status", "nodes", "best", "stop reason"):
        t.add_column(col, overflow="fold")
    for r in rows:
        t.add_row(r["name"], r["kind"], r["status"], str(r["nodes"]),
                  f"{r['best_speedup']:.3f}x" if r["best_speedup"] else "—", r["stop_reason"] or "")
    out.print(t)


def _campaign(store, name: str):
    from arbor.campaign.source import resolve_campaign

    return resolve_campaign(store, name)


@campaigns_app.command("rm")
def rm(name: str = typer.Argument(..., help="campaign name"), store_arg: Optional[str] = StoreArg,
       yes: bool = typer.Option(False, "--yes", "-y", help="do not ask"), json_out: bool = JsonOpt) -> None:
    """Delete a campaign with its nodes, measurements, verdicts and events."""
    from arbor.search_tree.store import StoreError

    try:
        with closing(_open(store_arg, write=True)) as store:
            camp = _campaign(store, name)
            if camp.status == "running" and any(n.state == "running" for n in store.nodes(camp.id)):
                raise StoreError(f"campaign {name!r} is measuring a node right now — stop its run first "
                                 "(Ctrl-C), then delete it")
            if not yes and not json_out and not typer.confirm(f"delete campaign {name!r} and all its nodes?"):
                raise typer.Exit(1)
            removed = store.delete_campaign(camp.id)
    except user_errors() as exc:
        fail(exc, json_out=json_out)
    if json_out:
        print_json({"deleted": name, "nodes": removed})
    else:
        out.print(f"deleted campaign {name} ({removed} nodes)")


@campaigns_app.command("rename")
def rename(old: str = typer.Argument(..., help="current name"), new: str = typer.Argument(..., help="new name"),
           store_arg: Optional[str] = StoreArg, json_out: bool = JsonOpt) -> None:
    """Rename a campaign (its campaign file must then use the new name to resume it)."""
    from arbor.search_tree.store import StoreError

    try:
        with closing(_open(store_arg, write=True)) as store:
            camp = _campaign(store, old)
            if store.get_campaign(new) is not None:
                raise StoreError(f"a campaign named {new!r} already exists — pick another name or rm it first")
            store.update_campaign(camp.id, name=new)
    except user_errors() as exc:
        fail(exc, json_out=json_out)
    if json_out:
        print_json({"renamed": old, "to": new})
    else:
        out.print(f"renamed campaign {old} to {new}")
