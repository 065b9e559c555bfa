"""Incremental reads of a live campaign into a small in-memory cache.

The first poll after attaching loads the tree once; every later poll asks the store only for
what changed since its cursors — nodes written since the last write seen (index
``ix_nodes_campaign_updated``), verdicts / measurements / events with an id above the last one
seen (primary-key ranges). An idle campaign therefore costs a handful of rows per frame however
large its tree, and each query is its own short read transaction: the writer (SQLite in WAL
mode) is never blocked and can always checkpoint.
"""

from __future__ import annotations

import time
from collections import Counter, deque
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy.exc import OperationalError

from arbor.search_tree.records import (
    CampaignRecord,
    EventRecord,
    MeasurementRecord,
    NodeRecord,
    VerdictRecord,
)
from arbor.search_tree.store import Store, StoreError

from arbor.campaign.final_best import FinalBest, pick
from arbor.campaign.source import Source

PENDING = frozenset({"proposed", "queued", "running", "measured"})
FINISHED = frozenset({"accepted", "rejected", "failed", "pruned"})
# Writers stamp updated_at before they commit; with several writers a later commit can carry an
# earlier stamp. Re-reading a short window behind the cursor catches those (a few rows at most).
CURSOR_OVERLAP = timedelta(seconds=2)
TOP = 8  # accepted nodes kept as the expandable frontier shown in the tree panel


def verdict_stats(v: VerdictRecord) -> dict:
    return v.stats


@dataclass
class PollStats:
    rows: int = 0  # rows fetched by the last poll
    changed: int = 0  # of which new or different
    ms: float = 0.0
    polls: int = 0
    error: str | None = None  # why the last poll read nothing (the previous frame stays up)


@dataclass
class FeedState:
    """Everything the panels draw. Mutated only by ``CampaignFeed.poll``."""

    waiting: str | None = "not polled yet"  # why there is nothing to show; None once attached
    campaign: CampaignRecord | None = None
    budget: dict = field(default_factory=dict)
    nodes: dict[int, NodeRecord] = field(default_factory=dict)
    children: dict[int, list[int]] = field(default_factory=dict)
    counts: Counter = field(default_factory=Counter)
    pending: set[int] = field(default_factory=set)
    recent_finished: deque = field(default_factory=lambda: deque(maxlen=12))
    best: NodeRecord | None = None
    top_accepted: list[int] = field(default_factory=list)  # best accepted nodes, best first (≤ TOP)
    best_series: list[float] = field(default_factory=list)  # best speedup after each finished candidate
    speedups: list[float] = field(default_factory=list)  # each judged measurement's point estimate
    verdicts: deque = field(default_factory=lambda: deque(maxlen=40))
    events: deque = field(default_factory=lambda: deque(maxlen=60))
    event_count: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    measured_candidates: set[int] = field(default_factory=set)
    measurement_count: int = 0
    fingerprint: dict = field(default_factory=dict)
    last_measurement: MeasurementRecord | None = None
    durations: deque = field(default_factory=lambda: deque(maxlen=50))  # recent measurement seconds (ETA)
    last_activity: datetime | None = None  # newest write seen (UTC, naive like the store)
    verified: dict | None = None  # the latest final_verification outcome (arbor/campaign/verify.py)
    profile: dict | None = None  # the latest bottleneck profile (arbor/campaign/profiling.py), if any
    profile_node: int | None = None  # the node it profiled
    poll: PollStats = field(default_factory=PollStats)

    @property
    def evaluations(self) -> int:
        return len(self.measured_candidates)

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def final(self) -> FinalBest:
        """The final best as the run summary, ``arbor best`` and the report give it: the final
        verification's pick and median once there is one (it may pick a runner-up over the node
        with the highest Critic value), else that node and its Critic value."""
        return pick(self.nodes, self.verified, highest=self.best)

    @property
    def reported_best(self) -> tuple[NodeRecord | None, float | None, str]:
        f = self.final
        return f.node, f.speedup, f.which

    def best_path(self) -> list[NodeRecord]:
        path, cur = [], self.reported_best[0]
        while cur is not None:
            path.append(cur)
            cur = self.nodes.get(cur.parent_id) if cur.parent_id is not None else None
        return list(reversed(path))


