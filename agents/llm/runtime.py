"""The LLM side of one campaign: its budget, its failure streak, its audit sink and a read-only
view of the tree for prompts.

One runtime is shared by every LLM agent of a campaign, so the token and cost budgets and the
"endpoint keeps failing" stop condition span roles. It is bound to the store once the campaign
record exists; from then on every LLM exchange is an ``events`` row, and the usage of earlier
runs is summed from those rows so budgets survive a restart.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Callable

from arbor.search_tree.records import MeasurementRecord, NodeRecord, VerdictRecord
from arbor.search_tree.store import Store

from .audit import Redactor
from .budget import LLMBudget, UsageSnapshot
from .client import CallEvent, LLMClient, Streak
from .config import BudgetConfig, RoleConfig

log = logging.getLogger("arbor.llm")


@dataclass(frozen=True)
class LLMState:
    """What the loop's stop conditions read."""

    usage: UsageSnapshot
    failures_in_row: int
    max_failures_in_row: int
    last_failure: str | None


class LLMRuntime:
    def __init__(self, budget: BudgetConfig):
        self.budget_cfg = budget
        self.budget = LLMBudget(budget)
        self.streaks: dict[str, Streak] = {}  # per agent: one agent's successes do not hide another's failures
        self.redactor = Redactor()
        self.store: Store | None = None
        self.campaign_id: int | None = None
        self.memory_events: list[CallEvent] = []  # used only while unbound (tests, benchmarks)
        self._clients: dict[tuple, LLMClient] = {}
        self._after = 0
        self._latest: dict[str, dict] = {}
        # the campaign's wall budget left, in seconds (set by the campaign once its clock runs);
        # every client caps its request timeouts by it
        self.time_left: Callable[[], float] | None = None

    # --- wiring -------------------------------------------------------------------------
    def bind(self, store: Store, campaign_id: int) -> None:
        """Send events to the store and restore the usage of earlier runs."""
        self.store, self.campaign_id = store, campaign_id
        self._after, self._latest = 0, {}
        p, c, cost = self._scan()
        if p or c or cost:
            self.budget.restore(p, c, cost)

    def _scan(self) -> tuple[int, int, float]:
        """Read events not seen yet: remember the newest payload per kind, sum their usage."""
        p = c = 0
        cost = 0.0
        while True:
            batch = self.store.events(self.campaign_id, after_id=self._after, limit=5000)
            if not batch:
                return p, c, cost
            for ev in batch:
                p += ev.prompt_tokens or 0
                c += ev.completion_tokens or 0
                cost += ev.cost_usd or 0.0
                self._latest[ev.kind] = ev.payload
            self._after = batch[-1].id

    def client(self, cfg: RoleConfig, agent: str) -> LLMClient:
        """A client per (role settings, agent). The key is read from the environment here and
        handed to the SDK; only the variable's name is ever stored."""
        key = (cfg, agent)
        if key not in self._clients:
            api_key = os.environ.get(cfg.api_key_env) if cfg.api_key_env else None
            streak = self.streaks.setdefault(agent, Streak())
            self._clients[key] = LLMClient(cfg, agent, self.budget, self.record, self.redactor, streak,
                                           api_key=api_key, time_left=self._wall_left)
        return self._clients[key]

    def _wall_left(self) -> float | None:
        return None if self.time_left is None else self.time_left()

    def record(self, ev: CallEvent) -> int | None:
        payload = self.redactor.scrub(ev.payload)
        if ev.payload.get("status") in ("retry", "error"):
            log.warning("%s: %s", ev.agent, payload.get("error"))
        if self.store is None or self.campaign_id is None:
            self.memory_events.append(CallEvent(ev.agent, ev.node_id, payload, ev.prompt_tokens,
                                                ev.completion_tokens, ev.cost_usd, ev.kind))
            return len(self.memory_events)
        return self.store.append_event(self.campaign_id, ev.kind, payload, node_id=ev.node_id, agent=ev.agent,
                                       prompt_tokens=ev.prompt_tokens, completion_tokens=ev.completion_tokens,
                                       cost_usd=ev.cost_usd)

    def note(self, agent: str, kind: str, payload: dict, node_id: int | None = None) -> None:
        """A non-call event from an LLM agent (a fallback, a narrative)."""
        self.record(CallEvent(agent, node_id, payload, kind=kind))

    # --- stop conditions ----------------------------------------------------------------
    def state(self) -> LLMState:
        worst = max(self.streaks.values(), key=lambda st: st.failures, default=Streak())
        return LLMState(self.budget.snapshot(), worst.failures, self.budget_cfg.max_failures_in_row, worst.last)

    # --- read-only tree view for prompts ------------------------------------------------
    def nodes(self) -> list[NodeRecord]:
        return self.store.nodes(self.campaign_id) if self.store and self.campaign_id else []

    def source(self, sha: str) -> str:
        return self.store.get_artifact(sha) if self.store else ""

    def known(self, sha: str) -> bool:
        """Is this artifact already a node of the campaign (it would never be measured twice)?"""
        return bool(self.store and self.campaign_id and self.store.find_node(self.campaign_id, sha))

    def last_measurement(self, node_id: int) -> MeasurementRecord | None:
        if not self.store:
            return None
        ms = self.store.measurements(node_id)
        return ms[-1] if ms else None

    def verdicts(self, node_id: int) -> list[VerdictRecord]:
        return self.store.verdicts(node_id) if self.store else []

    def latest_event(self, kind: str) -> dict | None:
        """The newest event of a kind (e.g. a bottleneck profile written by another component)."""
        if not self.store or not self.campaign_id:
            return None
        self._scan()
        return self._latest.get(kind)
