"""Moves that cannot change anything in a campaign's context are never proposed.

A transform decides from the source alone whether it applies; some moves are no-ops only given
how the campaign runs. ``set_threads`` with the thread count the harness already sets for every
measurement (``target.num_threads``) re-states the setting: measuring it spends a run to learn
that the same program runs as fast as itself, and a lucky draw could even "accept" it.
"""

from __future__ import annotations

from arbor.agents.skills import MoveSpec


def is_noop(move: MoveSpec, num_threads: int | None) -> bool:
    """True when ``move`` re-states what the campaign already does for every measurement."""
    return (move.transform == "set_threads" and num_threads is not None
            and move.params.get("threads") == num_threads)


def drop_noops(moves: list[MoveSpec], num_threads: int | None = None) -> list[MoveSpec]:
    return [m for m in moves if not is_noop(m, num_threads)]
