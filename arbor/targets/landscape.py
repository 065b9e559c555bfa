"""Landscapes: every point of a target's knob space, measured with repeats, in one JSON file.

A landscape is what ``arbor record`` writes and what the replay target serves back. Each point
keeps its recorded *runs* — the paired baseline/candidate samples of one real harness measurement
(rounds interleaved A/B, so pairs stay pairs) — because the Critic decides from raw samples, and
a replayed campaign must hand it the same kind of evidence a live one would. Summaries alone (a
median per point) would make every replayed decision noise-free, which is exactly the fidelity a
search benchmark must not fake. Replayed measurements are the recorded runs themselves while
they last (``Landscape.replay``).

The file is compact JSON: samples rounded to 4 significant digits, at most ``MAX_ROUNDS`` rounds
per run (evenly thinned when a run has more).
"""

from __future__ import annotations

import json
import math
import random
from functools import cached_property
from pathlib import Path
from typing import Literal, Union

from pydantic import Field, PrivateAttr, ValidationError, model_validator

from arbor.sandbox.kernel.problem import ProblemError
from arbor.spec import Strict

FORMAT = "arbor-landscape/1"
MAX_ROUNDS = 120
KnobValue = Union[bool, int, float, str]


class LandscapeError(ProblemError):
    """A landscape file that cannot be used; one line naming the file and the fix. (A landscape is
    the replay target's problem, so the CLI reports it like a bad problem file.)"""


class Knob(Strict):
    name: str = Field(min_length=1)
    values: list[KnobValue] = Field(min_length=1, description="allowed values, in order")
    default: KnobValue

    def index(self, value: KnobValue) -> int | None:
        return next((i for i, v in enumerate(self.values) if type(v) is type(value) and v == value), None)


class Run(Strict):
    """One real measurement: paired per-round samples (seconds) of the reference and the point."""

    b: list[float] = Field(default_factory=list)
    c: list[float] = Field(default_factory=list)
    s: float = Field(default=0.0, description="wall seconds the measurement took")


class Point(Strict):
    knobs: dict[str, KnobValue]
    status: Literal["ok", "error"] = "ok"
    error_class: str | None = None
    error_text: str | None = None
    runs: list[Run] = Field(default_factory=list)
    accuracy: Literal["passed", "failed"] | None = Field(
        default=None, description="serving: the accuracy gate's outcome when the point was recorded "
        "(a replayed config that changes numerics is accepted only with 'passed')")
    # runs whose reference ran slower than this are not trusted (set by the landscape, see below)
    _max_reference_s: float | None = PrivateAttr(default=None)

    @property
    def speedup(self) -> float | None:
        """The point's true value: the median over runs (in log space, so two runs give their
        geometric mean) of median(baseline)/median(candidate). A median, not a mean: a run in which
        the reference fell into a slow mode (allocator, page faults) must not make a point the
        optimum on its own."""
        ratios = [median(r.b) / median(r.c) for r in self.runs if r.b and r.c and median(r.c) > 0
                  and (self._max_reference_s is None or median(r.b) <= self._max_reference_s)]
        if self.status != "ok" or not ratios:
            return None
        return math.exp(median([math.log(x) for x in ratios]))

    @property
    def median_s(self) -> float | None:
        xs = [x for r in self.runs for x in r.c]
        return median(xs) if xs else None


class MoveDecl(Strict):
    """A move as declared by the recorded campaign's skills (same ids, priors and families)."""

    id: str
    transform: str
    params: dict = Field(default_factory=dict)
    prior: float = Field(gt=0, le=1)
    family: str | None = None
    description: str = ""


