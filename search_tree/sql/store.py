"""SQLAlchemy implementation of the store (SQLite in WAL mode by default, any URL works)."""

from __future__ import annotations

import os
import re
import socket
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any, Callable, Iterable, Iterator

from sqlalchemy import delete, func, select, text, update
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

from ..records import (
    CampaignRecord,
    EventRecord,
    MeasurementRecord,
    NodeRecord,
    VerdictRecord,
    to_record,
)
from ..store import DuplicateArtifact, IllegalTransition, Store, StoreError, artifact_sha
from . import migrate
from .engine import make_engine
from .errors import open_error, query_error
from .leases import CampaignLeaseMixin
from .models import Artifact, Campaign, Event, Lease, Measurement, Node, NodeState, Verdict, utcnow

HOST = socket.gethostname()
_READ_ONLY_SQL = re.compile(r"^\s*(select|with|explain|pragma\s+table_info)\b", re.IGNORECASE)


def _no_index(column):
    """``column + 0``: the classic way to keep a planner off that column's index. Incremental
    readers filter "id > cursor" on verdicts/measurements joined to nodes for the campaign; driven
    from the nodes' campaign index that is a scan of the whole tree per poll, driven from the id
    range it is the handful of new rows (then one primary-key lookup per row)."""
    return column + 0


