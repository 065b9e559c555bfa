"""Prompt assembly under a token budget.

A prompt is a list of titled sections with priorities. ``fit`` keeps the most important ones
whole, truncates the first one that no longer fits (if it may be truncated) and drops the rest,
then restores the authors' order so the prompt still reads top to bottom. What was dropped or cut
is reported, and stored with the call, so an audit can tell what the model did not see.

Skills are the agents' standing instructions: soft skills (protocols) for every role, hard
skills of the campaign's domain and device for the specialists.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from arbor.agents.skills import SkillSpec

from .budget import approx_tokens

MIN_TRUNCATED_TOKENS = 120


@dataclass
class Section:
    title: str
    text: str
    priority: int  # lower is more important
    truncatable: bool = True

    def render(self) -> str:
        return f"## {self.title}\n{self.text.strip()}\n"


@dataclass
class Fitted:
    text: str
    tokens: int
    included: list[str] = field(default_factory=list)
    truncated: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)

    def audit(self) -> dict:
        return {"included": self.included, "truncated": self.truncated, "dropped": self.dropped}


def _truncate(text: str, tokens: int) -> str:
    budget_bytes = max(0, (tokens - 8) * 3)
    raw = text.encode("utf-8")
    if len(raw) <= budget_bytes:
        return text
    head = raw[: budget_bytes - 40].decode("utf-8", errors="ignore")
    return head.rstrip() + f"\n[... truncated: {len(raw) - len(head.encode('utf-8'))} bytes omitted ...]"


def fit(sections: list[Section], budget_tokens: int) -> Fitted:
    order = {id(s): i for i, s in enumerate(sections)}
    kept: list[Section] = []
    out = Fitted("", 0)
    left = budget_tokens
    for s in sorted(sections, key=lambda s: s.priority):
        if not s.text.strip():
            continue
        cost = approx_tokens(s.render())
        if cost <= left:
            kept.append(s)
            left -= cost
        elif s.truncatable and left >= MIN_TRUNCATED_TOKENS:
            cut = Section(s.title, _truncate(s.text, left - approx_tokens(f"## {s.title}\n")), s.priority)
            order[id(cut)] = order[id(s)]
            kept.append(cut)
            out.truncated.append(s.title)
            left -= approx_tokens(cut.render())
        else:
            out.dropped.append(s.title)
    kept.sort(key=lambda s: order[id(s)])
    out.text = "\n".join(s.render() for s in kept)
    out.tokens = approx_tokens(out.text)
    out.included = [s.title for s in kept]
    return out


def relevant_skills(skills: list[SkillSpec], domain: str, device: str | None) -> list[SkillSpec]:
    """Soft skills, then hard skills of the domain that apply on the device."""
    kind = (device or "").split(":", 1)[0].lower()
    soft = [s for s in skills if s.kind == "soft"]
    hard = []
    for s in skills:
        if s.kind != "hard" or s.domain not in (domain, "any"):
            continue
        devices = s.devices
        if kind and devices is not None and kind not in {d.lower() for d in devices}:
            continue
        hard.append(s)
    return soft + hard


def skill_sections(skills: list[SkillSpec], domain: str, device: str | None, *, hard: bool = True,
                   base_priority: int = 50) -> list[Section]:
    """An index of every relevant skill (cheap, high priority) plus their bodies (lower priority,
    soft before hard, so protocols survive a tight budget before domain detail does)."""
    chosen = [s for s in relevant_skills(skills, domain, device) if hard or s.kind == "soft"]
    if not chosen:
        return []
    index = "\n".join(f"- {s.name} ({s.kind}): {s.summary}" for s in chosen)
    out = [Section("Skills (index)", index, base_priority - 10, truncatable=True)]
    for i, s in enumerate(chosen):
        pri = base_priority + i if s.kind == "soft" else base_priority + 20 + i
        out.append(Section(f"Skill: {s.name} ({s.kind})", s.body, pri))
    return out
