"""Skills: markdown prompt material with YAML front matter declaring machine-applicable moves.

A *hard* skill is domain expertise (how to make a kernel faster); a *soft* skill is a
coordination protocol (how agents should behave). Both feed LLM prompts through ``body``; only
hard skills carry ``moves``, which name registered transforms so the offline heuristic backend
can apply them deterministically (docs/architecture.md#skills). Everything is validated when loaded so
a broken skill fails the campaign at start-up, with a one-line message naming the file, the
field and the fix, rather than mid-run.
"""

from __future__ import annotations

import importlib.resources
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .transforms import transform_names, validate_params

_FENCE = "---"


class SkillError(ValueError):
    """One line: ``<file>: <field>: <problem> — <fix>``."""

    def __init__(self, path: str, field: str, problem: str, fix: str) -> None:
        problem = " ".join(str(problem).split())
        super().__init__(f"{path}: {field}: {problem} — {fix}")
        self.path, self.field, self.problem, self.fix = path, field, problem, fix

    def __reduce__(self):  # type: ignore[no-untyped-def]
        # the default rebuilds it from the message alone, a TypeError in the receiving process
        return (type(self), (self.path, self.field, self.problem, self.fix))


class MoveSpec(BaseModel):
    """One machine-applicable change: a transform plus its params and a prior in (0, 1]."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:-]*$")
    transform: str = Field(min_length=1)
    params: dict[str, Any] = Field(default_factory=dict)
    prior: float = Field(gt=0.0, le=1.0)
    family: str | None = None  # defaults to the skill name: priors are reshaped per family
    description: str = ""
    when: str | None = None  # serving symptom condition, kept as text for the evaluator


class SkillSpec(BaseModel):
    """A parsed skill file."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, pattern=r"^[a-z0-9][a-z0-9_-]*$")
    kind: Literal["hard", "soft"]
    domain: Literal["kernel", "serving", "any"]
    applies_to: dict[str, Any] = Field(default_factory=dict)
    moves: list[MoveSpec] = Field(default_factory=list)
    summary: str = ""
    body: str = ""
    path: str = ""

    @field_validator("applies_to")
    @classmethod
    def _devices_are_strings(cls, value: dict[str, Any]) -> dict[str, Any]:
        devices = value.get("devices")
        if devices is not None and (
            not isinstance(devices, list) or not all(isinstance(d, str) and d for d in devices)
        ):
            raise ValueError("devices must be a list of device kinds such as [cpu, cuda]")
        return value

    @model_validator(mode="after")
    def _fill_family(self) -> SkillSpec:
        for move in self.moves:
            if move.family is None:
                move.family = self.name
        return self

    @property
    def devices(self) -> list[str] | None:
        devices = self.applies_to.get("devices")
        return list(devices) if devices is not None else None


_FIXES = {
    "missing": "add it to the front matter",
    "extra_forbidden": "remove it or fix its spelling",
    "literal_error": "use one of the allowed values",
    "greater_than": "use a prior in (0, 1]",
    "less_than_equal": "use a prior in (0, 1]",
    "string_pattern_mismatch": "use lower-case letters, digits, '-' and '_'",
}


def _loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "front matter"


def _split(text: str, path: str) -> tuple[dict[str, Any], str]:
    lines = text.lstrip("\ufeff").splitlines()
    if not lines or lines[0].strip() != _FENCE:
        raise SkillError(path, "front matter", "file does not start with a '---' line",
                         "put YAML front matter between two '---' lines at the top")
    try:
        end = next(i for i in range(1, len(lines)) if lines[i].strip() == _FENCE)
    except StopIteration:
        raise SkillError(path, "front matter", "no closing '---' line",
                         "close the YAML front matter with a '---' line") from None
    try:
        data = yaml.safe_load("\n".join(lines[1:end]))
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 2}" if mark is not None else ""
        raise SkillError(path, "front matter", f"invalid YAML{where}: {getattr(err, 'problem', err)}",
                         "fix the YAML syntax") from None
    if not isinstance(data, dict):
        raise SkillError(path, "front matter", "YAML is not a mapping", "write 'key: value' lines")
    return data, "\n".join(lines[end + 1:]).strip()


def _summary(body: str) -> str:
    """First prose line of the body, used when the author gave no summary."""
    for line in body.splitlines():
        line = line.strip()
        if line and not line.startswith(("#", "```", "|", "-", "*", ">")):
            return line
    return ""


