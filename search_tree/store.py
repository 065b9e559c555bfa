"""The storage contract (as Optuna's BaseStorage): the loop, the CLI and the dashboard talk to
this interface only, so a PostgreSQL-backed store for many workers is a drop-in. Stores are
opened with ``arbor.search_tree.open_store``; the SQLAlchemy implementation lives in ``sql/``
and imports this module, never the other way round.

Invariants every implementation keeps (``tests/store`` checks them):

* Composite operations (``record_measurement``, ``record_verdict``) are single transactions: a
  crash between "measured" and "judged" can never leave half a result behind.
* Artifacts are content-addressed (``artifact_sha``) and immutable; a campaign holds at most one
  node per artifact (``DuplicateArtifact``), so nothing is measured twice.
* Nodes move only along the legal state transitions (``IllegalTransition`` otherwise), and a
  finished node and the event log are never rewritten.
* A measurement series is unique per (node, attempt).
* A running node holds its owner's lease until its first measurement is recorded; only
  ``requeue_orphans`` takes a lease from an owner that died.
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from datetime import datetime
from typing import Any, Callable, Iterable

from .records import (
    CampaignRecord,
    EventRecord,
    MeasurementRecord,
    NodeRecord,
    VerdictRecord,
)


class StoreError(RuntimeError):
    """A store problem a user can act on (one line: what and how to fix)."""


class DuplicateArtifact(StoreError):
    """The campaign already has a node for this exact artifact: it is never measured twice."""

    def __init__(self, node_id: int):
        super().__init__(f"artifact already present as node {node_id}")
        self.node_id = node_id

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (type(self), (self.node_id,))


class IllegalTransition(StoreError):
    pass


class CampaignBusy(StoreError):
    """Another live ``arbor run`` holds the campaign's lease (one writer per campaign)."""


def artifact_sha(content: str) -> str:
    return hashlib.sha256(content.encode("utf-8")).hexdigest()


