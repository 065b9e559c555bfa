"""The ``kind: serving`` campaign target: a server launch command with knobs, a load profile,
latency SLOs and an accuracy gate (imported by ``arbor.spec``).

A knob is a named, typed, bounded value that renders into the launch command (``{knob}``
placeholders) or the environment. The artifact of a serving node is the canonical JSON of the
knob values, so the same configuration is never measured twice however it was reached.
"""

from __future__ import annotations

import re
import shlex
from typing import ClassVar, Literal, Union

from pydantic import Field, field_validator, model_validator

from .base import Strict, TargetModel

PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
# Filled in by Arbor, not by knobs: {port} and {host} at start-up, the rest from the spec;
# {llama_server} and {llama_model} are the per-machine llama.cpp build and SmolLM2's GGUF
# (sandbox/serving/llamacpp_install.py).
BUILTINS = ("port", "host", "model", "python", "campaign_dir", "llama_server", "llama_model")
LLAMACPP_BUILTINS = ("llama_server", "llama_model")
# Names a ``when:`` condition reads from a measurement; a knob may not shadow them.
SYMPTOMS = (
    "req_s", "tok_s", "goodput_req_s", "failed", "slo_attainment", "concurrency", "ttft_share",
    "out_len_ratio", "queued", "queued_max", "running", "running_max", "kv_usage", "kv_usage_max",
    "preemptions", "ttft_slo_ratio", "tpot_slo_ratio", "e2e_slo_ratio",
    *(f"{m}_p{q}_ms" for m in ("ttft", "tpot", "itl", "e2e") for q in (50, 90, 95, 99)),
)

KnobValue = Union[bool, int, float, str, None]


class Knob(Strict):
    """One tunable. The type is the default's type; ints stay ints under ``knob_scale``."""

    default: KnobValue
    min: float | None = None
    max: float | None = None
    choices: list[KnobValue] | None = None
    arg: str | None = Field(default=None, description="how the knob renders, e.g. '--max-num-seqs {value}'; "
                                                      "for a bool, the flag emitted when true")
    arg_false: str | None = Field(default=None, description="for a bool with arg: the flag emitted when false "
                                                            "(e.g. --no-enable-prefix-caching)")
    changes_outputs: bool = Field(default=False, description="may change generated tokens: run the accuracy gate")
    description: str = ""

    @model_validator(mode="after")
    def _consistent(self):
        v = self.default
        if isinstance(v, bool) and (self.min is not None or self.max is not None):
            raise ValueError("a true/false knob takes no min/max")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min {self.min} is above max {self.max}")
        if self.choices is not None and v not in self.choices:
            raise ValueError(f"default {v!r} is not among choices {self.choices}")
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            if (self.min is not None and v < self.min) or (self.max is not None and v > self.max):
                raise ValueError(f"default {v} lies outside [{self.min}, {self.max}]")
        return self

    @property
    def kind(self) -> str:
        v = self.default
        if self.choices is not None:
            return "choice"
        return "bool" if isinstance(v, bool) else "int" if isinstance(v, int) else \
            "float" if isinstance(v, float) else "str"

    def problem(self, name: str, value: KnobValue) -> str | None:
        """Why ``value`` is not allowed, or None."""
        if self.choices is not None:
            return None if value in self.choices else f"{name}={value!r} is not one of {self.choices}"
        d = self.default
        if isinstance(d, bool) or isinstance(value, bool):
            return None if isinstance(value, bool) == isinstance(d, bool) else f"{name} must be true or false"
        if isinstance(d, (int, float)):
            if not isinstance(value, (int, float)) or (isinstance(d, int) and not float(value).is_integer()):
                return f"{name}={value!r} must be {'a whole number' if isinstance(d, int) else 'a number'}"
            if (self.min is not None and value < self.min) or (self.max is not None and value > self.max):
                return f"{name}={value} lies outside [{self.min}, {self.max}]"
            return None
        return None if value is None or isinstance(value, str) else f"{name}={value!r} must be a string"

    def render(self, value: KnobValue) -> str:
        """Text for the ``{knob}`` placeholder ('' drops a whole-token placeholder)."""
        if value is None:
            return ""
        if isinstance(value, bool):
            if self.arg is not None:
                return self.arg if value else (self.arg_false or "")
            return "true" if value else "false"
        text = str(int(value)) if isinstance(value, float) and value.is_integer() and isinstance(self.default, int) \
            else str(value)
        return self.arg.replace("{value}", text) if self.arg is not None else text


class LengthSpec(Strict):
    mean: int = Field(ge=1, description="tokens")
    range_ratio: float = Field(default=0.0, ge=0, lt=1, description="uniform in mean·(1±range_ratio)")


class Synthetic(Strict):
    input_len: LengthSpec = Field(default_factory=lambda: LengthSpec(mean=128))
    output_len: LengthSpec = Field(default_factory=lambda: LengthSpec(mean=64))
    prefix_len: int = Field(default=0, ge=0, description="words shared by every prompt (prefix caching)")
    seed: int = 0


