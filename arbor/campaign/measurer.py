"""How a campaign measures: the contract between the loop's steps and whoever runs the measurements.

The steps (``select``, ``measure``, ``critique``) and the final verification read straight down
through ``ctx.measurer``; they never ask which kind they hold. Two kinds exist:

* ``serial.SerialMeasurer`` — one measurement at a time in this process, on the campaign's runner
  (``measure_one``); nothing is ever in flight between steps;
* ``parallel.Parallel`` — ``executor.workers > 1``: measurements in flight on an executor's workers
  (local slots or Ray actors), returned as they land.

What differs between them is exactly the methods below; anything both do alike lives in the step.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable

if TYPE_CHECKING:
    from arbor.agents.contracts import Judgement, Selection
    from arbor.agents.critic.gates import Evidence
    from arbor.search_tree.records import NodeRecord


# candidates left queued for want of time before the campaign stops on it: each costs a proposal
# (no measurement), and a cheaper kind of move may still fit where an expensive one did not
DEFER_LIMIT = 3


@dataclass
class Flight:
    """One measurement handed to a worker and not yet recorded."""
    node_id: int
    attempt: int
    purpose: str
    primary: bool  # counts against max_evaluations once measured
    started: float = field(default_factory=time.monotonic)  # when it was handed to a worker (timing.py)
    reprobe_attempt: int | None = None  # the baseline's attempt measured first on the same worker


class Measurer(ABC):
    """Candidates in flight, deferred ones, evidence, judged, out-of-time and focus, as one type."""

    # candidates left queued because their measurement would not end inside max_wall_s: the next
    # run (a larger budget) measures them; DEFER_LIMIT of them stop this one (steps.select)
    deferred: dict[int, str]

    # --- select ---------------------------------------------------------------------------
    @abstractmethod
    def in_flight(self) -> set[int]:
        """Nodes the loop must not pick up as half-done work (being measured, or waiting)."""

    @abstractmethod
    def pending_evaluations(self) -> int:
        """First measurements in flight: they count against max_evaluations already."""

    def out_of_time(self, exhausted: bool = False) -> str | None:
        """The stop reason once DEFER_LIMIT candidates were left queued for want of time — or,
        when no other move is left (``exhausted``), once one was. One expensive candidate (a
        ``torch.compile`` or a C++ build priced at 123 s with 120 s left) used to end a ReLU
        campaign at 60 s of 180 while cheaper moves were untried; the loop now asks for others."""
        if not self.deferred or (len(self.deferred) < DEFER_LIMIT and not exhausted):
            return None
        first = next(iter(self.deferred.values()))
        more = len(self.deferred) - 1
        return first + (f" (and {more} more candidate{'s' if more > 1 else ''} left queued for want of time)"
                        if more else "")

    @abstractmethod
    def focus_row(self) -> int | None:
        """The index row whose untried moves the next pick should come from, or None."""

    @abstractmethod
    def select_in_flight(self, step: int) -> Selection | None:
        """A pick for a worker that would otherwise idle, or None."""

    # --- measure --------------------------------------------------------------------------
    @abstractmethod
    def measure(self, state: dict) -> dict:
        """The loop's ``measure`` step: measure (or start measuring) the state's queued nodes;
        returns the state update."""

    # --- critique -------------------------------------------------------------------------
    @abstractmethod
    def hold(self, node: NodeRecord) -> bool:
        """True when a measured ``node`` must wait before the Critic judges it."""

    @abstractmethod
    def evidence(self, node_id: int, ev: Evidence) -> Evidence:
        """The Critic's evidence, adjusted for what this measurer knows beyond the store."""

    @abstractmethod
    def judged(self, node_id: int, j: Judgement) -> None:
        """Told each verdict, before it is recorded."""

    # --- timing ---------------------------------------------------------------------------
    @abstractmethod
    def ahead_s(self, expected: dict[str, float]) -> float:
        """Seconds the campaign could still need if it went on now (``timing.ahead_s``);
        ``expected``: ``timing.expected(ctx)``."""

    @abstractmethod
    def lag_s(self) -> float:
        """Seconds the loop adds to each measurement beyond its own duration."""

    @abstractmethod
    def flying(self) -> Iterable[Flight]:
        """The measurements in flight now."""

    # --- final verification ---------------------------------------------------------------
    @abstractmethod
    def at_once(self, n: int) -> int:
        """How many of ``n`` final measurements run together."""

    @abstractmethod
    def finals(self, nodes: list[NodeRecord], jobs: list[tuple[int, int]]) -> dict[tuple[int, int], dict]:
        """Final measurements — (node id, attempt) per job, ``nodes`` the matching records —
        by job; a job whose worker was lost twice is left out."""

    @abstractmethod
    def reprobe(self) -> bool:
        """The baseline measured again (``measure_one.reprobe_reference``)."""

    @abstractmethod
    def verify_ahead(self, best: NodeRecord, wanted: int) -> int:
        """Start ``best``'s missing final measurements (``wanted`` in all, those it has counted) on
        workers with nothing else to do; returns how many started."""

    def close(self, wait: bool = True) -> None:
        """Release what it holds (workers); ``wait``: let running measurements end first."""
