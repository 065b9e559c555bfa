"""Which node is a campaign's final best, and the figures every surface shows for it.

Two numbers describe the best and they differ: the Critic's value (the speedup it accepted the
node on, one paired measurement) and, once the campaign finished, the final verification's median
(``verify.run_final_verification`` re-measures the best and its contenders and may pick a
runner-up: the node with the highest Critic value is not always the final best). Each surface
(the run summary, ``arbor best``, ``tree``/``show``, the dashboard's header and progress panel, the
report's summary and plots) used to choose on its own, and a finished quickstart showed "best [3]
7.339x (verified)" in the dashboard's header beside "best 6.111x, node 4" in its progress panel
and "best 6.01x" in the report's histogram. They all read this module now, and show the verified
figure and the Critic value side by side (``FinalBest.figures``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from arbor.search_tree.records import NodeRecord


@dataclass(frozen=True)
class FinalBest:
    node: NodeRecord | None  # None: nothing accepted yet (the baseline may still be the best)
    speedup: float | None  # the number to lead with: the verified median, else the Critic value
    verified: bool  # ``speedup`` is the final verification's median
    wanted: int | None = None  # measurements the final verification asked for

    @property
    def critic(self) -> float | None:
        """The Critic's value of the node (what ``history`` lists for it)."""
        return self.node.speedup if self.node is not None else None

    @property
    def which(self) -> str:
        return f"verified: median of {self.wanted} measurements" if self.verified else "Critic value"

    @property
    def is_win(self) -> bool:
        """A node other than the baseline, with a number."""
        return self.node is not None and self.node.parent_id is not None and self.speedup is not None

    def figures(self, digits: int = 3) -> str:
        """``7.339x verified, Critic value 6.014x`` — or ``6.014x Critic value`` before the
        final verification (or when it is off)."""
        if self.speedup is None:
            return "—"
        if not self.verified:
            return f"{self.speedup:.{digits}f}x Critic value"
        critic = f", Critic value {self.critic:.{digits}f}x" if self.critic else ""
        return f"{self.speedup:.{digits}f}x verified{critic}"


def highest_value(nodes: Iterable[NodeRecord]) -> NodeRecord | None:
    """The accepted node with the highest Critic value (ties: the older node)."""
    accepted = [n for n in nodes if n.state == "accepted" and n.value is not None]
    return max(accepted, key=lambda n: (n.value, -n.id)) if accepted else None


def pick(nodes: Mapping[int, NodeRecord] | Iterable[NodeRecord], verification: dict | None,
         highest: NodeRecord | None = None) -> FinalBest:
    """The final best from the nodes and the latest final verification outcome (its event's
    payload, or None). ``highest``: the highest-valued accepted node when the caller keeps it
    already (the dashboard does, incrementally); otherwise it is found among ``nodes``."""
    by_id = nodes if isinstance(nodes, Mapping) else {n.id: n for n in nodes}
    if highest is None:
        highest = highest_value(by_id.values())
    v = verification or {}
    chosen = by_id.get(v["best"]) if v.get("best") is not None else None
    if chosen is not None and v.get("speedup") is not None:
        return FinalBest(chosen, float(v["speedup"]), True, v.get("wanted"))
    return FinalBest(highest, highest.speedup if highest is not None else None, False)


def final_best(store, campaign_id: int, nodes: list[NodeRecord] | None = None) -> FinalBest:  # type: ignore[no-untyped-def]
    """The final best of a stored campaign (``nodes``: its nodes when the caller has them)."""
    from .verify import read_final_verification

    return pick(store.nodes(campaign_id) if nodes is None else nodes, read_final_verification(store, campaign_id))
