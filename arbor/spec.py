"""Campaign spec: the YAML a user writes, validated by pydantic v2.

Every problem in a spec becomes one line naming the field and the fix, so a typo never costs a
traceback (or, worse, a silently ignored knob — unknown keys are errors, as ANCHORS warns about
server flags dropped between phases).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal, Union

import yaml
from pydantic import (BaseModel, ConfigDict, Discriminator, Field, Tag, ValidationError, field_validator,
                      model_validator)

from .spec_agents import LLM_ROLES, AgentRole, Agents, StructuredMode  # noqa: F401 (re-exported)
from .spec_executor import ExecutorCfg
from .spec_replay import ReplayTarget
from .spec_serving import ServingTarget


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
    # kernels: minimize latency. serving: maximize throughput_at_slo (max req/s whose latency
    # percentiles meet the SLO) or hypervolume (the throughput-latency Pareto front's area)
    metric: Literal["latency", "throughput_at_slo", "hypervolume"] = "latency"
    direction: Literal["minimize", "maximize"] = "minimize"


def _target_kind(v) -> str | None:
    """``kind`` picks the target model; existing kernel campaigns omit it (default kernel)."""
    kind = v.get("kind", "kernel") if isinstance(v, dict) else getattr(v, "kind", None)
    return kind if isinstance(kind, str) else None


Target = Annotated[Union[Annotated[KernelTarget, Tag("kernel")], Annotated[ServingTarget, Tag("serving")],
                         Annotated[ReplayTarget, Tag("replay")]],
                   Discriminator(_target_kind, custom_error_type="target_kind",
                                 custom_error_message="unknown target kind: use kernel, serving or replay")]


class Price(_Strict):
    """US dollars per 1,000 tokens."""

    prompt_per_1k: float = Field(ge=0)
    completion_per_1k: float = Field(ge=0)


class Budget(_Strict):
    max_evaluations: int = Field(default=30, ge=1)
    max_wall_s: float = Field(default=3600, gt=0)
    patience: int | None = Field(default=None, ge=1, description="stop after K steps without a new best")
    target_speedup: float | None = Field(default=None, gt=1)
    max_failures_in_row: int = Field(default=8, ge=1)
    max_tokens: int | None = Field(default=None, ge=1, description="LLM prompt + completion tokens, all runs")
    max_cost_usd: float | None = Field(default=None, gt=0)
    prices: dict[str, Price] = Field(default_factory=dict, description="model name (or '*') -> USD per 1k tokens")


class DockerOptions(_Strict):
    """``sandbox.kind: docker`` settings (see sandbox/docker_runner.py)."""

    image: str = Field(default="host", min_length=1,
                       description="host | cpu | cuda (recipes in sandbox/dockerfiles) or a local image")
    build: bool = Field(default=True, description="build a missing recipe image")
    warm: bool = Field(default=True, description="reuse one container per campaign and device")
    cpus: float | None = Field(default=None, gt=0)
    pids_limit: int = Field(default=512, ge=16)
    tmpfs_mb: int = Field(default=2048, ge=16)
    base_url: str | None = Field(default=None, description="engine URL; default $DOCKER_HOST")
    python: str | None = Field(default=None, description="interpreter inside the image")


class ClockTargetsCfg(_Strict):
    graphics_mhz: int | None = Field(default=None, gt=0)
    memory_mhz: int | None = Field(default=None, gt=0)
    tolerance_mhz: int = Field(default=50, ge=0)
    settle_s: float = Field(default=3.0, ge=0)


class Sandbox(_Strict):
    kind: Literal["local", "docker"] = "local"
    timeout_s: float = Field(default=180, gt=0)
    memory_gb: float | None = Field(default=8, gt=0)
    network: Literal["none", "host"] = "none"
    filesystem: Literal["isolate", "host"] = Field(default="isolate", description="local runner: Landlock")
    max_processes: int = Field(default=512, ge=8)
    max_open_files: int = Field(default=1024, ge=64)
    max_file_mb: float | None = Field(default=1024, gt=0)
    docker: DockerOptions = Field(default_factory=DockerOptions)
    # GPU clocks: lock (pin + read back, refuse if they did not take), verify (check / record),
    # ignore (record only). CPU campaigns only record the host fingerprint.
    clocks: Literal["lock", "verify", "ignore"] = "verify"
    clock_targets: ClockTargetsCfg = Field(default_factory=ClockTargetsCfg)
    gpu_backend: Literal["auto", "nvml", "nvidia-smi", "amd-smi"] = "auto"


class Measurement(_Strict):
    seeds: list[int] = Field(default_factory=lambda: [0, 1, 2, 3, 4], min_length=3,
                             description="correctness rounds, each with fresh inputs (5 by default)")
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
    """Every threshold of the Critic's gates (agents/critic/gates.py), with defaults."""

    max_cv: float = Field(default=0.15, gt=0, description="coefficient of variation above which we remeasure")
    confidence: float = Field(default=0.95, gt=0.5, lt=1)
    bootstrap_resamples: int = Field(default=2000, ge=1000)
    min_speedup: float = Field(default=1.01, ge=1.0, description="minimum effect size")
    mw_alpha: float = Field(default=0.05, gt=0, le=0.5, description="Mann-Whitney U must give p below this")
    max_remeasures: int = Field(default=1, ge=0, le=5)
    confirm_new_best: bool = Field(default=True, description="re-measure a new best before building on it")
    final_measurements: int = Field(default=3, ge=0, le=20,
                                    description="before reporting, measure the best (and contenders) until each "
                                                "has this many; report the median (0 or 1: off)")
    close_fraction: float = Field(default=0.99, gt=0.5, le=1.0,
                                  description="share of output elements that must be within tolerance")
    outlier_factor: float = Field(default=10.0, ge=1.0,
                                  description="no element may be further off than this many tolerances")
    allow_degenerate_reference: bool = Field(default=False, description="accept a constant/zero reference output")
    allow_imports: list[str] = Field(default_factory=list,
                                     description="modules the static guard lets candidates import (e.g. ctypes)")
    plausibility_slack: float = Field(default=2.0, ge=1.0,
                                      description="hack_suspected only when faster than speed of light / slack")
    plausibility_flops: bool = Field(default=False, description="also floor by the reference's FLOPs "
                                     "(only for problems whose algorithm cannot change)")
    min_timed_coverage: float = Field(default=0.5, ge=0, le=1,
                                      description="CPU: share of the timing phase inside the timer")
    clock_tolerance_mhz: float = Field(default=50.0, ge=0, description="locked GPU clocks vs the baseline's")
    check_env: bool = Field(default=True, description="env_drift gate on/off")
    reference_drift: float = Field(default=0.5, ge=0, description="env_drift when the reference runs this much "
                                   "slower than in the baseline's measurement (0: off)")
    quiet_window_s: float = Field(default=0.15, ge=0.05, le=5,
                                  description="idle window after timing in which candidate threads must not work")


