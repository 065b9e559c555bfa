"""Where each side's timing inputs live: one pool both sides sweep through (``shared``, the default)
or a pool per side (``own``, the behaviour before issue 41).

Standalone (stdlib + torch); loaded by path beside the harness before candidate code runs.

Why: a buffer's speed depends on where it landed. Eight 16 MB inputs allocated one after another
on the 2-core Firecracker VM (one thread, thread CPU time, 100 ABBA-ordered rounds) read ReLU at
0.90-1.15 of the median *per buffer*, and the split halves of the run agreed (correlation 0.89):
a property of the buffer (its pages, their cache colours, the host's backing of them), not noise.
With a pool per side, each side kept its 3 buffers for the whole measurement, so an A/A compared
two different sets of placements; the bootstrap resamples rounds and cannot see a difference
fixed for the run, so the interval came out tight around a ratio that was not 1.0 (Softmax
0.947x [0.935, 0.969] in issue 41), and the sign changed from one process to the next.

In ``shared`` mode both sides draw their calls' input sets from one pool through a single cursor,
so every side visits every buffer equally often over the rounds (the pool's size is made coprime
to the calls per round), and consecutive samples never share a set (the second would find its
input in cache). Each side owning its inputs protected the reference from a candidate that
mutates them; here the candidate's samples are followed by a check of a secret random sample of
every element it was handed (``Guard``), and a reference that mutates its own inputs keeps a pool
per side (its inputs change by design, and sharing would hand one side's results to the other).
"""

from __future__ import annotations

import math
import os
from typing import Callable

import torch

MODES = ("shared", "own")
PROBE = 256  # elements read back per tensor after each candidate sample: ~10 us, outside the timer


class Pools:
    """Input sets for both sides and where each sample starts in them."""

    def __init__(self, make: Callable[[int, int], list], first: int, mode: str = "shared") -> None:
        if mode not in MODES:
            raise ValueError(f"placement {mode!r}: use one of {', '.join(MODES)}")
        self.make, self.mode = make, mode
        self.shared = mode == "shared"
        self.wants = [first, first]
        if self.shared:
            one = [make(k % 2, k // 2) for k in range(first)]
            self.sets = [one, one]
        else:
            self.sets = [[make(s, k) for k in range(first)] for s in (0, 1)]
        self.cursor = 0
        self.guard = Guard()
        self.guard.watch(self.sets[1])

    def grow(self, side: int, want: int) -> None:
        """Each side's sets up to ``want``; a shared pool holds both sides' wants (the memory two
        pools held)."""
        self.wants[side] = max(self.wants[side], want)
        if self.shared:
            self._extend(sum(self.wants))
        else:
            pool = self.sets[side]
            pool.extend(self.make(side, k) for k in range(len(pool), want))
            self.guard.watch(self.sets[1])

    def fit(self, calls_per_round: int) -> None:
        """A shared pool one or a few sets larger, until its size is coprime to the calls a round
        makes: otherwise a side's samples would start on a subset of the sets only (two sides of
        one call each in a pool of 4: the reference on sets 0 and 3, the candidate on 1 and 2)."""
        if self.shared:
            size = len(self.sets[0])
            while math.gcd(size, calls_per_round) != 1:
                size += 1
            self._extend(size)

    def _extend(self, size: int) -> None:
        pool = self.sets[0]
        pool.extend(self.make(k % 2, k // 2) for k in range(len(pool), size))
        self.guard.watch(pool)

    def start(self, side: int, rnd: int, inner: int) -> int:
        """First set of a sample: a pool per side starts round ``rnd`` at ``rnd * inner`` (as
        before); a shared pool continues where the previous sample, of either side, ended."""
        if not self.shared:
            return rnd * inner
        at, self.cursor = self.cursor, self.cursor + inner
        return at

    def check(self, side: int, start: int, inner: int, fail: Callable[[str], None]) -> None:
        """After a candidate sample: the shared sets it was handed must hold what they held."""
        if side != 1 or not self.shared:
            return
        pool = self.sets[1]
        for i in range(inner):
            bad = self.guard.changed(pool[(start + i) % len(pool)])
            if bad is not None:
                fail(f"the candidate modified input {bad} in place inside the timing loop (the "
                     "reference leaves its inputs unchanged, and both sides share their timing inputs)")
                return

    def facts(self) -> dict:
        return {"placement": self.mode, "pool_sets": [len(p) for p in self.sets]}


class Guard:
    """A secret random sample of every tensor's elements, read back to tell a mutated input. The
    positions come from ``os.urandom``, never from torch's seed, so a candidate cannot know them; a
    candidate that changes a share p of the elements escapes one check with probability
    (1 - p) ** 256 (p = 1%: 8%; every candidate sample is checked, so it escapes none for long)."""

    def __init__(self) -> None:
        self.seen: dict = {}  # id(tensor) -> (tensor, positions, values)
        self.gen = torch.Generator().manual_seed(int.from_bytes(os.urandom(8), "little") >> 1)

    def watch(self, sets: list) -> None:
        for xs in sets:
            for x in xs:
                if isinstance(x, torch.Tensor) and id(x) not in self.seen and x.numel():
                    flat = x.detach().reshape(-1)
                    idx = torch.randint(0, flat.numel(), (min(PROBE, flat.numel()),), generator=self.gen)
                    idx = idx.to(x.device)
                    self.seen[id(x)] = (x, idx, flat[idx].clone())

    def changed(self, xs: list) -> int | None:
        """The index of the first input in ``xs`` whose sampled elements changed, else None."""
        for k, x in enumerate(xs):
            got = self.seen.get(id(x))
            if got is None or got[0] is not x:
                continue
            if not _same(x.detach().reshape(-1)[got[1]], got[2]):
                return k
        return None


def _same(now, was) -> bool:  # type: ignore[no-untyped-def]
    """Equal values, a NaN equal to a NaN (an input may hold them by design)."""
    if torch.equal(now, was):
        return True
    if not now.is_floating_point() and not now.is_complex():
        return False
    return bool(((now == was) | (now.isnan() & was.isnan())).all())
