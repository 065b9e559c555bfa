"""The suite's overall deadline: each problem gets what is left, and when too little is left the
rest are skipped and named.

A GPU lease is a fixed slice of device time and its files come back only if the run ends inside
it: a suite that runs every problem to its own budget (two took 121 s on an H100 where 40 were
planned) is cut off by the lease with nothing written. So the whole suite has one deadline, a
problem's campaign wall budget is cut to what is left of it (less its compare job), and a problem
that cannot get its minimum is not started — skipped, with the reason in the results.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

__all__ = ["Deadline"]


@dataclass
class Deadline:
    """``total_s`` seconds from ``start`` (None: no deadline). ``clock`` is injectable for tests."""

    total_s: float | None
    clock: Callable[[], float] = time.monotonic
    start: float = field(default=-1.0)

    def __post_init__(self) -> None:
        if self.start < 0:
            self.start = self.clock()

    def left(self) -> float:
        if self.total_s is None:
            return float("inf")
        return self.total_s - (self.clock() - self.start)

    def why_not(self, need_s: float) -> str | None:
        """None when ``need_s`` still fits; otherwise the one line a skipped problem records."""
        left = self.left()
        if left >= need_s:
            return None
        return (f"skipped: the suite's deadline ({self.total_s:.0f} s) leaves {max(left, 0.0):.0f} s, "
                f"a problem needs at least {need_s:.0f} s")

    def cut(self, wall_s: float | None, reserve_s: float) -> float | None:
        """A campaign's ``max_wall_s``: ``wall_s`` or what is left less ``reserve_s``, the smaller."""
        left = self.left() - reserve_s
        if left == float("inf"):
            return wall_s
        return left if wall_s is None else min(wall_s, left)
