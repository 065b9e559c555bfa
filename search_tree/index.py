"""An in-memory, incrementally maintained view of one campaign's tree for selection.

Loading every node per step costs O(tree) and makes selection seconds slow at 10^6 nodes.
The index loads once, then applies only the rows written since its last refresh (an indexed
query on ``nodes(campaign_id, updated_at)``), updating subtree visit counts and best values along
the changed node's ancestor path. Scoring is vectorised with numpy over all expandable nodes.

Priors here are *upper bounds* of a node's best untried move: the orchestrator computes the exact
prior lazily, only for the node that currently scores highest, and re-scores until the winner's
score is exact. Outcome-driven reshaping only ever lowers a prior (except family wins, which
raise every bound by the same factor), so lazy evaluation picks the same node an exhaustive one
would.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import numpy as np

from .records import NodeRecord

STATES = ("proposed", "queued", "running", "measured", "accepted", "rejected", "failed", "pruned")
_CODE = {s: i for i, s in enumerate(STATES)}
ACCEPTED = _CODE["accepted"]
_FINAL = frozenset(("accepted", "rejected", "failed", "pruned"))
# With several measurements in flight, each pending child lowers its parent's Q by this much,
# spread over the parent's visits: the next free worker is filled from another node unless this
# parent is clearly the best (a serial campaign never scores a node with pending children).
VIRTUAL_LOSS = 0.1
REFRESH_OVERLAP = timedelta(seconds=2)  # re-read a little before the cursor: writes share timestamps


@dataclass
class _Grow:
    """Columns that double in capacity as rows are added."""

    cap: int = 1024
    n: int = 0
    cols: dict = field(default_factory=dict)

    def __post_init__(self):
        self.cols = {
            "id": np.zeros(self.cap, np.int64),
            "parent": np.full(self.cap, -1, np.int64),
            "state": np.zeros(self.cap, np.int8),
            "value": np.full(self.cap, np.nan),
            "q": np.full(self.cap, -np.inf),
            "visits": np.zeros(self.cap, np.int64),
            "prior": np.ones(self.cap, np.float64),
            "exact": np.zeros(self.cap, bool),
            "expandable": np.ones(self.cap, bool),
            "depth": np.zeros(self.cap, np.int32),
            "pending": np.zeros(self.cap, np.int32),  # children proposed but not finished (in flight)
        }

    def append(self) -> int:
        if self.n == self.cap:
            self.cap *= 2
            for k, a in self.cols.items():
                grown = np.empty(self.cap, a.dtype)
                grown[: self.n] = a[: self.n]
                fill = {"parent": -1, "value": np.nan, "q": -np.inf, "prior": 1.0, "expandable": True}.get(k, 0)
                grown[self.n:] = fill
                self.cols[k] = grown
        self.n += 1
        return self.n - 1


def _digest(sha: str) -> bytes:
    """32 bytes for a sha256 hex digest (half the memory of the string); any other id as is."""
    try:
        return bytes.fromhex(sha)
    except (ValueError, TypeError):
        return str(sha).encode()


class TreeIndex:
    def __init__(self, campaign_id: int, prior_bound: float = 1.0, recent: int = 256,
                 virtual_loss: float = VIRTUAL_LOSS):
        self.campaign_id = campaign_id
        self.virtual_loss = virtual_loss
        # parallel campaigns keep nodes awaiting their first verdict whole (keep_pending), so that
        # with ``speculative`` on they can be expanded too, their moves' priors discounted by the
        # chance that the node itself is accepted (``_speculative_rows``)
        self.keep_pending = False
        self.speculative = False
        # parallel campaigns: when set, the only row that may be expanded (the believed best, while
        # fewer of its children are in flight than its share of the workers: arbor/campaign/parallel.py)
        self.focus: int | None = None
        self._pending_ids: set[int] = set()  # children counted in their parent's "pending"
        self._provisional: dict[int, float] = {}  # row -> first measured value, while confirming
        self.prior_bound = prior_bound
        self._g = _Grow()
        self.row_of: dict[int, int] = {}
        self.records: dict[int, NodeRecord] = {}  # only accepted nodes and the root are kept whole
        self.tried: dict[int, set[str]] = {}  # row -> move ids already proposed below it
        self._shas: set[bytes] = set()  # every node's artifact digest: duplicate checks without a query
        self.recent_finished: deque[tuple[str, str | None]] = deque(maxlen=recent)
        self.since_last_win = 0
        self.cursor: datetime | None = None
        self.root_row: int | None = None
        self._best_row: int | None = None
        self._finished: set[int] = set()
        self.on_finish = []  # callbacks(node) for outcome bookkeeping (priors)

    def __len__(self) -> int:
        return self._g.n

    # --- loading ---------------------------------------------------------------------
    def refresh(self, store) -> int:
        """Apply every node written since the last refresh; returns how many rows changed."""
        if self.cursor is None:
            rows = store.nodes(self.campaign_id)
        else:
            rows = store.nodes_changed_since(self.campaign_id, self.cursor - REFRESH_OVERLAP)
        changed = 0
        for n in sorted(rows, key=lambda r: r.id):
            changed += self.apply(n)
            stamp = n.updated_at or n.created_at
            if stamp is not None and (self.cursor is None or stamp > self.cursor):
                self.cursor = stamp
        return changed

    def apply(self, n: NodeRecord) -> int:
        g = self._g.cols
        row = self.row_of.get(n.id)
        if row is None:
            row = self._g.append()
            g = self._g.cols
            self.row_of[n.id] = row
            g["id"][row] = n.id
            g["depth"][row] = n.depth
            self._shas.add(_digest(n.artifact_sha))
            g["prior"][row] = self.prior_bound
            if n.parent_id is None:
                self.root_row = row
            else:
                prow = self.row_of[n.parent_id]
                g["parent"][row] = prow
                self.tried.setdefault(prow, set()).add(n.move_id or f"node-{n.id}")
                g["exact"][prow] = False
                if n.state not in _FINAL:
                    g["pending"][prow] += 1
                    self._pending_ids.add(n.id)
                    if self.keep_pending:  # kept whole while it may be expanded before its verdict
                        self.records[n.id] = n
                r = prow
                while r >= 0:  # one more expansion below every ancestor
                    g["visits"][r] += 1
                    r = g["parent"][r]
        if n.id in self._finished:  # finished nodes are immutable: nothing can change
            return 0
        g["state"][row] = _CODE[n.state]
        if n.state in ("accepted", "rejected", "failed", "pruned"):
            self._finish(row, n)
        return 1

    def _finished_ids(self) -> set[int]:
        if "_fin" not in self.__dict__:
            self.__dict__["_fin"] = set()
        return self.__dict__["_fin"]

    def _finish(self, row: int, n: NodeRecord) -> None:
        g = self._g.cols
        self._finished.add(n.id)
        if self._provisional.pop(row, None) is not None and n.state != "accepted":
            self.records.pop(n.id, None)
            g["value"][row] = np.nan  # its q keeps only what its children earned themselves
        elif n.state != "accepted" and n.parent_id is not None:
            self.records.pop(n.id, None)  # expanded speculatively, then not accepted
        if n.id in self._pending_ids:
            self._pending_ids.discard(n.id)
            g["pending"][g["parent"][row]] -= 1
        if n.parent_id is not None:
            self.recent_finished.append((n.state, n.diagnosis))
            self.since_last_win = 0 if n.state == "accepted" else self.since_last_win + 1
        if n.state == "accepted" and n.value is not None:
            self.records[n.id] = n
            g["value"][row] = n.value
            r = row
            while r >= 0 and g["q"][r] < n.value:  # best value in the subtree, upwards
                g["q"][r] = n.value
                r = g["parent"][r]
            if self._best_row is None or n.value > g["value"][self._best_row]:
                self._best_row = row
        else:
            g["expandable"][row] = False
        if n.parent_id is None:
            self.records[n.id] = n
        for cb in self.on_finish:
            cb(n)

    # --- queries ---------------------------------------------------------------------
    def node(self, row: int) -> NodeRecord | None:
        return self.records.get(int(self._g.cols["id"][row]))

    def best(self) -> NodeRecord | None:
        return None if self._best_row is None else self.node(self._best_row)

    def root(self) -> NodeRecord | None:
        return None if self.root_row is None else self.records.get(int(self._g.cols["id"][self.root_row]))

    def ancestors(self, node_id: int) -> set[int]:
        out, r = set(), self.row_of.get(node_id, -1)
        ids, parent = self._g.cols["id"], self._g.cols["parent"]
        while r >= 0:
            out.add(int(ids[r]))
            r = parent[r]
        return out

    def has_artifact(self, sha: str) -> bool:
        """Whether any node of the campaign (as of the last refresh) holds this artifact: the
        specialist's "already in the tree" check, answered from memory instead of one store query
        per untried move. Nodes are never deleted, so a True stays true."""
        return _digest(sha) in self._shas

    def set_prior(self, row: int, prior: float, exact: bool = True) -> None:
        self._g.cols["prior"][row] = prior
        self._g.cols["exact"][row] = exact
        if prior <= 0:
            self._g.cols["expandable"][row] = False

    def invalidate_priors(self, factor: float = 1.0) -> None:
        """Outcomes changed: every exact prior becomes a bound again (scaled by ``factor`` when
        the change can raise priors, e.g. a family win)."""
        n = self._g.n
        self._g.cols["exact"][:n] = False
        if factor != 1.0:
            p = self._g.cols["prior"][:n]
            np.minimum(p * factor, 1.0, out=p)

    def candidate_arrays(self):
        """Rows that may be expanded, with the columns a policy scores."""
        n = self._g.n
        c = self._g.cols
        mask = c["state"][:n] == ACCEPTED
        for row in self._provisional:  # parallel campaigns: wins still being confirmed
            mask[row] = True
        spec = self._speculative_rows() if self.speculative else {}
        for row in spec:
            mask[row] = True
        mask &= c["expandable"][:n]
        if self.focus is not None and self.focus < n:
            keep = bool(mask[self.focus])
            mask[:] = False
            mask[self.focus] = keep
        rows = np.nonzero(mask)[0]
        parent = c["parent"][rows]
        own_visits = c["visits"][rows]
        parent_visits = np.where(parent >= 0, c["visits"][np.maximum(parent, 0)], own_visits)
        value = np.nan_to_num(c["value"][rows], nan=0.0)
        prior = c["prior"][rows]
        if spec:  # a node in flight: valued as what it is measured against, its moves discounted
            conf = np.array([spec.get(int(r), (0.0, 1.0))[1] for r in rows])
            value = value + np.array([spec.get(int(r), (0.0, 1.0))[0] for r in rows])
            prior = prior * conf
        q = np.maximum(c["q"][rows], value)
        pending = c["pending"][rows]
        if self.virtual_loss and pending.any():  # work in flight below a node: a virtual loss
            q = q - self.virtual_loss * pending / (1.0 + own_visits)
        return rows, q, value, own_visits, parent_visits, prior

    def _speculative_rows(self) -> dict[int, tuple[float, float]]:
        """Rows awaiting their first verdict whose parent is judged (or being confirmed) -> (the
        parent's value: they are valued as what they are measured against, their prior: the chance
        they are accepted). Expanding one bets on its own move working; one level deep only, since
        PUCT's exploration term favours unvisited nodes and chains of bets compound."""
        c, out = self._g.cols, {}
        for nid in self._pending_ids:
            row = self.row_of.get(nid)
            rec = self.records.get(nid)
            if row is None or rec is None or row in self._provisional:
                continue
            p = int(c["parent"][row])
            if c["state"][p] != ACCEPTED and p not in self._provisional:
                continue
            out[row] = (float(np.nan_to_num(c["value"][p], nan=0.0)),
                        float(rec.prior) if rec.prior is not None else 0.5)
        return out

    def confidence(self, row: int) -> float:
        """The factor ``candidate_arrays`` applied to ``row``'s prior (1 for a judged node)."""
        return self._speculative_rows().get(row, (0.0, 1.0))[1] if self.speculative else 1.0

    def set_provisional(self, node: NodeRecord, value: float) -> None:
        """Let a node whose first measurement is a new best be expanded while its confirmation
        runs (only campaigns with several workers do this: serially, nothing else could run in the
        meantime). Its children are measured against the baseline like any other, so they stay
        valid candidates if the confirmation fails; the node itself stops being expandable then."""
        row = self.row_of.get(node.id)
        if row is None or node.id in self._finished:
            return
        self._provisional[row] = value
        self.records[node.id] = node
        # its own score only: ancestors' Q is a running max that could not be taken back if the
        # confirmation fails
        self._g.cols["value"][row] = value

    def leading_row(self) -> int | None:
        """The row of the best value among accepted nodes and wins still being confirmed (their
        first measurement), or None; a parallel campaign's most promising node to build on."""
        c = self._g.cols
        best_row, best = self._best_row, None
        if best_row is not None:
            best = float(np.nan_to_num(c["value"][best_row], nan=-np.inf))
        for row, value in self._provisional.items():
            if best is None or value > best:
                best_row, best = row, value
        return best_row

    def is_expandable(self, row: int) -> bool:
        return bool(self._g.cols["expandable"][row])

    def pending_children(self, node_id: int) -> int:
        row = self.row_of.get(node_id)
        return 0 if row is None else int(self._g.cols["pending"][row])

    def total_visits(self) -> int:
        return 0 if self.root_row is None else int(self._g.cols["visits"][self.root_row])

    def best_speedup(self) -> float:
        b = self.best()
        return math.exp(b.value) if b is not None and b.value is not None else 1.0
