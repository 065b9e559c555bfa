"""The campaign spec: the YAML a user writes, validated by pydantic v2.

Every problem in a spec becomes one line naming the field and the fix, so a typo never costs a
traceback (or, worse, a silently ignored knob — unknown keys are errors: a server flag dropped
between a tuning run and production is a classic way to report a speedup that does not exist).
"""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic.fields import FieldInfo

from . import target_kinds
from .agents import LLM_ROLES, Agents
from .base import SpecError, Strict, TargetModel
from .executor import ExecutorCfg
from .sections import Budget, Critic, KnowledgeCfg, Measurement, Objective, Sandbox, Skills, StoreCfg

Target = target_kinds.target_union()


class CampaignSpec(Strict):
    name: str = Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9_.\-]+$")
    description: str = ""
    target: Target
    objective: Objective = Field(default_factory=Objective)
    budget: Budget = Field(default_factory=Budget)
    agents: Agents = Field(default_factory=Agents)
    sandbox: Sandbox = Field(default_factory=Sandbox)
    measurement: Measurement = Field(default_factory=Measurement)
    critic: Critic = Field(default_factory=Critic)
    skills: Skills = Field(default_factory=Skills)
    store: StoreCfg = Field(default_factory=StoreCfg)
    executor: ExecutorCfg = Field(default_factory=ExecutorCfg)
    knowledge: KnowledgeCfg | None = None  # off unless named: records then warm-start later campaigns
    # where the YAML lives; relative paths resolve against it (not serialized into the store)
    base_dir: Path = Field(default=Path("."), exclude=True)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return v.strip()

    @model_validator(mode="after")
    def _priced_models(self):
        """A cost budget is only enforceable when every LLM model has a price."""
        if self.budget.max_cost_usd is None:
            return self
        for role in LLM_ROLES:
            eff = self.agents.role(role)
            if eff["backend"] == "openai" and eff["model"] not in self.budget.prices and "*" not in self.budget.prices:
                raise ValueError(f"budget.max_cost_usd is set but budget.prices has no price for model "
                                 f"{eff['model']!r} — add prices: {{{eff['model']}: {{prompt_per_1k: ..., "
                                 "completion_per_1k: ...}} (or '*' for any model)")
        return self

    @model_validator(mode="after")
    def _objective_fits_target(self):
        """Each target kind names the objectives that fit it; the first is the default."""
        fits, want = type(self.target).objectives, type(self.target).direction
        if "objective" not in self.model_fields_set:
            if (self.objective.metric, self.objective.direction) != (fits[0], want):
                self.objective = Objective(metric=fits[0], direction=want)
            return self
        if self.objective.metric not in fits:
            raise ValueError(f"objective.metric {self.objective.metric!r} does not fit a {self.target.kind} "
                             f"target — use {' or '.join(fits)}")
        if self.objective.direction != want:
            raise ValueError(f"objective.direction must be {want} for {self.objective.metric}")
        return self

    def resolve(self, path: str) -> Path:
        """A path written in the campaign file: relative ones are relative to the file."""
        p = Path(path).expanduser()
        return p if p.is_absolute() else (self.base_dir / p).resolve()

    def problem_path(self) -> Path:
        if self.target.kind != "kernel":
            raise AttributeError("problem_path() is for kernel targets")
        return self.resolve(self.target.problem)

    def store_url(self) -> str:
        if self.store.url:
            url = self.store.url
            if url.startswith("sqlite:///") and not url.startswith("sqlite:////"):
                rel = url[len("sqlite:///"):]
                return f"sqlite:///{(self.base_dir / rel).resolve()}"
            return url
        return f"sqlite:///{(self.base_dir / 'arbor.db').resolve()}"

    def landscape_path(self) -> Path:
        if self.target.kind != "replay":
            raise AttributeError("landscape_path() is for replay targets")
        return self.resolve(self.target.landscape)

    def runs_dir(self) -> Path:
        return self.base_dir / "arbor_runs" / self.name

    def skill_dirs(self) -> list[Path]:
        return [(self.base_dir / d).resolve() for d in self.skills.extra_dirs]

    def load_skills(self):  # type: ignore[no-untyped-def]
        """The campaign's skills: built-ins, its extra directories, less what it excludes."""
        from arbor.agents.skills import load_skills

        return load_skills(self.skill_dirs(), self.skills.exclude)


_HINTS = {
    "missing": "add it",
    "extra_forbidden": "remove it or check its spelling",
    "literal_error": "use one of the allowed values",
    "greater_than": "use a larger value",
    "greater_than_equal": "use a larger value",
    "less_than": "use a smaller value",
    "less_than_equal": "use a smaller value",
    "int_parsing": "use a whole number",
    "float_parsing": "use a number",
    "string_pattern_mismatch": "use letters, digits, '.', '_' or '-' only",
    "too_short": "give more entries",
    "dict_type": "use a mapping (key: value)",
    "list_type": "use a list",
    "model_type": "use a mapping (key: value)",
}


def register_target_model(kind: str, model: type[TargetModel]) -> None:
    """Let campaign files use ``target: {kind: KIND, ...}`` validated by ``model``."""
    target_kinds.add(kind, model)
    _rebuild()


def unregister_target_model(kind: str) -> None:
    target_kinds.remove(kind)
    _rebuild()


def _rebuild() -> None:
    """The ``target`` field's union is fixed when the model is built: rebuild it from the registry."""
    CampaignSpec.model_fields["target"] = FieldInfo.from_annotation(target_kinds.target_union())
    CampaignSpec.model_rebuild(force=True)


def format_validation_error(exc: ValidationError, source: str) -> list[str]:
    lines = []
    for err in exc.errors():
        parts = list(err["loc"])
        if len(parts) > 1 and parts[0] == "target" and parts[1] in target_kinds.kinds():
            del parts[1]  # the union's tag, not a field the user wrote
        loc = ".".join(str(p) for p in parts) or "(top level)"
        msg = err["msg"].removeprefix("Value error, ")
        hint = target_kinds.kind_hint() if err["type"] == "target_kind" else \
            _HINTS.get(err["type"], "see campaigns/quickstart.yaml for a valid example")
        lines.append(f"{source}: {loc}: {msg} — {hint}")
    return lines


def parse_spec(data: object, source: str, base_dir: Path) -> CampaignSpec:
    if not isinstance(data, dict):
        raise SpecError([f"{source}: the campaign must be a YAML mapping (name:, target:, ...) — "
                         "see campaigns/quickstart.yaml"])
    try:
        return CampaignSpec.model_validate({**data, "base_dir": base_dir})
    except ValidationError as exc:
        raise SpecError(format_validation_error(exc, source)) from None


def load_spec(path: str | Path) -> CampaignSpec:
    """Read, parse and validate a campaign file (the problem file is checked by the caller)."""
    p = Path(path)
    if not p.is_file():
        raise SpecError([f"campaign file not found: {p} — check the path (try campaigns/quickstart.yaml)"])
    try:
        data = yaml.safe_load(p.read_text())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise SpecError([f"{p}: malformed YAML{where}: {problem} — fix the indentation or quoting there"]) from None
    return parse_spec(data, str(p), p.resolve().parent)
