"""A candidate the machine's noise rejected is measured once more, after another evaluation.

``env_drift`` and ``unstable`` blame the machine, not the candidate: the Critic's own
re-measurements ran while the disturbance lasted. Left there, the candidate is lost for good,
because a campaign holds one node per artifact. Seen in a warm RMSNorm campaign (2026-11-28):
- The C++ fusion, 2.2x in the cold run, read as a new best.
- The reference then ran 25–29% slow in all four measurements while the machine's other campaign
  compiled, and the Critic rejected the fusion as ``env_drift``.
- The warm campaign ended at 1.37x.

The retry is ``arbor retry``'s node (``retry_node.retry``): the same code, the same move and parent,
judged like any candidate. It is made once per rejected node (never for a retry), only after
``RETRY_AFTER`` other evaluations, so the disturbance has time to pass, and only while the
evaluation budget has room. State lives in the store: a rejected node is due when no ``retry``
event names it, so a resumed campaign retries what the dead process had not.
"""

from __future__ import annotations

from arbor.search_tree.records import NodeRecord

from .context import Context
from .retry_node import RETRYABLE, is_retry, retry

RETRY_AFTER = 1  # other candidates measured between the rejection and its retry


def _retried(ctx: Context) -> set[int]:
    return {int(ev.payload.get("of", -1)) for ev in ctx.store.events(ctx.cid, limit=1_000_000, kinds=["retry"])}


def note_rejection(ctx: Context, node: NodeRecord, diagnosis: str | None) -> None:
    """Called with every final verdict: remembers a node the machine's noise rejected."""
    if node.parent_id is None or diagnosis not in RETRYABLE or is_retry(node):
        return
    _load(ctx)[node.id] = ctx.evaluations() + RETRY_AFTER


def _load(ctx: Context) -> dict[int, int]:
    """What is due, rebuilt from the store once per process (a resumed campaign)."""
    due = ctx.retries_due
    if due is None:
        done = _retried(ctx)
        due = ctx.retries_due = {
            n.id: 0 for n in ctx.store.nodes(ctx.cid, states=("rejected", "failed"))
            if n.parent_id is not None and n.diagnosis in RETRYABLE and n.id not in done
            and not is_retry(n)}
    return due


def take_due(ctx: Context) -> NodeRecord | None:
    """The retry node of the first rejection now due (added to the store, pending), or None."""
    due = _load(ctx)
    if not due:
        return None
    cap = ctx.spec.budget.max_evaluations
    if cap is not None and ctx.evaluations() >= cap:
        return None
    for node_id, at in sorted(due.items(), key=lambda kv: kv[1]):
        if ctx.evaluations() < at:
            continue
        del due[node_id]
        node = retry(ctx.store, ctx.campaign, ctx.target, node_id, by="critic")
        ctx.report("sandbox_info", {"text": f"node {node_id} was rejected for the machine's noise: "
                                            f"measuring it again as node {node.id}"})
        return node
    return None