class CampaignFeed:
    """Polls one campaign read-only. ``poll()`` is cheap enough to call every second."""

    def __init__(self, source: Source, *, verdicts: int = 40, events: int = 60,
                 overlap: timedelta = CURSOR_OVERLAP):
        self.source = source
        self.overlap = overlap
        self.store: Store | None = None
        self.state = FeedState(verdicts=deque(maxlen=verdicts), events=deque(maxlen=events))
        self._node_cursor: datetime | None = None
        self._verdict_id = 0
        self._event_id = 0
        self._measurement_id = 0
        self._attach_verdicts: list[VerdictRecord] | None = None

    # --- attaching -----------------------------------------------------------------------
    def _attach(self) -> bool:
        """Open the store and find the campaign; False (with ``state.waiting`` set) until both exist."""
        st = self.state
        if self.store is None:
            if not self.source.exists():
                st.waiting = f"no store yet at {self.source.describe()}"
                return False
            try:
                self.store = self.source.open()
            except StoreError as exc:
                st.waiting = str(exc)
                return False
        if self.store.schema_revision() is None:
            st.waiting = f"the store at {self.source.describe()} is being created"
            return False
        camps = self.store.list_campaigns()
        name = self.source.campaign
        if name is not None:
            camp = next((c for c in camps if c.name == name), None)
            if camp is None:
                st.waiting = f"campaign '{name}' has not started yet in {self.source.describe()}"
                return False
        elif not camps:
            st.waiting = f"no campaign has started yet in {self.source.describe()}"
            return False
        elif len(camps) > 1:
            raise StoreError("this store holds several campaigns (" + ", ".join(c.name for c in camps)
                             + ") — pick one with --campaign NAME")
        else:
            camp = camps[0]
        st.campaign, st.waiting = camp, None
        st.budget = self._budget(camp)
        # Late attach: the newest verdicts/events only, and totals by aggregate, not by replay.
        totals = self.store.event_totals(camp.id)
        st.event_count = int(totals["count"])
        st.prompt_tokens, st.completion_tokens = int(totals["prompt_tokens"]), int(totals["completion_tokens"])
        st.cost_usd = float(totals["cost_usd"])
        recent = self.store.recent_events(camp.id, st.events.maxlen or 60)
        st.events.extend(recent)
        # the reported best may have been verified long before the newest events: one query by kind
        verified = self.store.events(camp.id, limit=1_000_000, kinds=["final_verification"])
        st.verified = verified[-1].payload if verified else None
        profiles = self.store.events(camp.id, limit=1_000_000, kinds=["profile"])  # likewise older
        if profiles:
            st.profile, st.profile_node = profiles[-1].payload, profiles[-1].node_id
        self._event_id = int(totals["last_id"])
        st.poll.rows += len(recent) + 1
        # verdicts: enough history for the speedup sparkline, then the id cursor takes over
        self._attach_verdicts = self.store.recent_verdicts(camp.id, limit=500)[::-1]
        return True

    # --- polling ---------------------------------------------------------------------------
    def poll(self) -> bool:
        """Fetch what changed since the last poll; True if anything did."""
        t0 = time.perf_counter()
        st = self.state
        st.poll.rows = st.poll.changed = 0
        st.poll.polls += 1
        st.poll.error = None
        try:
            if st.campaign is None and not self._attach():
                return False
            assert self.store is not None and st.campaign is not None
            cid = st.campaign.id
            camp = self.store.get_campaign(campaign_id=cid)
            st.poll.rows += 1
            if camp is not None and camp != st.campaign:
                st.campaign, st.budget = camp, self._budget(camp)
                st.poll.changed += 1
            self._touch(camp.updated_at if camp else None)
            self._poll_nodes(cid)
            self._poll_measurements(cid)
            self._poll_verdicts(cid)
            self._poll_events(cid)
            return st.poll.changed > 0
        except OperationalError as exc:  # a transient lock or a store being replaced: retry next poll
            st.poll.error = str(getattr(exc, "orig", exc))
            return st.poll.changed > 0
        finally:
            st.poll.ms = (time.perf_counter() - t0) * 1e3

    def _budget(self, camp: CampaignRecord) -> dict:
        """The budget the writer runs with (the store's spec holds its command-line overrides);
        the YAML's only until the store has one."""
        return dict((camp.spec or {}).get("budget") or self.source.budget or {})

    def _touch(self, when: datetime | None) -> None:
        if when is not None and (self.state.last_activity is None or when > self.state.last_activity):
            self.state.last_activity = when

    def _poll_nodes(self, cid: int) -> None:
        since = None if self._node_cursor is None else self._node_cursor - self.overlap
        rows = self.store.nodes_changed_since(cid, since)
        self.state.poll.rows += len(rows)
        for n in rows:
            if n.updated_at is not None and (self._node_cursor is None or n.updated_at > self._node_cursor):
                self._node_cursor = n.updated_at
            if self.state.nodes.get(n.id) != n:
                self._apply_node(n)
                self.state.poll.changed += 1
                self._touch(n.updated_at)

    def _apply_node(self, n: NodeRecord) -> None:
        st = self.state
        old = st.nodes.get(n.id)
        if old is None:
            if n.parent_id is not None:
                st.children.setdefault(n.parent_id, []).append(n.id)
        else:
            st.counts[old.state] -= 1
        st.nodes[n.id] = n
        st.counts[n.state] += 1
        if n.state in PENDING:
            st.pending.add(n.id)
        else:
            st.pending.discard(n.id)
        newly_finished = n.state in FINISHED and (old is None or old.state not in FINISHED)
        if n.state == "accepted" and n.value is not None:
            if st.best is None or (n.value, -n.id) > (st.best.value, -st.best.id):
                st.best = n
            if n.id not in st.top_accepted:  # accepted nodes never change again: keep a short list
                st.top_accepted.append(n.id)
                st.top_accepted.sort(key=lambda i: (-st.nodes[i].value, i))
                del st.top_accepted[TOP:]
        if newly_finished and n.parent_id is not None:
            st.recent_finished.append(n.id)
            st.best_series.append((st.best.speedup or 1.0) if st.best else 1.0)

    def _poll_measurements(self, cid: int) -> None:
        rows = self.store.measurements_after(cid, self._measurement_id, limit=10_000, samples=False)
        st = self.state
        st.poll.rows += len(rows)
        for m in rows:
            self._measurement_id = max(self._measurement_id, m.id)
            st.measurement_count += 1
            node = st.nodes.get(m.node_id)
            if node is None or node.parent_id is not None:
                st.measured_candidates.add(m.node_id)
            if m.fingerprint:
                st.fingerprint = m.fingerprint
            st.last_measurement = m
            if m.duration_s:
                st.durations.append(m.duration_s)
            st.poll.changed += 1
            self._touch(m.created_at)
        # the root is known once nodes are loaded; never count it as an evaluation
        root = st.campaign.root_node_id if st.campaign else None
        st.measured_candidates.discard(root)

    def _poll_verdicts(self, cid: int) -> None:
        if self._attach_verdicts is not None:
            rows, self._attach_verdicts = self._attach_verdicts, None
            rows += self.store.verdicts_after(cid, rows[-1].id if rows else 0, limit=10_000)
        else:
            rows = self.store.verdicts_after(cid, self._verdict_id, limit=10_000)
        st = self.state
        st.poll.rows += len(rows)
        for v in rows:
            self._verdict_id = max(self._verdict_id, v.id)
            st.verdicts.append(v)
            sp = verdict_stats(v).get("speedup")
            node = st.nodes.get(v.node_id)
            if isinstance(sp, (int, float)) and node is not None and node.parent_id is not None:
                st.speedups.append(float(sp))
            st.poll.changed += 1
            self._touch(v.created_at)

    def _poll_events(self, cid: int) -> None:
        rows: list[EventRecord] = self.store.events(cid, after_id=self._event_id, limit=1000)
        st = self.state
        st.poll.rows += len(rows)
        for e in rows:
            self._event_id = max(self._event_id, e.id)
            st.events.append(e)
            st.event_count += 1
            st.prompt_tokens += e.prompt_tokens
            st.completion_tokens += e.completion_tokens
            st.cost_usd += e.cost_usd
            if e.kind == "final_verification":
                st.verified = e.payload
            elif e.kind == "profile":
                st.profile, st.profile_node = e.payload, e.node_id
            st.poll.changed += 1
            self._touch(e.created_at)

    def close(self) -> None:
        if self.store is not None:
            self.store.close()
            self.store = None
