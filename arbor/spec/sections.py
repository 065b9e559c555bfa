"""The sections of a campaign spec besides ``target:`` and ``agents:``: objective, budget,
sandbox, measurement protocol, Critic, skills and store."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from arbor.agents.critic.evidence import CriticConfig, CriticThresholds

from .base import Strict


class Objective(Strict):
    # kernels: minimize latency. serving: maximize throughput_at_slo (max req/s whose latency
    # percentiles meet the SLO) or hypervolume (the throughput-latency Pareto front's area)
    metric: Literal["latency", "throughput_at_slo", "hypervolume"] = "latency"
    direction: Literal["minimize", "maximize"] = "minimize"


class Price(Strict):
    """US dollars per 1,000 tokens."""

    prompt_per_1k: float = Field(ge=0)
    completion_per_1k: float = Field(ge=0)


class Budget(Strict):
    max_evaluations: int = Field(default=30, ge=1)
    max_wall_s: float = Field(default=3600, gt=0)
    patience: int | None = Field(default=None, ge=1, description="stop after K steps without a new best")
    target_speedup: float | None = Field(default=None, gt=1)
    sol_margin: float | None = Field(
        default=None, gt=0, lt=1,
        description="kernel targets: stop once the best (the reference included) runs within this margin of "
                    "its speed of light at the campaign's threads and dtype (0.1: at 90% of it or more) — no "
                    "candidate can gain more than 1/(1 - margin) there; off by default")
    max_failures_in_row: int = Field(default=8, ge=1)
    max_node_crashes: int = Field(default=3, ge=1, description="a node whose measurement dies this "
                                  "often (run killed/crashed) is failed as crashed_runner")
    max_tokens: int | None = Field(default=None, ge=1, description="LLM prompt + completion tokens, all runs")
    max_cost_usd: float | None = Field(default=None, gt=0)
    prices: dict[str, Price] = Field(default_factory=dict, description="model name (or '*') -> USD per 1k tokens")


class DockerOptions(Strict):
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


class ClockTargetsCfg(Strict):
    graphics_mhz: int | None = Field(default=None, gt=0)
    memory_mhz: int | None = Field(default=None, gt=0)
    tolerance_mhz: int = Field(default=50, ge=0)
    settle_s: float = Field(default=3.0, ge=0)


class Sandbox(Strict):
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


class Measurement(Strict):
    seeds: list[int] = Field(default_factory=lambda: [0, 1, 2, 3, 4], min_length=3,
                             description="correctness rounds, each with fresh inputs (5 by default)")
    warmup_s: float = Field(default=0.3, ge=0)
    time_budget_s: float = Field(default=2.0, gt=0)
    min_repeats: int = Field(default=10, ge=5)
    max_repeats: int = Field(default=200, ge=5)
    min_sample_s: float = Field(default=2e-3, gt=0)
    baseline_target_ci: float = Field(
        default=0.015, gt=0, le=0.2,
        description="the root's A/A (the reference against itself) is timed until its 95% CI half-width is "
        "within this (relative), for at most twice max_repeats rounds and twice time_budget_s past the budget: "
        "that interval is the noise floor every candidate must clear (candidates stop at 2%)")
    profile: bool = Field(default=True, description="profile the baseline and each new best (torch.profiler, one "
                          "sandbox job each) and aim the agents at the hot ops; false saves those jobs")
    clock: Literal["auto", "wall", "cpu"] = Field(
        default="auto", description="CPU kernels: 'auto' times single-threaded work (num_threads: 1, "
        "candidate on one thread) in process CPU time, which other processes' load does not inflate, "
        "and everything else in wall time; 'wall' always wall time")

    @model_validator(mode="after")
    def _repeats(self):
        if self.max_repeats < self.min_repeats:
            raise ValueError("max_repeats must be >= min_repeats")
        return self


class Critic(Strict, CriticThresholds):
    """The ``critic:`` section: the gates' thresholds (defined once, in ``CriticThresholds``) plus
    the settings of the measurement harness, the static guard and the final verification."""

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
    quiet_window_s: float = Field(default=0.15, ge=0.05, le=5,
                                  description="idle window after timing in which candidate threads must not work")

    def gate_config(self, seed: int) -> CriticConfig:
        """The Critic's configuration: every threshold as written, and the campaign's seed."""
        return CriticConfig(**self.model_dump(include=set(CriticThresholds.model_fields)), seed=seed)


class Skills(Strict):
    extra_dirs: list[str] = Field(default_factory=list)
    exclude: list[str] = Field(default_factory=list, description="skills or move ids to leave out (e.g. "
                               "compile-default where compiling costs more than the budget allows)")


class StoreCfg(Strict):
    url: str | None = None


class KnowledgeCfg(Strict):
    """The user-level knowledge store shared across campaigns (records of judged candidates,
    warm-start priors). ``knowledge: {}`` uses ``$XDG_DATA_HOME/arbor/knowledge.db``."""

    enabled: bool = True
    url: str | None = None