class LoadProfile(Strict):
    synthetic: Synthetic | None = None
    dataset: str | None = Field(default=None, description="JSONL: {prompt|messages, max_tokens?} per line")
    dataset_output_len: int = Field(default=128, ge=1, description="max_tokens for rows that name none")
    concurrency: list[int] | None = Field(default=None, description="closed-loop levels")
    request_rates: list[float] | None = Field(default=None, description="open-loop Poisson levels (req/s)")
    max_concurrency: int | None = Field(default=None, ge=1, description="cap for request-rate levels")
    num_prompts: int | None = Field(default=64, ge=1)
    duration_s: float | None = Field(default=None, gt=0, description="instead of num_prompts")
    warmup_requests: int = Field(default=4, ge=0)
    repeats: int = Field(default=3, ge=2, le=20, description="interleaved baseline/candidate rounds")
    request_timeout_s: float = Field(default=120, gt=0)
    temperature: float = Field(default=0.0, ge=0)
    ignore_eos: bool = True
    extra_body: dict = Field(default_factory=dict, description="merged into every request body")
    metrics_path: str | None = Field(default="/metrics", description="Prometheus page for symptoms; null: none")

    @model_validator(mode="after")
    def _one_of(self):
        if self.synthetic is not None and self.dataset is not None:
            raise ValueError("give either synthetic or dataset, not both")
        if self.synthetic is None and self.dataset is None:
            self.synthetic = Synthetic()
        if (self.concurrency is None) == (self.request_rates is None):
            raise ValueError("give exactly one of concurrency: [..] or request_rates: [..]")
        levels = self.concurrency or self.request_rates or []
        if not levels or any(x <= 0 for x in levels):
            raise ValueError("load levels must be a non-empty list of positive numbers")
        if self.duration_s is not None:
            self.num_prompts = None
        return self


class Slo(Strict):
    ttft_ms: float | None = Field(default=None, gt=0)
    tpot_ms: float | None = Field(default=None, gt=0)
    e2e_ms: float | None = Field(default=None, gt=0)
    percentile: Literal[50, 90, 95, 99] = 99

    @model_validator(mode="after")
    def _some(self):
        if self.ttft_ms is None and self.tpot_ms is None and self.e2e_ms is None:
            raise ValueError("set at least one of ttft_ms, tpot_ms, e2e_ms")
        return self


class AccuracyGate(Strict):
    """Greedy outputs + log-probabilities vs the baseline server on fixed prompts."""

    prompts: int = Field(default=8, ge=1, le=256)
    prompt_len: int = Field(default=32, ge=1)
    max_tokens: int = Field(default=16, ge=1)
    seed: int = 1234
    max_logprob_diff: float = Field(default=0.1, gt=0, description="mean |Δ logprob| over matching tokens")
    min_prefix_match: float = Field(default=0.9, gt=0, le=1, description="mean share of tokens equal to "
                                                                          "the baseline before they diverge")
    always: bool = Field(default=False, description="probe every candidate, not only output-changing ones")
    dataset: str | None = Field(default=None, description="JSONL of probe prompts ({prompt|messages} per line, "
                                                          "relative to the campaign file); default: synthetic")


class ServingTarget(TargetModel):
    kind: Literal["serving"]
    engine: str = Field(default="generic", pattern=r"^[a-z0-9_-]+$",
                        description="selects skill moves (applies_to.engines): tiny | vllm | sglang | ...")
    command: list[str] | str = Field(description="launch command; {knob}, {port}, {host}, {model}, {python}, "
                                                 "{campaign_dir}, {llama_server}, {llama_model} placeholders")
    model: str = Field(min_length=1, description="the model name requests carry")
    api: Literal["completions", "chat"] = "completions"
    health_path: str = Field(default="/health", pattern=r"^/")
    env: dict[str, str] = Field(default_factory=dict)
    env_passthrough: list[str] = Field(default_factory=list, description="extra variables the server inherits")
    startup_timeout_s: float = Field(default=600, gt=0)
    stop_grace_s: float = Field(default=10, ge=0)
    memory_gb: float | None = Field(default=None, gt=0, description="address-space cap (CPU servers only)")
    server_mode: Literal["concurrent", "sequential"] = "sequential"
    knobs: dict[str, Knob] = Field(min_length=1)
    load: LoadProfile
    slo: Slo
    accuracy: AccuracyGate = Field(default_factory=AccuracyGate)
    latency_margin: float = Field(default=1.5, gt=1, description="hypervolume reference: margin × baseline worst")

    # samples are req/s: maximize throughput at the SLO, or the throughput-latency Pareto front's area
    objectives: ClassVar[tuple[str, ...]] = ("throughput_at_slo", "hypervolume")
    direction: ClassVar[str] = "maximize"
    summary: ClassVar[str] = "a server + knobs"

    @field_validator("knobs")
    @classmethod
    def _names(cls, v: dict[str, Knob]) -> dict[str, Knob]:
        for name in v:
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                raise ValueError(f"knob name {name!r}: use letters, digits and '_'")
            if name in BUILTINS or name in SYMPTOMS:
                raise ValueError(f"knob name {name!r} is reserved (built-in placeholder or symptom) — rename it")
        return v

    @model_validator(mode="after")
    def _placeholders(self):
        known = set(self.knobs) | set(BUILTINS)
        texts = self.argv_template() + list(self.env.values())
        unknown = sorted({m for t in texts for m in PLACEHOLDER.findall(t)} - known)
        if unknown:
            raise ValueError(f"command/env use unknown placeholder(s) {', '.join('{' + u + '}' for u in unknown)}"
                             f" — declare them under knobs (known: {', '.join(sorted(known))})")
        if not any("{port}" in t for t in texts):
            raise ValueError("the command must contain {port}: Arbor picks a free port for every server")
        used = {m for t in texts for m in PLACEHOLDER.findall(t)}
        unused = sorted(set(self.knobs) - used)
        if unused:
            raise ValueError(f"knob(s) {', '.join(unused)} appear in neither command nor env — a knob that "
                             "changes nothing would be measured for nothing")
        return self

    def argv_template(self) -> list[str]:
        return shlex.split(self.command) if isinstance(self.command, str) else list(self.command)

    def defaults(self) -> dict[str, KnobValue]:
        return {k: knob.default for k, knob in self.knobs.items()}
