"""SQLAlchemy 2 models of the store.

The store is the source of truth of a campaign (the LangGraph checkpoint is not): every table
here is written before the next step starts, so a killed process loses at most the step in
flight. Blobs live in ``artifacts`` keyed by sha256 so identical candidates share one row and
are never measured twice; everything else refers to them by hash.
"""

from __future__ import annotations

from datetime import datetime, timezone

from sqlalchemy import (
    JSON,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


def utcnow() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


class Base(DeclarativeBase):
    pass


class NodeState:
    """Node lifecycle. Terminal states are immutable (enforced in the store and by triggers)."""

    PROPOSED = "proposed"
    QUEUED = "queued"
    RUNNING = "running"
    MEASURED = "measured"
    ACCEPTED = "accepted"
    REJECTED = "rejected"
    FAILED = "failed"
    PRUNED = "pruned"

    ALL = (PROPOSED, QUEUED, RUNNING, MEASURED, ACCEPTED, REJECTED, FAILED, PRUNED)
    TERMINAL = frozenset({ACCEPTED, REJECTED, FAILED, PRUNED})
    # allowed transitions: from -> {to}
    TRANSITIONS = {
        PROPOSED: {QUEUED, REJECTED, PRUNED, FAILED},
        QUEUED: {RUNNING, PRUNED},
        RUNNING: {MEASURED, QUEUED, FAILED},
        MEASURED: {ACCEPTED, REJECTED, FAILED, QUEUED},
    }


class Campaign(Base):
    __tablename__ = "campaigns"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    kind: Mapped[str] = mapped_column(String(20))
    spec: Mapped[dict] = mapped_column(JSON)
    spec_hash: Mapped[str] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(20), default="running")
    stop_reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    elapsed_s: Mapped[float] = mapped_column(Float, default=0.0)
    root_node_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)


class Artifact(Base):
    __tablename__ = "artifacts"

    sha256: Mapped[str] = mapped_column(String(64), primary_key=True)
    kind: Mapped[str] = mapped_column(String(40))
    content: Mapped[str] = mapped_column(Text)
    size: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class Node(Base):
    __tablename__ = "nodes"
    __table_args__ = (
        UniqueConstraint("campaign_id", "artifact_sha", name="uq_nodes_campaign_artifact"),
        Index("ix_nodes_campaign_state", "campaign_id", "state"),
        Index("ix_nodes_parent", "parent_id"),
        Index("ix_nodes_campaign_updated", "campaign_id", "updated_at"),  # migration 0002
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    campaign_id: Mapped[int] = mapped_column(ForeignKey("campaigns.id"))
    parent_id: Mapped[int | None] = mapped_column(ForeignKey("nodes.id"), nullable=True)
    depth: Mapped[int] = mapped_column(Integer, default=0)
    state: Mapped[str] = mapped_column(String(20), default=NodeState.PROPOSED)
    artifact_sha: Mapped[str] = mapped_column(ForeignKey("artifacts.sha256"))
    specialist: Mapped[str] = mapped_column(String(60))
    move_id: Mapped[str | None] = mapped_column(String(120), nullable=True)
    family: Mapped[str | None] = mapped_column(String(120), nullable=True)
    hypothesis: Mapped[str] = mapped_column(Text, default="")
    prior: Mapped[float] = mapped_column(Float, default=1.0)
    predicted_gain: Mapped[float | None] = mapped_column(Float, nullable=True)
    value: Mapped[float | None] = mapped_column(Float, nullable=True)
    speedup: Mapped[float | None] = mapped_column(Float, nullable=True)
    diagnosis: Mapped[str | None] = mapped_column(String(40), nullable=True)
    reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    step: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(nullable=True)


class Measurement(Base):
    __tablename__ = "measurements"
    __table_args__ = (UniqueConstraint("node_id", "attempt", name="uq_measurements_node_attempt"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    node_id: Mapped[int] = mapped_column(ForeignKey("nodes.id"), index=True)
    artifact_sha: Mapped[str] = mapped_column(ForeignKey("artifacts.sha256"), index=True)
    attempt: Mapped[int] = mapped_column(Integer)
    purpose: Mapped[str] = mapped_column(String(20))  # primary | remeasure | confirm
    status: Mapped[str] = mapped_column(String(10))  # ok | error
    error_class: Mapped[str | None] = mapped_column(String(40), nullable=True)
    error_text: Mapped[str | None] = mapped_column(Text, nullable=True)
    baseline_samples: Mapped[list] = mapped_column(JSON, default=list)
    candidate_samples: Mapped[list] = mapped_column(JSON, default=list)
    stats: Mapped[dict] = mapped_column(JSON, default=dict)
    correctness: Mapped[list] = mapped_column(JSON, default=list)
    fingerprint: Mapped[dict] = mapped_column(JSON, default=dict)
    runner: Mapped[str] = mapped_column(String(20), default="local")
    duration_s: Mapped[float] = mapped_column(Float, default=0.0)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class Verdict(Base):
    __tablename__ = "verdicts"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    node_id: Mapped[int] = mapped_column(ForeignKey("nodes.id"), index=True)
    measurement_id: Mapped[int | None] = mapped_column(ForeignKey("measurements.id"), nullable=True)
    decision: Mapped[str] = mapped_column(String(20))  # accept | reject | remeasure | needs_review
    diagnosis: Mapped[str] = mapped_column(String(40))
    reason: Mapped[str] = mapped_column(Text)
    gates: Mapped[list] = mapped_column(JSON, default=list)
    agent: Mapped[str] = mapped_column(String(60), default="critic")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class Event(Base):
    __tablename__ = "events"
    __table_args__ = (Index("ix_events_campaign_id", "campaign_id", "id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    campaign_id: Mapped[int] = mapped_column(ForeignKey("campaigns.id"))
    node_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    kind: Mapped[str] = mapped_column(String(40))
    agent: Mapped[str | None] = mapped_column(String(60), nullable=True)
    payload: Mapped[dict] = mapped_column(JSON, default=dict)
    prompt_tokens: Mapped[int] = mapped_column(Integer, default=0)
    completion_tokens: Mapped[int] = mapped_column(Integer, default=0)
    cost_usd: Mapped[float] = mapped_column(Float, default=0.0)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class Lease(Base):
    __tablename__ = "leases"

    node_id: Mapped[int] = mapped_column(ForeignKey("nodes.id"), primary_key=True)
    campaign_id: Mapped[int] = mapped_column(ForeignKey("campaigns.id"), index=True)
    owner: Mapped[str] = mapped_column(String(64))
    host: Mapped[str] = mapped_column(String(255))
    pid: Mapped[int] = mapped_column(Integer)
    acquired_at: Mapped[datetime] = mapped_column(default=utcnow)
    heartbeat_at: Mapped[datetime] = mapped_column(default=utcnow)


class CampaignLease(Base):
    """Held by the one ``arbor run`` writing a campaign (migration 0003); readers never take it."""

    __tablename__ = "campaign_leases"

    campaign_id: Mapped[int] = mapped_column(ForeignKey("campaigns.id"), primary_key=True)
    owner: Mapped[str] = mapped_column(String(64))
    host: Mapped[str] = mapped_column(String(255))
    pid: Mapped[int] = mapped_column(Integer)
    acquired_at: Mapped[datetime] = mapped_column(default=utcnow)
    heartbeat_at: Mapped[datetime] = mapped_column(default=utcnow)
