"""Recipes: the move sequences that made the best candidates of similar problems, offered whole.

A warm prior ranks one move at a time, so a neighbour's best that took three moves in a row
(compile, then channels-last, then compile's freezing) still costs a warm campaign three
evaluations, one per step, each a bet that the next move is the one that builds on it; the
warm-start run of 2026-11-27 found the cold winners of the convolution problems were such
sequences, and warm search reached them no sooner than cold. A recipe is the whole sequence: the
moves on the path from a similar problem's baseline to its best honest candidate, applied at once
to this problem's baseline as one candidate. It is measured and judged like any other; if it
wins, the warm campaign starts where the neighbour ended; if not, it cost one evaluation and the
tree goes on from the baseline as before.

Only records that can raise a prior (``warm.outcome == "win"``) make a recipe, so a candidate
that was flagged or later revoked never does; a best reached by one move is not a recipe (the
move's warm prior already carries it).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from .signature import similarity
from .warm import MIN_SIMILARITY, outcome

PREFIX = "recipe:"
FAMILY = "knowledge-recipe"  # the move family of a recipe node
SEP = ":"
MAX_RECIPES = 2  # at most this many recipes (from distinct problems) are offered at the root


@dataclass(frozen=True)
class Recipe:
    moves: tuple[str, ...]  # in the order they were applied on the neighbour
    campaign: str  # the neighbour's campaign
    similarity: float
    speedup: float  # what the recipe reached there

    @property
    def move_id(self) -> str:
        return recipe_id(self.moves)

    def to_json(self) -> dict:
        return {**asdict(self), "moves": list(self.moves)}

    @classmethod
    def from_json(cls, d: dict) -> "Recipe":
        return cls(tuple(d["moves"]), str(d["campaign"]), float(d["similarity"]), float(d["speedup"]))


def recipe_id(moves: tuple[str, ...] | list[str]) -> str:
    return PREFIX + SEP.join(moves)


def expand(move_id: str | None) -> list[str]:
    """The moves a node's move id stands for: a recipe's constituents, or the move itself."""
    if not move_id:
        return []
    if move_id.startswith(PREFIX):
        return [m for m in move_id[len(PREFIX):].split(SEP) if m]
    return [move_id]


def final_speedup(r) -> float | None:  # type: ignore[no-untyped-def]
    """The median its campaign's final verification reported, when it is that campaign's final."""
    v = (r.extra or {}).get("verified_final")
    return float(v) if isinstance(v, (int, float)) and v > 0 else None


def best_wins(records: list) -> dict[str, object]:
    """Each campaign's best honest candidate: the verified final best when it is marked and an
    honest win, else the win with the highest speedup. The highest single reading is often a child
    that its campaign's final verification found no better than its parent (it then reported the
    parent): transferring the child transfers a move that did not show it helps, as when conv +
    avgpool + HardSwish was offered C++ fusion *then inference mode* from a neighbour whose final
    was the fusion alone (warm-start run of 2026-11-27, 23:00)."""
    wins: dict[str, list] = {}
    for r in records:
        if outcome(r) == "win" and r.speedup:
            wins.setdefault(r.campaign, []).append(r)
    out = {}
    for campaign, rs in wins.items():
        final = [r for r in rs if final_speedup(r) is not None]
        out[campaign] = final[-1] if final else max(rs, key=lambda r: r.speedup)
    return out


def recipes(records: list, hardware_class: str, signature: dict, known_moves: set[str],
            exclude_campaign: str | None = None, min_similarity: float = MIN_SIMILARITY,
            limit: int = MAX_RECIPES) -> list[Recipe]:
    """The path to each similar problem's best honest candidate (``best_wins``) on the same hardware
    class, when it took two moves or more: most similar problem first (then the larger speedup), at most
    ``limit``, no two alike. A path with a move this campaign does not have is cut there (the
    rest was built on it)."""
    top = best_wins([r for r in records if r.campaign != exclude_campaign
                     and (r.hardware or {}).get("class") == hardware_class])
    best: dict[str, tuple[float, float, tuple[str, ...]]] = {}  # campaign -> (sim, speedup, moves)
    for campaign, r in top.items():
        moves: list[str] = []
        for m in [*(r.path or []), r.move_id]:
            parts = expand(m)
            if not all(p in known_moves for p in parts):
                break
            moves += parts
        sim = similarity(signature, r.signature or {})
        if len(moves) >= 2 and sim >= min_similarity:
            best[campaign] = (sim, final_speedup(r) or float(r.speedup), tuple(moves))
    out: list[Recipe] = []
    for campaign, (sim, speedup, moves) in sorted(best.items(), key=lambda kv: (-kv[1][0], -kv[1][1], kv[0])):
        if any(set(moves) == set(o.moves) for o in out):
            continue
        out.append(Recipe(moves, campaign, round(sim, 4), round(speedup, 4)))
        if len(out) >= limit:
            break
    return out
