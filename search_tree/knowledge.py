"""Knowledge records: what was learnt about one judged candidate, kept across campaigns.

A campaign writes one ``knowledge`` event per judged candidate into its own store (events are
append-only, so the campaign's history of what it learnt can never be edited). When the campaign
names a knowledge store (``knowledge: {url: ...}``), the same records go to a user-level SQLite
file shared by every campaign of that user, from which later campaigns draw warm-start priors.

Records are facts about measurements, never trusted in place of one: a record carries whether its
candidate passed every integrity gate, and a record can be *revoked* later (the candidate turned
out hostile or incorrect); revoked records stay in the file, for audit, but readers that ask for
usable records never see them as positive evidence.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterable

import sqlalchemy as sa

RECORD_FORMAT = "arbor-knowledge/1"


@dataclass(frozen=True)
class KnowledgeRecord:
    campaign: str
    node_id: int
    artifact_sha: str
    hardware: dict  # {"class": str, "device": str, "family": str, "cores": str}
    software: dict  # {"torch": str | None}
    signature: dict  # {"ops": {kind: share}, "shapes": [bucket...], "dtype": str, "source": str}
    move_id: str
    family: str | None
    agent: str
    diagnosis: str | None
    decision: str
    speedup: float | None  # verified (accepted) or measured paired speedup
    integrity_ok: bool  # passed guard, correctness and plausibility gates
    p_accept: float | None = None
    predicted_gain: float | None = None
    revoked: str | None = None  # reason, when later found hostile or incorrect
    parent_speedup: float | None = None  # the parent's, so a record says what the move itself gained
    path: list = field(default_factory=list)  # move ids from the baseline down to the parent
    extra: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"format": RECORD_FORMAT, **asdict(self)}

    @classmethod
    def from_json(cls, d: dict) -> "KnowledgeRecord":
        if d.get("format", RECORD_FORMAT) != RECORD_FORMAT:
            raise ValueError(f"unknown knowledge record format {d.get('format')!r} — expected {RECORD_FORMAT}")
        names = set(cls.__dataclass_fields__)
        missing = {"campaign", "node_id", "artifact_sha", "move_id", "decision"} - set(d)
        if missing:
            raise ValueError(f"knowledge record lacks {sorted(missing)}")
        return cls(**{k: v for k, v in d.items() if k in names})


class KnowledgeError(ValueError):
    """A knowledge store that cannot be opened or a file that cannot be imported (one line)."""


def default_url() -> str:
    """``$XDG_DATA_HOME/arbor/knowledge.db`` (``~/.local/share`` when unset)."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return f"sqlite:///{Path(base) / 'arbor' / 'knowledge.db'}"


_meta = sa.MetaData()
_records = sa.Table(
    "knowledge", _meta,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("campaign", sa.String(200), nullable=False),
    sa.Column("node_id", sa.Integer, nullable=False),
    sa.Column("artifact_sha", sa.String(64), nullable=False),
    sa.Column("hardware_class", sa.String(200), nullable=False),
    sa.Column("move_id", sa.String(200), nullable=False),
    sa.Column("revoked", sa.Text, nullable=True),
    sa.Column("body", sa.Text, nullable=False),
    sa.UniqueConstraint("campaign", "node_id", name="uq_knowledge_campaign_node"),
)


class KnowledgeStore:
    """The user-level store: one table, one JSON body per record (readers filter in Python; a
    user's store holds thousands of records, not millions)."""

    def __init__(self, url: str | None = None):
        self.url = url or default_url()
        if self.url.startswith("sqlite:///"):
            path = Path(self.url[len("sqlite:///"):])
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise KnowledgeError(f"knowledge store {self.url}: cannot create {path.parent} ({exc}) — "
                                     "set knowledge.url or XDG_DATA_HOME to a writable place") from None
        try:
            self.engine = sa.create_engine(self.url)
            _meta.create_all(self.engine)
        except Exception as exc:  # noqa: BLE001 - any driver error is a bad URL for the user
            raise KnowledgeError(f"knowledge store {self.url}: {str(exc).splitlines()[0]} — "
                                 "check knowledge.url") from None

    def close(self) -> None:
        self.engine.dispose()

    def add(self, records: Iterable[KnowledgeRecord]) -> int:
        """Insert records not already present (same campaign and node); returns how many were new."""
        n = 0
        with self.engine.begin() as con:
            for r in records:
                exists = con.execute(sa.select(_records.c.id).where(
                    _records.c.campaign == r.campaign, _records.c.node_id == r.node_id)).first()
                if exists:
                    continue
                con.execute(_records.insert().values(
                    campaign=r.campaign, node_id=r.node_id, artifact_sha=r.artifact_sha,
                    hardware_class=r.hardware.get("class", "?"), move_id=r.move_id, revoked=r.revoked,
                    body=json.dumps(r.to_json(), sort_keys=True)))
                n += 1
        return n

    def revoke(self, artifact_sha: str, reason: str) -> int:
        """Mark every record of ``artifact_sha`` as hostile or incorrect; returns how many."""
        with self.engine.begin() as con:
            res = con.execute(_records.update().where(_records.c.artifact_sha == artifact_sha)
                              .values(revoked=reason or "revoked"))
            return res.rowcount or 0

    def mark_final(self, campaign: str, artifact_sha: str, speedup: float | None) -> int:
        """Note that ``artifact_sha`` is ``campaign``'s verified final best (``extra.verified_final``:
        the median speedup its final verification reported). A campaign's best by one measurement
        is often a child its final verification found no better than its parent; what a recipe
        or a brief transfers is the final. Returns how many records were marked."""
        with self.engine.begin() as con:
            rows = con.execute(sa.select(_records.c.id, _records.c.body).where(
                _records.c.campaign == campaign, _records.c.artifact_sha == artifact_sha)).all()
            for rid, body in rows:
                d = json.loads(body)
                d["extra"] = {**(d.get("extra") or {}), "verified_final": speedup}
                con.execute(_records.update().where(_records.c.id == rid).values(body=json.dumps(d, sort_keys=True)))
            return len(rows)

    def records(self, hardware_class: str | None = None, include_revoked: bool = True) -> list[KnowledgeRecord]:
        q = sa.select(_records.c.body, _records.c.revoked).order_by(_records.c.id)
        if hardware_class is not None:
            q = q.where(_records.c.hardware_class == hardware_class)
        if not include_revoked:
            q = q.where(_records.c.revoked.is_(None))
        with self.engine.connect() as con:
            rows = con.execute(q).all()
        out = []
        for body, revoked in rows:
            d = json.loads(body)
            d["revoked"] = revoked
            out.append(KnowledgeRecord.from_json(d))
        return out

    def export(self, path: Path) -> int:
        recs = self.records()
        with open(path, "w", encoding="utf-8") as f:
            for r in recs:
                f.write(json.dumps(r.to_json(), sort_keys=True) + "\n")
        return len(recs)

    def import_file(self, path: Path) -> int:
        recs = []
        try:
            lines = Path(path).read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise KnowledgeError(f"{path}: cannot read ({exc.strerror}) — give a file written by "
                                 "'arbor knowledge export'") from None
        for i, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                recs.append(KnowledgeRecord.from_json(json.loads(line)))
            except (ValueError, TypeError) as exc:
                raise KnowledgeError(f"{path}:{i}: not a knowledge record ({exc}) — give a file written "
                                     "by 'arbor knowledge export'") from None
        added = self.add(recs)
        for r in recs:  # a revocation learnt elsewhere travels with the export
            if r.revoked:
                self.revoke(r.artifact_sha, r.revoked)
        return added
