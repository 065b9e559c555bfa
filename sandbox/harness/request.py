"""The request that crosses into the sandbox: written by the host, parsed by the harness.

Standard library only: it ships with the harness into the job (loaded by path beside it) and is
imported by the host as ``arbor.sandbox.harness.request``. Both sides hold the same dataclass, so a
field the host writes and the harness reads is named once: ``MeasureRequest`` for a measurement
(``kernel_harness.py``; a batch is ``{"batch": [MeasureRequest, ...]}``), ``ProfileRequest`` for a
bottleneck profile (``profile_harness.py``). Parsing is strict: an unknown field or a missing one is
a ``RequestError`` naming it — a misspelt key is never silently a default.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from typing import Any, TypeVar

T = TypeVar("T", bound="_Wire")


class RequestError(ValueError):
    """A request.json the harness cannot read as its request (a host/harness version mismatch)."""


class _Wire:
    def to_dict(self) -> dict:
        return asdict(self)  # type: ignore[call-overload]

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    @classmethod
    def from_dict(cls: type[T], data: Any) -> T:
        if not isinstance(data, dict):
            raise RequestError(f"{cls.__name__}: expected an object, got {type(data).__name__}")
        names = [f.name for f in fields(cls)]  # type: ignore[arg-type]
        unknown = sorted(set(data) - set(names))
        missing = [n for n in names if n not in data]
        if unknown or missing:
            parts = ([f"unknown field(s) {', '.join(unknown)}"] if unknown else []) + \
                    ([f"missing field(s) {', '.join(missing)}"] if missing else [])
            raise RequestError(f"{cls.__name__}: {'; '.join(parts)} — the host and the harness must "
                               "come from the same Arbor")
        return cls(**data)


@dataclass
class MeasureRequest(_Wire):
    """One measurement (``sandbox/kernel/protocol.py: KernelRequest`` says what each knob means)."""

    problem_file: str
    candidate_file: str
    nonce: str  # echoed in result.json: a result without it was not written by the harness
    seeds: list
    atol: float | None
    rtol: float | None
    close_fraction: float
    outlier_factor: float
    allow_degenerate: bool
    sizes: dict
    size_scale: float | None
    dtype: str | None
    device: str
    warmup_s: float
    min_repeats: int
    max_repeats: int
    time_budget_s: float
    target_ci: float
    extra_time_s: float
    min_sample_s: float
    clock: str
    num_threads: int | None
    mode: str
    placement: str
    timeout_s: float
    memory_bytes: int | None
    quiet_s: float
    peak: dict | None  # the host's cached peaks, or None (then measured when measure_peak)
    sol_peak: dict | None
    measure_peak: bool
    measure_sol_peak: bool
    compile_cache: dict | None  # {"key", "in", "out", vec-ISA verdict}: the job's compile cache
    inductor: dict | None  # a batch child's vec-ISA verdict (no cache between jobs)
    timing_pool_bytes: int | None  # the timing inputs' pool; None: the harness's default


@dataclass
class ProfileRequest(_Wire):
    """One bottleneck profile (``sandbox/kernel/profile_job.py``)."""

    problem_file: str
    candidate_file: str
    nonce: str
    sizes: dict
    size_scale: float | None
    dtype: str | None
    device: str
    num_threads: int | None
    iters: int
    budget_s: float
    compile_cache: dict | None  # loaded, never packed back


def read_measure(text: str) -> list[MeasureRequest] | MeasureRequest:
    """request.json of a measurement job: one request, or a batch's list."""
    data = json.loads(text)
    if isinstance(data, dict) and set(data) == {"batch"}:
        if not isinstance(data["batch"], list):
            raise RequestError("batch: expected a list of MeasureRequest objects")
        return [MeasureRequest.from_dict(e) for e in data["batch"]]
    return MeasureRequest.from_dict(data)


def write_batch(requests: list[MeasureRequest]) -> str:
    return json.dumps({"batch": [r.to_dict() for r in requests]})
