"""The kernel protocol's values: what one measurement is asked (``KernelRequest``) and what it
measured (``KernelMeasurement``), apart from the protocol that runs it (``protocol.py``), so the
modules that only read them (``peaks.py``) import no protocol.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

__all__ = ["KernelRequest", "KernelMeasurement", "ERROR_CLASSES"]

ERROR_CLASSES = ("compile_error", "runtime_error", "timeout", "oom", "incorrect", "hack_suspected",
                 "harness_error")


@dataclass
class KernelRequest:
    """Everything one measurement needs; sources travel by value so a job is self-contained."""

    problem_source: str
    candidate_source: str
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2, 3, 4])
    atol: float | None = None  # None: per output dtype (1e-4 fp32, 1e-2 fp16/bf16)
    rtol: float | None = None
    close_fraction: float = 0.99  # share of elements that must be within tolerance
    outlier_factor: float = 10.0  # and none further out than this many tolerances
    allow_degenerate: bool = False  # a constant/zero reference output is an error unless allowed
    sizes: dict[str, int] = field(default_factory=dict)
    size_scale: float | None = None
    dtype: str | None = None
    device: str = "cpu"
    warmup_s: float = 0.3
    min_repeats: int = 10
    max_repeats: int = 200
    time_budget_s: float = 2.0
    # When the paired ratio is noisy (a loaded machine) timing goes on past the budget, for at
    # most ``extra_time_s`` more (None: twice the budget), until its 95% CI half-width is
    # within ``target_ci`` (relative).
    target_ci: float = 0.02
    extra_time_s: float | None = None
    min_sample_s: float = 2e-3
    clock: str = "auto"  # CPU: "auto" = process CPU time for single-threaded work, else wall; "wall"
    num_threads: int | None = None
    mode: str = "ab"
    # timing inputs: one pool both sides sweep ("shared"), or a pool per side ("own": before issue
    # 41, when each side kept its buffers, and their placement's luck, for the whole run)
    placement: str = "shared"
    timeout_s: float = 120.0
    memory_bytes: int | None = 8 << 30
    quiet_s: float = 0.15  # idle window after timing in which candidate threads must not work
    peak: dict | None = None  # CPU peak rates on every allowed core (the floor); None: cached, else measured
    # Peak rates at the campaign's own threads (CPU) or measured on the board (GPU): what the
    # speed-of-light position and profiles are read against. None: cached, else measured once.
    sol_peak: dict | None = None
    # a compiled candidate's artifacts are kept for its next measurements (sandbox/kernel/compile_store.py)
    reuse_compiled: bool = True


@dataclass
class KernelMeasurement:
    """Raw outcome of one measurement. Statistics are computed by the caller from the samples."""

    status: str
    error_class: str | None
    error_text: str | None
    correctness: list[dict]
    baseline_samples: list[float]
    candidate_samples: list[float]
    inner: int
    fingerprint: dict
    duration_s: float
    phase_times: dict
    input_shapes: list | None = None
    warnings: list[str] = field(default_factory=list)
    extra: dict = field(default_factory=dict)
    # Harness facts the Critic checks (reference cost, device peak, per-side inner counts, timer
    # cross-check, process audit). Stored as the measurement's ``stats``; the Critic's own
    # statistics are computed from the raw samples and live in its verdict.
    stats: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> KernelMeasurement:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})
