"""The read commands over a campaign's store: ``history``, ``tree``, ``show`` and ``query``
(``best`` has its own module). They open the store read-only (``arbor.campaign.source``)."""

from __future__ import annotations

from contextlib import closing
from typing import Callable, Optional, TypeVar

import typer

from arbor.campaign.source import open_campaign, open_source
from arbor.search_tree.records import CampaignRecord
from arbor.search_tree.store import Store, StoreError

from .common import CampaignArg, CampaignOpt, JsonOpt, fail, out, print_json, user_errors

T = TypeVar("T")


def _read(target: Optional[str], campaign: Optional[str], read: Callable[[Store, CampaignRecord], T],
          json_out: bool = False) -> tuple[CampaignRecord, T]:
    """Open the campaign read-only, read what ``read`` returns, close; user errors exit 2."""
    try:
        _, store, camp = open_campaign(target, campaign)
        with closing(store):
            return camp, read(store, camp)
    except user_errors() as exc:
        fail(exc, json_out=json_out)


def history(target: Optional[str] = CampaignArg, campaign: Optional[str] = CampaignOpt,
            json_out: bool = JsonOpt) -> None:
    """Every node of the campaign in creation order."""
    from .history import history as rows_of
    from .terminal import print_history

    camp, rows = _read(target, campaign, lambda store, camp: rows_of(store, camp.id), json_out)
    if json_out:
        print_json(rows)
    else:
        print_history(out, rows, camp.name)


def tree(target: Optional[str] = CampaignArg, campaign: Optional[str] = CampaignOpt,
         json_out: bool = JsonOpt) -> None:
    """The hypothesis tree, best path marked with ★."""
    from .history import node_row, tree_lines
    from .terminal import print_tree

    from arbor.campaign.final_best import final_best

    _, (lines, final) = _read(target, campaign, lambda store, camp: (tree_lines(store, camp.id),
                                                                      final_best(store, camp.id)), json_out)
    if json_out:
        print_json([{**node_row(n), "indent": d, "best_path": p, **_final_fields(n, final)} for d, n, p in lines])
    else:
        print_tree(out, lines, final)


def _final_fields(node, final) -> dict:  # type: ignore[no-untyped-def]
    """The final best's figures on its own row: its verified median beside its Critic value."""
    if final.node is None or final.node.id != node.id or not final.verified:
        return {}
    return {"final_best": True, "verified_speedup": final.speedup}


def show(node: int = typer.Argument(..., help="node id"), target: Optional[str] = CampaignArg,
         campaign: Optional[str] = CampaignOpt, json_out: bool = JsonOpt) -> None:
    """One node: hypothesis, diff against its parent, samples and verdicts."""
    from .history import show as show_node
    from .terminal import print_node

    def read_node(store: Store, camp: CampaignRecord) -> dict:
        rec = store.get_node(node)
        if rec is not None and rec.campaign_id != camp.id:  # node ids are per store, not per campaign
            owner = store.get_campaign(campaign_id=rec.campaign_id)
            raise StoreError(f"node {node} belongs to campaign {owner.name!r}, not {camp.name!r} — "
                             f"pass --campaign {owner.name}")
        return show_node(store, node)

    _, data = _read(target, campaign, read_node, json_out)
    if json_out:
        print_json(data)
    else:
        print_node(out, data)


def query(sql: str = typer.Argument(..., help="one read-only SELECT statement"),
          target: Optional[str] = typer.Option(None, "--store", "-s", help="campaign YAML, store URL or arbor.db"),
          campaign: Optional[str] = CampaignOpt, json_out: bool = JsonOpt) -> None:
    """Read-only SQL over the store (stable views: v_nodes, v_measurements, v_verdicts).

    Tables: campaigns, nodes, artifacts, measurements, verdicts, events, leases. With --campaign
    NAME every table and view holds that campaign's rows only."""
    from .terminal import query_table

    try:
        _, store = open_source(target)
        with closing(store):
            if campaign:
                from arbor.campaign.source import resolve_campaign

                from .query_scope import scoped

                camp = resolve_campaign(store, campaign)
                sql = scoped(sql, camp.id, sqlite=getattr(store, "is_sqlite", True))
            cols, rows = store.read_only_query(sql)
    except user_errors() as exc:
        fail(exc, json_out=json_out)
    if json_out:
        print_json([dict(zip(cols, r)) for r in rows])
    else:
        out.print(query_table(cols, rows))