class Skills(_Strict):
    extra_dirs: list[str] = Field(default_factory=list)


class StoreCfg(_Strict):
    url: str | None = None


class CampaignSpec(_Strict):
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
        """Serving campaigns maximize throughput at the SLO unless they name hypervolume."""
        serving = self.target.kind == "serving"
        if "objective" not in self.model_fields_set:
            if serving:
                self.objective = Objective(metric="throughput_at_slo", direction="maximize")
            return self
        ok = ("throughput_at_slo", "hypervolume") if serving else ("latency",)
        if self.objective.metric not in ok:
            raise ValueError(f"objective.metric {self.objective.metric!r} does not fit a {self.target.kind} "
                             f"target — use {' or '.join(ok)}")
        want = "maximize" if serving else "minimize"
        if self.objective.direction != want:
            raise ValueError(f"objective.direction must be {want} for {self.objective.metric}")
        return self

    def problem_path(self) -> Path:
        if self.target.kind != "kernel":
            raise AttributeError("problem_path() is for kernel targets")
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

    def landscape_path(self) -> Path:
        if self.target.kind != "replay":
            raise AttributeError("landscape_path() is for replay targets")
        p = Path(self.target.landscape).expanduser()
        return p if p.is_absolute() else (self.base_dir / p).resolve()

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
    "target_kind": "set target.kind: kernel (a KernelBench problem), serving (a server + knobs) or replay "
                   "(a recorded landscape)",
}


def format_validation_error(exc: ValidationError, source: str) -> list[str]:
    lines = []
    for err in exc.errors():
        parts = list(err["loc"])
        if len(parts) > 1 and parts[0] == "target" and parts[1] in ("kernel", "serving", "replay"):
            del parts[1]  # the union's tag, not a field the user wrote
        loc = ".".join(str(p) for p in parts) or "(top level)"
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
