"""The campaign lease on the SQL store: one writer per campaign.

Two ``arbor run`` of one campaign would otherwise interleave their steps (each judging the other's
measurements, both moving the same node), so ``arbor run`` takes this lease before it touches the
campaign and beats it while it runs. A second run refuses in one line naming the owner; the lease
of a dead owner (its pid gone on this host, or no heartbeat for ``stale_after_s``) is taken over
with a compare-and-swap on the old owner, so of two runs racing for it exactly one wins. Readers
(history, dashboard, query) never take it.
"""

from __future__ import annotations

import os
import socket
import time
from datetime import timedelta
from typing import Callable

from sqlalchemy import delete, select, update
from sqlalchemy.exc import IntegrityError, OperationalError

from .models import CampaignLease, Campaign, Event, Lease, Node, NodeState, Verdict, utcnow
from ..store import CampaignBusy

HOST = socket.gethostname()
_RACE_RETRIES = 20


def owner_dead(host: str, pid: int, heartbeat_at, stale_after_s: float,
               pid_alive: Callable[[int], bool] | None = None) -> bool:
    """Dead: its pid is gone on this host, or it stopped beating. A lease held by this very
    process under another owner is a run of ours that ended without releasing it."""
    if heartbeat_at < utcnow() - timedelta(seconds=stale_after_s):
        return True
    # the store knows no processes: the caller hands it the liveness test (sandbox.runners.proctree's)
    return host == HOST and (pid == os.getpid() or (pid_alive is not None and not pid_alive(pid)))


class CampaignLeaseMixin:
    """Mixed into SqlStore (needs ``_tx``)."""

    def acquire_campaign(self, campaign_id: int, owner: str, stale_after_s: float,
                         pid_alive: Callable[[int], bool] | None = None) -> dict | None:
        """Take the campaign's lease for ``owner``; returns the dead owner taken over from (None
        if the lease was free). Raises CampaignBusy while a live owner holds it."""
        for attempt in range(_RACE_RETRIES):
            try:
                return self._try_acquire(campaign_id, owner, stale_after_s, pid_alive)
            except (IntegrityError, OperationalError):
                # lost a race (both inserted, or SQLite refused the second writer): read again
                time.sleep(0.05 * (attempt + 1))
        raise CampaignBusy(f"campaign {campaign_id}: could not take its lease (another run keeps "
                           "taking it) — stop the other `arbor run` of this campaign")

    def _try_acquire(self, campaign_id: int, owner: str, stale_after_s: float,
                     pid_alive: Callable[[int], bool] | None) -> dict | None:
        now = utcnow()
        mine = dict(owner=owner, host=HOST, pid=os.getpid(), acquired_at=now, heartbeat_at=now)
        with self._tx() as s:  # type: ignore[attr-defined]
            row = s.get(CampaignLease, campaign_id)
            if row is None:
                s.add(CampaignLease(campaign_id=campaign_id, **mine))
                s.flush()
                return None
            if row.owner == owner:
                row.heartbeat_at = now
                return None
            if not owner_dead(row.host, row.pid, row.heartbeat_at, stale_after_s, pid_alive):
                name = s.scalar(select(Campaign.name).where(Campaign.id == campaign_id))
                ago = max(0.0, (now - row.heartbeat_at).total_seconds())
                raise CampaignBusy(
                    f"campaign {name!r} is already being run by pid {row.pid} on host {row.host} "
                    f"(heartbeat {ago:.0f} s ago) — wait for it or stop it (kill {row.pid}); "
                    "history, tree and dashboard work meanwhile")
            prev = {"owner": row.owner, "pid": row.pid, "host": row.host}
            res = s.execute(update(CampaignLease).where(CampaignLease.campaign_id == campaign_id,
                                                        CampaignLease.owner == row.owner).values(**mine))
            if res.rowcount != 1:
                raise OperationalError("lease taken meanwhile", None, Exception("race"))
            s.add(Event(campaign_id=campaign_id, kind="lease_taken_over", agent="store", payload=prev))
            return prev

    def _fail_poisoned(self, s, node: Node, crashes: int) -> None:
        """A node whose measurement killed its runner ``crashes`` times is failed, not retried
        forever: the campaign moves on."""
        reason = (f"its measurement died {crashes} times (the run was killed or crashed each time); "
                  "failed so the campaign moves on")
        self._move(node, NodeState.FAILED, {"diagnosis": "crashed_runner", "reason": reason})
        s.add(Verdict(node_id=node.id, measurement_id=None, decision="reject",
                      diagnosis="crashed_runner", reason=reason, gates=[], agent="store"))
        s.add(Event(campaign_id=node.campaign_id, node_id=node.id, kind="verdict", agent="store",
                    payload={"decision": "reject", "diagnosis": "crashed_runner", "reason": reason}))

    def campaign_heartbeat(self, campaign_id: int, owner: str) -> bool:
        """Beat the campaign lease and the owner's node leases; False when the lease is not ours
        any more (taken over after we stalled)."""
        with self._tx() as s:  # type: ignore[attr-defined]
            now = utcnow()
            res = s.execute(update(CampaignLease).where(CampaignLease.campaign_id == campaign_id,
                                                        CampaignLease.owner == owner)
                            .values(heartbeat_at=now))
            s.execute(update(Lease).where(Lease.owner == owner).values(heartbeat_at=now))
            return (res.rowcount or 0) == 1

    def campaign_owner(self, campaign_id: int) -> dict | None:
        with self._tx() as s:  # type: ignore[attr-defined]
            row = s.get(CampaignLease, campaign_id)
            return None if row is None else {"owner": row.owner, "pid": row.pid, "host": row.host,
                                             "heartbeat_at": row.heartbeat_at}

    def release_campaign(self, campaign_id: int, owner: str) -> list[int]:
        """Drop the campaign lease and send the owner's running nodes back to the queue (a clean
        stop mid-measurement: nothing was recorded, the node is measured again on resume)."""
        requeued = []
        with self._tx() as s:  # type: ignore[attr-defined]
            for lease in s.scalars(select(Lease).where(Lease.campaign_id == campaign_id,
                                                       Lease.owner == owner)).all():
                node = s.get(Node, lease.node_id)
                s.delete(lease)
                if node is not None and node.state == NodeState.RUNNING:
                    node.state = NodeState.QUEUED
                    s.add(Event(campaign_id=campaign_id, node_id=node.id, kind="released",
                                agent="store", payload={"reason": "run stopped"}))  # not a crash
                    requeued.append(node.id)
            s.execute(delete(CampaignLease).where(CampaignLease.campaign_id == campaign_id,
                                                  CampaignLease.owner == owner))
        return requeued