class Store(ABC):
    # --- campaigns ---------------------------------------------------------------------
    @abstractmethod
    def get_or_create_campaign(self, name: str, kind: str, spec: dict) -> CampaignRecord: ...

    @abstractmethod
    def get_campaign(self, name: str | None = None, campaign_id: int | None = None) -> CampaignRecord | None: ...

    @abstractmethod
    def list_campaigns(self) -> list[CampaignRecord]: ...

    @abstractmethod
    def update_campaign(self, campaign_id: int, **fields: Any) -> CampaignRecord: ...

    @abstractmethod
    def add_elapsed(self, campaign_id: int, seconds: float) -> float: ...

    def delete_campaign(self, campaign_id: int) -> int:
        """Remove a campaign and everything recorded under it (``arbor campaigns rm``); returns
        the number of nodes removed. Stores that keep an immutable history may refuse."""
        raise StoreError("this store cannot delete campaigns — archive it with `arbor campaigns rename`")

    # --- artifacts ---------------------------------------------------------------------
    @abstractmethod
    def put_artifact(self, content: str, kind: str) -> str: ...

    @abstractmethod
    def get_artifact(self, sha: str) -> str: ...

    # --- nodes -------------------------------------------------------------------------
    @abstractmethod
    def add_node(self, campaign_id: int, artifact_sha: str, specialist: str, *,
                 parent_id: int | None = None, move_id: str | None = None,
                 family: str | None = None, hypothesis: str = "", prior: float = 1.0,
                 predicted_gain: float | None = None, step: int = 0,
                 state: str = "proposed") -> NodeRecord: ...

    @abstractmethod
    def get_node(self, node_id: int) -> NodeRecord | None: ...

    @abstractmethod
    def find_node(self, campaign_id: int, artifact_sha: str) -> NodeRecord | None: ...

    @abstractmethod
    def nodes(self, campaign_id: int, states: Iterable[str] | None = None) -> list[NodeRecord]: ...

    @abstractmethod
    def transition(self, node_id: int, to_state: str, **fields: Any) -> NodeRecord: ...

    @abstractmethod
    def count_by_state(self, campaign_id: int) -> dict[str, int]: ...

    # --- leases ------------------------------------------------------------------------
    @abstractmethod
    def start_running(self, node_id: int, owner: str) -> NodeRecord:
        """queued -> running and take the node's lease, atomically."""

    @abstractmethod
    def heartbeat(self, owner: str) -> int: ...

    @abstractmethod
    def requeue_orphans(self, campaign_id: int, stale_after_s: float, max_crashes: int | None = None,
                        pid_alive: Callable[[int], bool] | None = None) -> list[int]:
        """Running nodes whose owner died go back to queued; returns their ids.

        An owner is dead when its heartbeat is older than ``stale_after_s``, or — with
        ``pid_alive`` — when its lease names this host and ``pid_alive(lease pid)`` is False.
        The store records leases but does not know about processes: whether a pid lives is the
        sandbox's knowledge (``arbor.sandbox.runners.proctree.pid_alive``), and the store may import
        neither the sandbox nor the layers above it, so the campaign, which imports both,
        hands the predicate in. Without one only the heartbeat decides."""

    # --- the campaign lease (one writer per campaign; readers never take it) -------------
    @abstractmethod
    def acquire_campaign(self, campaign_id: int, owner: str, stale_after_s: float,
                         pid_alive: Callable[[int], bool] | None = None) -> dict | None:
        """Take the campaign for ``owner`` (returns the dead owner taken over from, or None);
        raises CampaignBusy while a live owner holds it. A holder on this host whose pid
        ``pid_alive`` says is gone is dead (the caller supplies the test, as for requeue_orphans);
        any holder whose heartbeat is older than ``stale_after_s`` is dead too."""

    @abstractmethod
    def campaign_heartbeat(self, campaign_id: int, owner: str) -> bool:
        """Beat the campaign lease and the owner's node leases; False once it is not ours."""

    @abstractmethod
    def release_campaign(self, campaign_id: int, owner: str) -> list[int]:
        """Drop the lease; the owner's running nodes go back to the queue (returns their ids)."""

    # --- measurements and verdicts -----------------------------------------------------
    @abstractmethod
    def record_measurement(self, node_id: int, attempt: int, purpose: str, data: dict,
                           runner: str) -> MeasurementRecord:
        """Insert one measurement series; the first one also moves running -> measured and
        drops the lease. Unique on (node, attempt): a series is never recorded twice."""

    @abstractmethod
    def measurements(self, node_id: int) -> list[MeasurementRecord]: ...

    @abstractmethod
    def measurement_count(self, campaign_id: int, distinct_candidates: bool = False) -> int:
        """All measurement series, or (distinct_candidates) non-root nodes measured at least once."""

    @abstractmethod
    def record_verdict(self, node_id: int, measurement_id: int | None, decision: str,
                       diagnosis: str, reason: str, gates: list, agent: str = "critic",
                       final_state: str | None = None, requeue: bool = False,
                       **node_fields: Any) -> VerdictRecord:
        """Store the verdict and, with ``final_state``, finish the node — or with ``requeue``
        send it back to the queue for another measurement — in the same transaction, so a
        crash can never leave a verdict without its consequence."""

    @abstractmethod
    def verdicts(self, node_id: int) -> list[VerdictRecord]: ...

    @abstractmethod
    def recent_verdicts(self, campaign_id: int, limit: int = 20) -> list[VerdictRecord]: ...

    # --- events ------------------------------------------------------------------------
    @abstractmethod
    def append_event(self, campaign_id: int, kind: str, payload: dict | None = None, *,
                     node_id: int | None = None, agent: str | None = None,
                     prompt_tokens: int = 0, completion_tokens: int = 0,
                     cost_usd: float = 0.0) -> int: ...

    @abstractmethod
    def events(self, campaign_id: int, after_id: int = 0, limit: int = 1000,
               kinds: Iterable[str] | None = None) -> list[EventRecord]: ...

    # --- incremental reads (dashboards, reports, exports) --------------------------------
    # Readers that poll a live campaign ask only for what changed since their last cursor, so a
    # frame costs a few indexed rows however large the tree is. The defaults below are correct
    # but slow (they load everything); SqlStore answers each with one indexed query.
    def schema_revision(self) -> str | None:
        """The store's migration revision, or None while the schema does not exist yet."""
        return "unknown"

    def nodes_changed_since(self, campaign_id: int, since: datetime | None = None,
                            limit: int = 100_000) -> list[NodeRecord]:
        """Nodes written at or after ``since`` (all of them for None), oldest write first.
        Inclusive on purpose: callers dedupe by id, and a write sharing the cursor's timestamp
        is never lost."""
        rows = [n for n in self.nodes(campaign_id)
                if since is None or (n.updated_at is not None and n.updated_at >= since)]
        rows.sort(key=lambda n: (n.updated_at or n.created_at, n.id))
        return rows[:limit]

    def verdicts_after(self, campaign_id: int, after_id: int = 0, limit: int = 1000) -> list[VerdictRecord]:
        """Verdicts of the campaign with id > after_id, oldest first."""
        rows = [v for n in self.nodes(campaign_id) for v in self.verdicts(n.id) if v.id > after_id]
        return sorted(rows, key=lambda v: v.id)[:limit]

    def measurements_after(self, campaign_id: int, after_id: int = 0, limit: int = 1000,
                           samples: bool = True) -> list[MeasurementRecord]:
        """Measurement series of the campaign with id > after_id, oldest first. With
        ``samples=False`` the raw sample lists come back empty (they are the bulk of a row)."""
        rows = [m for n in self.nodes(campaign_id) for m in self.measurements(n.id) if m.id > after_id]
        return sorted(rows, key=lambda m: m.id)[:limit]

    def recent_events(self, campaign_id: int, limit: int = 50) -> list[EventRecord]:
        """The newest ``limit`` events, oldest first (where a reader attaching late starts)."""
        return self.events(campaign_id, limit=10**9)[-limit:]

    def event_totals(self, campaign_id: int) -> dict[str, float]:
        """count, last_id, prompt_tokens, completion_tokens, cost_usd over the campaign's events."""
        evs = self.events(campaign_id, limit=10**9)
        return {"count": len(evs), "last_id": evs[-1].id if evs else 0,
                "prompt_tokens": sum(e.prompt_tokens for e in evs),
                "completion_tokens": sum(e.completion_tokens for e in evs),
                "cost_usd": sum(e.cost_usd for e in evs)}

    # --- ad-hoc SQL --------------------------------------------------------------------
    @abstractmethod
    def read_only_query(self, sql: str, limit: int = 10_000) -> tuple[list[str], list[tuple]]: ...

    def close(self) -> None:  # pragma: no cover - trivial default
        pass