class Landscape(Strict):
    format: Literal["arbor-landscape/1"] = FORMAT
    name: str
    kind: Literal["kernel", "serving"] = "kernel"
    description: str = ""
    objective: Literal["latency"] = "latency"
    knobs: list[Knob] = Field(min_length=1)
    moves: list[MoveDecl] = Field(default_factory=list)
    points: list[Point] = Field(default_factory=list)
    recorded: dict = Field(default_factory=dict, description="machine, settings, date, duration")
    campaign: dict = Field(default_factory=dict, description="the recorded campaign's measurement/critic settings")
    # above this reference time a run is one the landscape itself distrusts (``_trusted_runs``)
    _trusted_reference_s: float | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _trusted_runs(self):
        """A run whose reference ran much slower than the landscape's typical reference has an
        inflated ratio (the Critic's ``reference`` gate rejects such measurements live): it does
        not count towards a point's true value. Same tolerance as the recorded Critic's."""
        refs = [median(r.b) for p in self.points for r in p.runs if r.b]
        drift = float((self.campaign.get("critic") or {}).get("reference_drift", 0.5) or 0.0)
        if refs and drift > 0:
            self._trusted_reference_s = limit = median(refs) * (1 + drift)
            for p in self.points:
                p._max_reference_s = limit
        return self

    @model_validator(mode="after")
    def _consistent(self):
        names = [k.name for k in self.knobs]
        if len(set(names)) != len(names):
            raise ValueError("knob names repeat")
        for k in self.knobs:
            if k.index(k.default) is None:
                raise ValueError(f"knob {k.name}: default {k.default!r} is not among its values")
        seen = set()
        for p in self.points:
            if set(p.knobs) != set(names):
                raise ValueError(f"point {p.knobs} does not set exactly the knobs {names}")
            key = self.key(p.knobs)
            if key is None:
                raise ValueError(f"point {p.knobs} uses a value outside its knob's values")
            if key in seen:
                raise ValueError(f"point {p.knobs} appears twice")
            seen.add(key)
        return self

    # --- lookups ----------------------------------------------------------------------
    def key(self, config: dict) -> tuple[int, ...] | None:
        """Position of ``config`` in the grid (one value index per knob); None when off-grid."""
        if set(config) != {k.name for k in self.knobs}:
            return None
        idx = tuple(k.index(config[k.name]) for k in self.knobs)
        return None if any(i is None for i in idx) else idx  # type: ignore[return-value]

    @property
    def trusted_reference_s(self) -> float | None:
        return self._trusted_reference_s

    @cached_property
    def _by_key(self) -> dict[tuple[int, ...], Point]:
        return {self.key(p.knobs): p for p in self.points}  # type: ignore[misc]

    def point(self, config: dict) -> Point | None:
        key = self.key(config)
        return None if key is None else self._by_key.get(key)

    def default_config(self) -> dict[str, KnobValue]:
        return {k.name: k.default for k in self.knobs}

    def size(self) -> int:
        return math.prod(len(k.values) for k in self.knobs)

    def optimum(self) -> float:
        return max((p.speedup for p in self.points if p.speedup is not None), default=1.0)

    def true_speedup(self, config: dict) -> float | None:
        p = self.point(config)
        return None if p is None else p.speedup

    # --- replay -----------------------------------------------------------------------
    def replay(self, point: Point, seed: int | str, k: int) -> tuple[list[float], list[float], float]:
        """The ``k``-th replayed measurement (0-based) of ``point`` under ``seed``.

        The first ``len(point.runs)`` measurements are the recorded runs themselves, unaltered, in a
        seeded order: nothing is more faithful than a real measurement, and an independent
        re-measurement (a Critic's confirmation) gets a different one. Only beyond that are runs
        resampled (``draw``), which adds noise the recording did not have — resampling a run moves
        its median by about one more standard error — so it is the fallback, not the rule."""
        n = len(point.runs)
        if k < n:
            order = list(range(n))
            random.Random(f"{seed}:{self.key(point.knobs)}").shuffle(order)
            run = point.runs[order[k]]
            m = min(len(run.b), len(run.c))
            return list(run.b[:m]), list(run.c[:m]), run.s
        return self.draw(point, random.Random(f"{seed}:{self.key(point.knobs)}:{k}"))

    def draw(self, point: Point, rng: random.Random) -> tuple[list[float], list[float], float]:
        """A measurement synthesised from ``point``'s recordings: a recorded run picked at random,
        its rounds resampled with replacement as pairs (the baseline/candidate pairing survives)."""
        run = point.runs[rng.randrange(len(point.runs))]
        n = min(len(run.b), len(run.c))
        idx = [rng.randrange(n) for _ in range(n)]
        return [run.b[i] for i in idx], [run.c[i] for i in idx], run.s

    # --- files ------------------------------------------------------------------------
    def dump(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        data = self.model_dump(mode="json", exclude_defaults=False)
        text = json.dumps(data, separators=(",", ":"))
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(text + "\n")
        tmp.replace(path)


def median(xs: list[float]) -> float:
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def compact_samples(xs: list[float], limit: int = MAX_ROUNDS) -> list[float]:
    """4 significant digits, at most ``limit`` values (evenly spaced, so drift stays visible)."""
    if len(xs) > limit:
        step = len(xs) / limit
        xs = [xs[int(i * step)] for i in range(limit)]
    return [float(f"{x:.4g}") for x in xs]


def compact_run(baseline: list[float], candidate: list[float], seconds: float) -> Run:
    n = min(len(baseline), len(candidate))
    return Run(b=compact_samples(baseline[:n]), c=compact_samples(candidate[:n]), s=round(seconds, 3))


def load_landscape(path: str | Path) -> Landscape:
    p = Path(path)
    if not p.is_file():
        raise LandscapeError(f"landscape not found: {p} — record one with `arbor record CAMPAIGN.yaml -o {p}`")
    try:
        data = json.loads(p.read_text())
    except (ValueError, UnicodeDecodeError) as exc:
        raise LandscapeError(f"{p}: not JSON ({exc}) — re-record it with `arbor record`") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise LandscapeError(f"{p}: not an {FORMAT} file (format={data.get('format') if isinstance(data, dict) else None!r})"
                             " — re-record it with `arbor record`")
    try:
        return Landscape.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(x) for x in first["loc"]) or "(top level)"
        raise LandscapeError(f"{p}: {loc}: {first['msg'].removeprefix('Value error, ')} — "
                             "fix the file or re-record it with `arbor record`") from None
