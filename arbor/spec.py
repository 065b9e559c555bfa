"""Campaign spec: the YAML a user writes, validated by pydantic v2.

Every problem in a spec becomes one line naming the field and the fix, so a typo never costs a
traceback (or, worse, a silently ignored knob — unknown keys are errors, as ANCHORS warns about
server flags dropped between phases).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator


class SpecError(ValueError):
    """One or more problems in a campaign file; ``str()`` is one line per problem."""

    def __init__(self, problems: list[str]):
        super().__init__("\n".join(problems))
        self.problems = problems


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


DTYPE_TOLERANCE = {"float32": 1e-4, "float16": 1e-2, "bfloat16": 1e-2, "float64": 1e-7}


class KernelTarget(_Strict):
    kind: Literal["kernel"] = "kernel"
    problem: str = Field(description="path to a KernelBench-format problem file")
    sizes: dict[str, int] = Field(default_factory=dict, description="module-global overrides")
    size_scale: float | None = Field(default=None, gt=0, le=64)
    dtype: Literal["float32", "float16", "bfloat16", "float64"] | None = None
    device: Literal["cpu", "cuda"] = "cpu"
    atol: float | None = Field(default=None, gt=0)
    rtol: float | None = Field(default=None, gt=0)
    num_threads: int | None = Field(default=None, ge=1)

    def tolerances(self) -> tuple[float, float]:
        default = DTYPE_TOLERANCE[self.dtype or "float32"]
        return (self.atol or default, self.rtol or default)


class Objective(_Strict):
    metric: Literal["latency"] = "latency"
    direction: Literal["minimize"] = "minimize"


class Budget(_Strict):
    max_evaluations: int = Field(default=30, ge=1)
    max_wall_s: float = Field(default=3600, gt=0)
    patience: int | None = Field(default=None, ge=1, description="stop after K steps without a new best")
    target_speedup: float | None = Field(default=None, gt=1)
    max_failures_in_row: int = Field(default=8, ge=1)


class Agents(_Strict):
    backend: Literal["heuristic"] = "heuristic"
    seed: int = 0
    policy: Literal["puct", "ucb1", "greedy", "random"] = "puct"
    exploration: float = Field(default=1.0, ge=0)
    proposals_per_step: int = Field(default=1, ge=1, le=16)


class Sandbox(_Strict):
    kind: Literal["local"] = "local"
    timeout_s: float = Field(default=180, gt=0)
    memory_gb: float | None = Field(default=8, gt=0)


class Measurement(_Strict):
    seeds: list[int] = Field(default_factory=lambda: [0, 1, 2], min_length=3)
    warmup_s: float = Field(default=0.3, ge=0)
    time_budget_s: float = Field(default=2.0, gt=0)
    min_repeats: int = Field(default=10, ge=5)
    max_repeats: int = Field(default=200, ge=5)
    min_sample_s: float = Field(default=2e-3, gt=0)

    @model_validator(mode="after")
    def _repeats(self):
        if self.max_repeats < self.min_repeats:
            raise ValueError("max_repeats must be >= min_repeats")
        return self


class Critic(_Strict):
    max_cv: float = Field(default=0.15, gt=0, description="coefficient of variation above which we remeasure")
    confidence: float = Field(default=0.95, gt=0.5, lt=1)
    bootstrap_resamples: int = Field(default=2000, ge=1000)
    min_speedup: float = Field(default=1.01, ge=1.0, description="minimum effect size")
    max_remeasures: int = Field(default=1, ge=0, le=5)


class Skills(_Strict):
    extra_dirs: list[str] = Field(default_factory=list)


class StoreCfg(_Strict):
    url: str | None = None


class CampaignSpec(_Strict):
    name: str = Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9_.\-]+$")
    description: str = ""
    target: KernelTarget
    objective: Objective = Field(default_factory=Objective)
    budget: Budget = Field(default_factory=Budget)
    agents: Agents = Field(default_factory=Agents)
    sandbox: Sandbox = Field(default_factory=Sandbox)
    measurement: Measurement = Field(default_factory=Measurement)
    critic: Critic = Field(default_factory=Critic)
    skills: Skills = Field(default_factory=Skills)
    store: StoreCfg = Field(default_factory=StoreCfg)
    # where the YAML lives; relative paths resolve against it (not serialized into the store)
    base_dir: Path = Field(default=Path("."), exclude=True)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return v.strip()

    def problem_path(self) -> Path:
        p = Path(self.target.problem).expanduser()
        return p if p.is_absolute() else (self.base_dir / p).resolve()

    def store_url(self) -> str:
        if self.store.url:
            url = self.store.url
            if url.startswith("sqlite:///") and not url.startswith("sqlite:////"):
                rel = url[len("sqlite:///"):]
                return f"sqlite:///{(self.base_dir / rel).resolve()}"
            return url
        return f"sqlite:///{(self.base_dir / 'arbor.db').resolve()}"

    def runs_dir(self) -> Path:
        return self.base_dir / "arbor_runs" / self.name

    def skill_dirs(self) -> list[Path]:
        return [(self.base_dir / d).resolve() for d in self.skills.extra_dirs]


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


def format_validation_error(exc: ValidationError, source: str) -> list[str]:
    lines = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "(top level)"
        msg = err["msg"].removeprefix("Value error, ")
        hint = _HINTS.get(err["type"], "see campaigns/quickstart.yaml for a valid example")
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
