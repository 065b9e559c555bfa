"""Plain, detached views of store rows.

Callers never hold ORM objects: a record is safe to pass across threads, graph nodes and
process boundaries, and cannot lazily hit the database (or a closed session) later.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime


@dataclass(frozen=True)
class CampaignRecord:
    id: int
    name: str
    kind: str
    spec: dict
    spec_hash: str
    status: str
    stop_reason: str | None
    elapsed_s: float
    root_node_id: int | None
    created_at: datetime
    updated_at: datetime | None = None  # last write; the dashboard shows "last activity" from it


@dataclass(frozen=True)
class NodeRecord:
    id: int
    campaign_id: int
    parent_id: int | None
    depth: int
    state: str
    artifact_sha: str
    specialist: str
    move_id: str | None
    family: str | None
    hypothesis: str
    prior: float
    predicted_gain: float | None
    value: float | None
    speedup: float | None
    diagnosis: str | None
    reason: str | None
    step: int
    created_at: datetime
    finished_at: datetime | None
    updated_at: datetime | None = None  # cursor for incremental readers (nodes_changed_since)


@dataclass(frozen=True)
class MeasurementRecord:
    id: int
    node_id: int
    artifact_sha: str
    attempt: int
    purpose: str
    status: str
    error_class: str | None
    error_text: str | None
    baseline_samples: list = field(default_factory=list)
    candidate_samples: list = field(default_factory=list)
    stats: dict = field(default_factory=dict)
    correctness: list = field(default_factory=list)
    fingerprint: dict = field(default_factory=dict)
    runner: str = "local"
    duration_s: float = 0.0
    created_at: datetime | None = None


@dataclass(frozen=True)
class VerdictRecord:
    id: int
    node_id: int
    measurement_id: int | None
    decision: str
    diagnosis: str
    reason: str
    gates: list
    agent: str
    created_at: datetime

    @property
    def stats(self) -> dict:
        """The Critic's statistics: they travel in the verdict's gate log (its last entry)."""
        for g in reversed(self.gates or []):
            if isinstance(g, dict) and isinstance(g.get("stats"), dict):
                return g["stats"]
        return {}


@dataclass(frozen=True)
class EventRecord:
    id: int
    campaign_id: int
    node_id: int | None
    kind: str
    agent: str | None
    payload: dict
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    created_at: datetime


def to_record(row, cls):
    """Copy the mapped columns of ``row`` into the frozen dataclass ``cls``."""
    names = cls.__dataclass_fields__.keys()
    return cls(**{n: getattr(row, n) for n in names})
