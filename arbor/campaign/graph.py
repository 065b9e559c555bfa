"""The campaign loop as a LangGraph ``StateGraph``:

    select → propose → guard → measure → critique ─┬→ update → select …
                                    ↑ remeasure ───┘            └→ finalize → END (stop reason)

``finalize`` measures the best and its contenders until the reported number is a median
(arbor/campaign/verify.py).

The store is the source of truth; a resumed run always re-enters at ``select`` with state rebuilt
from the store (so a checkpoint can never disagree with what was measured). The SQLite checkpointer
therefore records the graph's final state only (``durability="exit"``): writing one per super-step
cost a fifth of the harness's time per step and could never be used to resume.

LangGraph (and the langchain-core it pulls in, about 2 s of imports on a loaded 2-core machine) is
imported where the graph is built, so a command that only reads a campaign never pays for it
(docs/architecture.md#imports).
"""

from __future__ import annotations

import sqlite3
from functools import partial
from pathlib import Path

from . import steps
from .context import Context
from .steps import LoopState


def build_graph(ctx: Context, checkpoint_path: Path | None):
    from langgraph.graph import END, START, StateGraph

    g = StateGraph(LoopState)
    for name in ("select", "propose", "guard", "measure", "critique", "update", "finalize"):
        g.add_node(name, partial(getattr(steps, name), ctx))
    g.add_edge(START, "select")
    g.add_conditional_edges("select", lambda s: "finalize" if s.get("stop_reason") else "propose",
                            {"finalize": "finalize", "propose": "propose"})
    g.add_edge("finalize", END)
    g.add_edge("propose", "guard")
    g.add_edge("guard", "measure")
    g.add_edge("measure", "critique")
    g.add_conditional_edges("critique", lambda s: "measure" if steps.requeued(ctx, s) else "update",
                            {"measure": "measure", "update": "update"})
    g.add_edge("update", "select")
    saver = None
    if checkpoint_path is not None:
        checkpoint_path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(str(checkpoint_path), check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        from langgraph.checkpoint.sqlite import SqliteSaver

        saver = SqliteSaver(conn)
    return g.compile(checkpointer=saver), saver


def run_loop(ctx: Context, checkpoint_path: Path | None, start_step: int) -> str:
    graph, saver = build_graph(ctx, checkpoint_path)
    config = {
        "configurable": {"thread_id": f"campaign-{ctx.cid}"},
        # each step is ~6 super-steps; the budget, not LangGraph, decides when to stop
        "recursion_limit": 10_000_000,
    }
    try:
        final = graph.invoke({"campaign_id": ctx.cid, "step": start_step, "node_ids": [],
                              "parent_id": None, "stop_reason": None}, config, durability="exit")
    finally:
        if saver is not None:
            saver.conn.close()
    return final.get("stop_reason") or "stopped"