def parse_skill(text: str, path: str = "<string>") -> SkillSpec:
    """Parse and validate one skill file (front matter, moves, transforms and their params)."""
    data, body = _split(text, path)
    data.setdefault("body", body)
    data.setdefault("path", path)
    try:
        skill = SkillSpec.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        fix = _FIXES.get(first["type"], "see skills/hard/torch-compile.md for a valid example")
        message = first["msg"].removeprefix("Value error, ")
        raise SkillError(path, _loc(first["loc"]), message, fix) from None
    if not skill.summary:
        skill.summary = _summary(skill.body)
    if skill.kind == "soft" and skill.moves:
        raise SkillError(path, "moves", "soft skills are protocols and cannot declare moves",
                         "move them to a hard skill or delete them")
    seen: set[str] = set()
    known = transform_names()
    for i, move in enumerate(skill.moves):
        field = f"moves[{i}]"
        if move.id in seen:
            raise SkillError(path, f"{field}.id", f"duplicate move id {move.id!r}", "give each move a unique id")
        seen.add(move.id)
        if move.transform not in known:
            raise SkillError(path, f"{field}.transform",
                             f"move {move.id!r} names unknown transform {move.transform!r}",
                             f"use one of: {', '.join(known)}")
        try:
            validate_params(move.transform, move.params)
        except (ValueError, TypeError) as err:
            raise SkillError(path, f"{field}.params", f"move {move.id!r}: {err}",
                             f"see the docstring of transform {move.transform!r}") from None
    return skill


def _package_files() -> list[tuple[str, str]]:
    root = importlib.resources.files("arbor.skills")
    out = []
    for kind in ("hard", "soft"):
        folder = root / kind
        if not folder.is_dir():
            continue
        for entry in sorted(folder.iterdir(), key=lambda e: e.name):
            if entry.name.endswith(".md") and entry.is_file():
                out.append((f"arbor.skills/{kind}/{entry.name}", entry.read_text(encoding="utf-8")))
    return out


def _dir_files(directory: Path) -> list[tuple[str, str]]:
    if not directory.is_dir():
        raise SkillError(str(directory), "skills directory", "not a directory",
                         "pass an existing folder of *.md skill files")
    return [(str(p), p.read_text(encoding="utf-8")) for p in sorted(directory.rglob("*.md"))]


def load_skills(extra_dirs: list[Path] | None = None, exclude: list[str] | None = None) -> list[SkillSpec]:
    """Built-in skills plus ``extra_dirs`` (searched recursively for ``*.md``), sorted by (kind, name),
    less the skills and move ids named in ``exclude`` (a name that is neither is an error: a typo
    must not silently leave a move in).

    A skill in a later source replaces a same-named one from an earlier source, so users can
    override built-ins; two same-named skills in one source, or one move id used by two skills,
    is an error (move ids key the search tree's priors).
    """
    by_name: dict[str, SkillSpec] = {}
    sources = [_package_files()] + [_dir_files(Path(d)) for d in (extra_dirs or [])]
    for files in sources:
        here: dict[str, str] = {}
        for path, text in files:
            skill = parse_skill(text, path)
            if skill.name in here:
                raise SkillError(path, "name", f"skill {skill.name!r} is also defined in {here[skill.name]}",
                                 "rename one of them")
            here[skill.name] = path
            by_name[skill.name] = skill
    skills = sorted(by_name.values(), key=lambda s: (s.kind, s.name))
    owner: dict[str, SkillSpec] = {}
    for skill in skills:
        for i, move in enumerate(skill.moves):
            other = owner.get(move.id)
            if other is not None:
                raise SkillError(skill.path, f"moves[{i}].id",
                                 f"move id {move.id!r} is also used by skill {other.name!r} ({other.path})",
                                 "rename one of the moves")
            owner[move.id] = skill
    return _without(skills, owner, exclude or [])


def _without(skills: list[SkillSpec], owner: dict[str, SkillSpec], exclude: list[str]) -> list[SkillSpec]:
    names = {s.name for s in skills}
    unknown = [x for x in exclude if x not in names and x not in owner]
    if unknown:
        raise SkillError("the campaign file", "skills.exclude", f"{', '.join(map(repr, unknown))} names no skill or move",
                         "use a skill name from `arbor skills list` or a move id it lists")
    drop = set(exclude)
    return [s.model_copy(update={"moves": [m for m in s.moves if m.id not in drop]})
            for s in skills if s.name not in drop]


def kernel_moves(skills: list[SkillSpec], device: str) -> list[MoveSpec]:
    """Moves of hard kernel skills applicable on ``device`` ("cpu", "cuda", "cuda:0"...)."""
    kind = device.split(":", 1)[0].strip().lower()
    moves: list[MoveSpec] = []
    for skill in skills:
        if skill.kind != "hard" or skill.domain not in ("kernel", "any"):
            continue
        devices = skill.devices
        if devices is not None and kind not in {d.lower() for d in devices}:
            continue
        moves.extend(skill.moves)
    return moves