class SqlStore(CampaignLeaseMixin, Store):
    def __init__(self, url: str, read_only: bool = False):
        self.url = url
        self.is_sqlite = url.startswith("sqlite")
        self.read_only = read_only
        try:
            self.engine = make_engine(url, read_only)
            if not read_only:  # observers never migrate, create or write (see open_store)
                migrate.upgrade(self.engine)
            else:
                migrate.check_readable(self.engine)
        except StoreError:
            raise
        except Exception as exc:  # bad URL, missing driver, corrupt file, newer schema: one line
            raise open_error(url, exc) from None
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)

    @contextmanager
    def _tx(self) -> Iterator[Session]:
        with self._sessions() as s, s.begin():
            yield s

    # --- campaigns ---------------------------------------------------------------------
    def get_or_create_campaign(self, name: str, kind: str, spec: dict) -> CampaignRecord:
        import hashlib
        import json

        spec_hash = hashlib.sha256(json.dumps(spec, sort_keys=True, default=str).encode()).hexdigest()
        try:
            return self._get_or_create_campaign(name, kind, spec, spec_hash)
        except IntegrityError:  # another run created it between our read and our insert
            return self._get_or_create_campaign(name, kind, spec, spec_hash)

    def _get_or_create_campaign(self, name: str, kind: str, spec: dict, spec_hash: str) -> CampaignRecord:
        with self._tx() as s:
            row = s.scalar(select(Campaign).where(Campaign.name == name))
            if row is None:
                row = Campaign(name=name, kind=kind, spec=spec, spec_hash=spec_hash,
                               status="running", elapsed_s=0.0)
                s.add(row)
                s.flush()
            elif row.spec_hash != spec_hash:
                row.spec, row.spec_hash = spec, spec_hash
            return to_record(row, CampaignRecord)

    def get_campaign(self, name: str | None = None, campaign_id: int | None = None) -> CampaignRecord | None:
        with self._tx() as s:
            q = select(Campaign)
            q = q.where(Campaign.id == campaign_id) if campaign_id is not None else q.where(Campaign.name == name)
            row = s.scalar(q)
            return to_record(row, CampaignRecord) if row else None

    def list_campaigns(self) -> list[CampaignRecord]:
        with self._tx() as s:
            return [to_record(r, CampaignRecord) for r in s.scalars(select(Campaign).order_by(Campaign.id))]

    def update_campaign(self, campaign_id: int, **fields: Any) -> CampaignRecord:
        with self._tx() as s:
            row = s.get(Campaign, campaign_id)
            for k, v in fields.items():
                setattr(row, k, v)
            return to_record(row, CampaignRecord)

    def delete_campaign(self, campaign_id: int) -> int:
        from .admin import delete_campaign

        return delete_campaign(self.engine, campaign_id)

    def add_elapsed(self, campaign_id: int, seconds: float) -> float:
        with self._tx() as s:
            row = s.get(Campaign, campaign_id)
            row.elapsed_s = (row.elapsed_s or 0.0) + max(0.0, seconds)
            return row.elapsed_s

    # --- artifacts ---------------------------------------------------------------------
    def put_artifact(self, content: str, kind: str) -> str:
        sha = artifact_sha(content)
        with self._tx() as s:
            if s.get(Artifact, sha) is None:
                s.add(Artifact(sha256=sha, kind=kind, content=content, size=len(content.encode())))
        return sha

    def get_artifact(self, sha: str) -> str:
        with self._tx() as s:
            row = s.get(Artifact, sha)
            if row is None:
                raise StoreError(f"no artifact {sha[:12]} in the store")
            return row.content

    # --- nodes -------------------------------------------------------------------------
    def add_node(self, campaign_id, artifact_sha, specialist, *, parent_id=None, move_id=None,
                 family=None, hypothesis="", prior=1.0, predicted_gain=None, step=0,
                 state=NodeState.PROPOSED) -> NodeRecord:
        with self._tx() as s:
            existing = s.scalar(select(Node).where(Node.campaign_id == campaign_id,
                                                   Node.artifact_sha == artifact_sha))
            if existing is not None:
                raise DuplicateArtifact(existing.id)
            depth = 0
            if parent_id is not None:
                depth = s.get(Node, parent_id).depth + 1
            row = Node(campaign_id=campaign_id, parent_id=parent_id, depth=depth, state=state,
                       artifact_sha=artifact_sha, specialist=specialist, move_id=move_id,
                       family=family, hypothesis=hypothesis, prior=prior,
                       predicted_gain=predicted_gain, step=step)
            s.add(row)
            s.flush()
            return to_record(row, NodeRecord)

    def get_node(self, node_id: int) -> NodeRecord | None:
        with self._tx() as s:
            row = s.get(Node, node_id)
            return to_record(row, NodeRecord) if row else None

    def find_node(self, campaign_id: int, artifact_sha: str) -> NodeRecord | None:
        with self._tx() as s:
            row = s.scalar(select(Node).where(Node.campaign_id == campaign_id,
                                              Node.artifact_sha == artifact_sha))
            return to_record(row, NodeRecord) if row else None

    def nodes(self, campaign_id: int, states: Iterable[str] | None = None) -> list[NodeRecord]:
        with self._tx() as s:
            q = select(Node).where(Node.campaign_id == campaign_id)
            if states is not None:
                q = q.where(Node.state.in_(list(states)))
            return [to_record(r, NodeRecord) for r in s.scalars(q.order_by(Node.id))]

    @staticmethod
    def _move(row: Node, to_state: str, fields: dict) -> None:
        allowed = NodeState.TRANSITIONS.get(row.state, set())
        if to_state not in allowed:
            raise IllegalTransition(f"node {row.id}: {row.state} -> {to_state} is not allowed")
        row.state = to_state
        for k, v in fields.items():
            setattr(row, k, v)
        if to_state in NodeState.TERMINAL:
            row.finished_at = utcnow()

    def transition(self, node_id: int, to_state: str, **fields: Any) -> NodeRecord:
        with self._tx() as s:
            row = s.get(Node, node_id)
            self._move(row, to_state, fields)
            return to_record(row, NodeRecord)

    def count_by_state(self, campaign_id: int) -> dict[str, int]:
        with self._tx() as s:
            rows = s.execute(select(Node.state, func.count()).where(Node.campaign_id == campaign_id)
                             .group_by(Node.state)).all()
            return {state: n for state, n in rows}

    # --- leases ------------------------------------------------------------------------
    def start_running(self, node_id: int, owner: str) -> NodeRecord:
        with self._tx() as s:
            row = s.get(Node, node_id)
            self._move(row, NodeState.RUNNING, {})
            s.merge(Lease(node_id=node_id, campaign_id=row.campaign_id, owner=owner, host=HOST,
                          pid=os.getpid(), acquired_at=utcnow(), heartbeat_at=utcnow()))
            return to_record(row, NodeRecord)

    def heartbeat(self, owner: str) -> int:
        with self._tx() as s:
            res = s.execute(update(Lease).where(Lease.owner == owner).values(heartbeat_at=utcnow()))
            return res.rowcount or 0

    def requeue_orphans(self, campaign_id: int, stale_after_s: float,
                        max_crashes: int | None = None,
                        pid_alive: Callable[[int], bool] | None = None) -> list[int]:
        requeued = []
        cutoff = utcnow() - timedelta(seconds=stale_after_s)
        with self._tx() as s:
            running = s.scalars(select(Node).where(Node.campaign_id == campaign_id,
                                                   Node.state == NodeState.RUNNING)).all()
            for node in running:
                lease = s.get(Lease, node.id)
                dead = (lease is None or lease.heartbeat_at < cutoff
                        or (pid_alive is not None and lease.host == HOST and not pid_alive(lease.pid)))
                if not dead:
                    continue
                if lease is not None:
                    s.delete(lease)
                crashes = 1 + (s.scalar(select(func.count()).select_from(Event).where(
                    Event.campaign_id == campaign_id, Event.node_id == node.id,
                    Event.kind == "requeued")) or 0)
                if max_crashes is not None and crashes >= max_crashes:
                    self._fail_poisoned(s, node, crashes)
                    continue
                self._move(node, NodeState.QUEUED, {})
                s.add(Event(campaign_id=campaign_id, node_id=node.id, kind="requeued", agent="store",
                            payload={"reason": "owner died" if lease else "no lease"}))
                requeued.append(node.id)
        return requeued

    # --- measurements and verdicts -----------------------------------------------------
    def record_measurement(self, node_id, attempt, purpose, data, runner) -> MeasurementRecord:
        keys = ("status", "error_class", "error_text", "baseline_samples", "candidate_samples",
                "stats", "correctness", "fingerprint", "duration_s")
        try:
            with self._tx() as s:
                node = s.get(Node, node_id)
                row = Measurement(node_id=node_id, artifact_sha=node.artifact_sha, attempt=attempt,
                                  purpose=purpose, runner=runner,
                                  **{k: data[k] for k in keys if k in data and data[k] is not None})
                s.add(row)
                if node.state == NodeState.RUNNING:
                    self._move(node, NodeState.MEASURED, {})
                s.execute(delete(Lease).where(Lease.node_id == node_id))
                s.flush()
                return to_record(row, MeasurementRecord)
        except IntegrityError:
            raise StoreError(f"node {node_id} already has measurement attempt {attempt}") from None

    def measurements(self, node_id: int) -> list[MeasurementRecord]:
        with self._tx() as s:
            rows = s.scalars(select(Measurement).where(Measurement.node_id == node_id)
                             .order_by(Measurement.attempt))
            return [to_record(r, MeasurementRecord) for r in rows]

    def measurement_count(self, campaign_id: int, distinct_candidates: bool = False) -> int:
        with self._tx() as s:
            what = func.count(func.distinct(Measurement.node_id)) if distinct_candidates else func.count()
            q = select(what).select_from(Measurement).join(Node).where(Node.campaign_id == campaign_id)
            if distinct_candidates:
                q = q.where(Node.parent_id.is_not(None))
            return s.scalar(q) or 0

    def record_verdict(self, node_id, measurement_id, decision, diagnosis, reason, gates,
                       agent="critic", final_state=None, requeue=False, **node_fields) -> VerdictRecord:
        with self._tx() as s:
            row = Verdict(node_id=node_id, measurement_id=measurement_id, decision=decision,
                          diagnosis=diagnosis, reason=reason, gates=gates, agent=agent)
            s.add(row)
            node = s.get(Node, node_id)
            if final_state is not None:
                self._move(node, final_state, {"diagnosis": diagnosis, "reason": reason, **node_fields})
            elif requeue:
                self._move(node, NodeState.QUEUED, {})
            s.add(Event(campaign_id=node.campaign_id, node_id=node_id, kind="verdict", agent=agent,
                        payload={"decision": decision, "diagnosis": diagnosis, "reason": reason}))
            s.flush()
            return to_record(row, VerdictRecord)

    def verdicts(self, node_id: int) -> list[VerdictRecord]:
        with self._tx() as s:
            rows = s.scalars(select(Verdict).where(Verdict.node_id == node_id).order_by(Verdict.id))
            return [to_record(r, VerdictRecord) for r in rows]

    def recent_verdicts(self, campaign_id: int, limit: int = 20) -> list[VerdictRecord]:
        with self._tx() as s:
            # walk verdicts newest first and filter by campaign (not: every node of the campaign,
            # then sort all their verdicts): 2 s -> milliseconds at 1e6 nodes
            rows = s.scalars(select(Verdict).join(Node, Node.id == Verdict.node_id)
                             .where(_no_index(Node.campaign_id) == campaign_id)
                             .order_by(Verdict.id.desc()).limit(limit))
            return [to_record(r, VerdictRecord) for r in rows]

    # --- events ------------------------------------------------------------------------
    def append_event(self, campaign_id, kind, payload=None, *, node_id=None, agent=None,
                     prompt_tokens=0, completion_tokens=0, cost_usd=0.0) -> int:
        with self._tx() as s:
            row = Event(campaign_id=campaign_id, node_id=node_id, kind=kind, agent=agent,
                        payload=payload or {}, prompt_tokens=prompt_tokens,
                        completion_tokens=completion_tokens, cost_usd=cost_usd)
            s.add(row)
            s.flush()
            return row.id

    def events(self, campaign_id: int, after_id: int = 0, limit: int = 1000,
               kinds: Iterable[str] | None = None) -> list[EventRecord]:
        with self._tx() as s:
            q = select(Event).where(Event.campaign_id == campaign_id, Event.id > after_id)
            if kinds is not None:
                q = q.where(Event.kind.in_(list(kinds)))
            rows = s.scalars(q.order_by(Event.id).limit(limit))
            return [to_record(r, EventRecord) for r in rows]

    # --- incremental reads (one indexed query each; see Store) ---------------------------
    def schema_revision(self) -> str | None:
        from alembic.runtime.migration import MigrationContext

        try:
            with self.engine.connect() as conn:
                return MigrationContext.configure(conn).get_current_revision()
        except OperationalError:
            return None

    def nodes_changed_since(self, campaign_id: int, since: datetime | None = None,
                            limit: int = 100_000) -> list[NodeRecord]:
        with self._tx() as s:
            q = select(Node).where(Node.campaign_id == campaign_id)
            if since is not None:
                q = q.where(Node.updated_at >= since)
            rows = s.scalars(q.order_by(Node.updated_at, Node.id).limit(limit))
            return [to_record(r, NodeRecord) for r in rows]

    def verdicts_after(self, campaign_id: int, after_id: int = 0, limit: int = 1000) -> list[VerdictRecord]:
        with self._tx() as s:
            rows = s.scalars(select(Verdict).join(Node, Node.id == Verdict.node_id)
                             .where(_no_index(Node.campaign_id) == campaign_id, Verdict.id > after_id)
                             .order_by(Verdict.id).limit(limit))
            return [to_record(r, VerdictRecord) for r in rows]

    def measurements_after(self, campaign_id: int, after_id: int = 0, limit: int = 1000,
                           samples: bool = True) -> list[MeasurementRecord]:
        skip = () if samples else ("baseline_samples", "candidate_samples")
        cols = [c for c in Measurement.__table__.columns if c.name not in skip]
        with self._tx() as s:
            rows = s.execute(select(*cols).join(Node, Node.id == Measurement.node_id)
                             .where(_no_index(Node.campaign_id) == campaign_id, Measurement.id > after_id)
                             .order_by(Measurement.id).limit(limit)).mappings()
            return [MeasurementRecord(**dict(r)) for r in rows]

    def recent_events(self, campaign_id: int, limit: int = 50) -> list[EventRecord]:
        with self._tx() as s:
            rows = s.scalars(select(Event).where(Event.campaign_id == campaign_id)
                             .order_by(Event.id.desc()).limit(limit))
            return [to_record(r, EventRecord) for r in reversed(list(rows))]

    def event_totals(self, campaign_id: int) -> dict[str, float]:
        with self._tx() as s:
            n, last, pt, ct, cost = s.execute(
                select(func.count(), func.max(Event.id), func.sum(Event.prompt_tokens),
                       func.sum(Event.completion_tokens), func.sum(Event.cost_usd))
                .where(Event.campaign_id == campaign_id)).one()
            return {"count": n or 0, "last_id": last or 0, "prompt_tokens": pt or 0,
                    "completion_tokens": ct or 0, "cost_usd": float(cost or 0.0)}

    # --- ad-hoc SQL --------------------------------------------------------------------
    def read_only_query(self, sql: str, limit: int = 10_000) -> tuple[list[str], list[tuple]]:
        """Run one read-only statement. Enforced by the database (SQLite ``query_only``,
        PostgreSQL ``READ ONLY`` transactions), not just by looking at the text."""
        if not _READ_ONLY_SQL.match(sql) or ";" in sql.strip().rstrip(";"):
            raise StoreError("arbor query takes one read-only SELECT/WITH statement — "
                             "write statements are refused")
        with self.engine.connect() as conn:
            try:
                if self.is_sqlite:
                    conn.exec_driver_sql("PRAGMA query_only = ON")
                elif self.engine.dialect.name == "postgresql":
                    conn.exec_driver_sql("SET TRANSACTION READ ONLY")
                result = conn.execute(text(sql))
                cols = list(result.keys())
                rows = [tuple(r) for r in result.fetchmany(limit)]
                return cols, rows
            except DBAPIError as exc:  # a refused write, a syntax error, a missing table
                raise query_error(exc) from None
            finally:
                if self.is_sqlite and not self.read_only:
                    conn.exec_driver_sql("PRAGMA query_only = OFF")
                conn.rollback()

    def close(self) -> None:
        self.engine.dispose()
