"""The knowledge brief: what similar problems taught, in words, for a Specialist that writes its
own candidates (an LLM).

A warm prior and a recipe rank moves from a fixed table, so they only help a Specialist that
applies such moves; an LLM Specialist writes free code and its candidates' move ids are unique,
so before this it got nothing from the knowledge store. The brief gives it what a performance
engineer would tell a colleague: on the most similar problems measured on this hardware class,
what made the best honest candidate (the moves on its path, or the hypothesis of a candidate an
LLM wrote; its verified final when its campaign marked one), and what was measured and did not
help. Quarantine as everywhere in knowledge: only
a record that can raise a warm prior (``warm.outcome == "win"``) is a best, and a candidate the
Critic flagged or that was later revoked is named as such, never as something that worked.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Callable

from .recipes import best_wins, expand, final_speedup
from .signature import similarity
from .warm import MIN_SIMILARITY, outcome

MAX_NEIGHBOURS = 3
MAX_LISTED = 4  # moves that did not help, and flagged candidates, named per neighbour
HYPOTHESIS_CHARS = 240


@dataclass(frozen=True)
class Neighbour:
    campaign: str
    similarity: float
    best_speedup: float | None  # its best honest candidate's, None when nothing won there
    best_path: tuple[str, ...]  # the move ids that made it, from the baseline (recipes expanded)
    best_hypothesis: str | None  # what the best's author said it does, when recorded
    no_gain: tuple[tuple[str, str], ...]  # (move id or hypothesis, diagnosis), measured without a win
    flagged: tuple[tuple[str, str], ...]  # (move id or hypothesis, why): flagged or revoked

    def to_json(self) -> dict:
        d = asdict(self)
        return {**d, "best_path": list(self.best_path), "no_gain": [list(x) for x in self.no_gain],
                "flagged": [list(x) for x in self.flagged]}

    @classmethod
    def from_json(cls, d: dict) -> "Neighbour":
        return cls(str(d["campaign"]), float(d["similarity"]), d.get("best_speedup"), tuple(d.get("best_path") or ()),
                   d.get("best_hypothesis"), tuple(tuple(x) for x in d.get("no_gain") or ()),
                   tuple(tuple(x) for x in d.get("flagged") or ()))


def _what(r) -> str:  # type: ignore[no-untyped-def]
    hyp = (r.extra or {}).get("hypothesis")
    return " ".join(hyp.split())[:HYPOTHESIS_CHARS] if hyp and not _is_table_move(r.move_id) else r.move_id


def _is_table_move(move_id: str) -> bool:
    """A move of a skill's table (named by its id) rather than a free candidate (llm-...)."""
    return not move_id.startswith("llm-")


def neighbours(records: list, hardware_class: str, signature: dict, exclude_campaign: str | None = None,
               min_similarity: float = MIN_SIMILARITY, limit: int = MAX_NEIGHBOURS) -> list[Neighbour]:
    """The ``limit`` most similar problems on the same hardware class, each with its best honest
    candidate and what did not help there."""
    by_campaign: dict[str, list] = {}
    sims: dict[str, float] = {}
    for r in records:
        if r.campaign == exclude_campaign or (r.hardware or {}).get("class") != hardware_class:
            continue
        if r.campaign not in sims:
            sims[r.campaign] = similarity(signature, r.signature or {})
        if sims[r.campaign] >= min_similarity:
            by_campaign.setdefault(r.campaign, []).append(r)
    out = []
    for campaign in sorted(by_campaign, key=lambda c: (-sims[c], c))[:limit]:
        recs = by_campaign[campaign]
        best = best_wins(recs).get(campaign)
        path = tuple(p for m in [*(best.path or []), best.move_id] for p in expand(m)) if best else ()
        no_gain, flagged = [], []
        for r in recs:
            kind, what = outcome(r), _what(r)
            if kind == "failure" and all(what != x[0] for x in no_gain) and len(no_gain) < MAX_LISTED:
                no_gain.append((what, r.diagnosis or r.decision))
            elif kind == "flagged" and len(flagged) < MAX_LISTED:
                flagged.append((what, r.revoked or r.diagnosis or "integrity"))
        speedup = (final_speedup(best) or best.speedup) if best else None
        out.append(Neighbour(campaign, round(sims[campaign], 4), round(speedup, 4) if speedup else None, path,
                             _what(best) if best and not _is_table_move(best.move_id) else None,
                             tuple(no_gain), tuple(flagged)))
    return out


def render(found: list[Neighbour], describe: Callable[[str], str | None]) -> str:
    """The brief as prompt text; ``describe`` turns a move id into the skill's words (None: the
    id alone)."""
    def word(move: str) -> str:
        d = describe(move)
        return f"{move} ({d})" if d else move

    lines = []
    for n in found:
        head = f"- {n.campaign} (similarity {n.similarity:.2f}): "
        if n.best_speedup is None:
            head += "nothing beat its baseline"
        elif n.best_hypothesis:
            head += f"best {n.best_speedup:.3g}x by a written candidate: {n.best_hypothesis}"
        else:
            head += f"best {n.best_speedup:.3g}x by " + " then ".join(word(m) for m in n.best_path)
        lines.append(head)
        if n.no_gain:
            lines.append("  measured there without a gain: " + "; ".join(f"{word(w)}: {d}" for w, d in n.no_gain))
        if n.flagged:
            lines.append("  flagged by the Critic there (never do this): "
                         + "; ".join(f"{word(w)}: {d}" for w, d in n.flagged))
    if not lines:
        return ""
    return ("Measured on similar problems on this hardware class (advice, not verdicts: every candidate "
            "here is measured and judged afresh):\n" + "\n".join(lines))
