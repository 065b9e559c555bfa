"""Replay targets: a recorded landscape stands in for the sandbox.

The artifact of a replayed node is the canonical JSON of its knob values (the same form serving
configs use), the moves change one knob at a time, and ``measure`` returns the point's recorded
measurements in a seeded order — resampled ones once they run out (``Landscape.replay``; the count
per artifact lives in this process, so a resumed replay starts the order again). The orchestrator,
specialist, Critic (confirmations and re-measurements included) and store are the real ones, so a
replayed campaign behaves like the live one it was recorded from, in seconds.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from dataclasses import replace
from functools import cached_property, partial

from arbor.agents.contracts import Judgement
from arbor.agents.critic.gates import Evidence
from arbor.agents.skills import MoveSpec, SkillSpec
from arbor.agents.specialists.kernel_heuristic import HeuristicKernelSpecialist
from arbor.agents.transforms.knobs import canonical_config, parse_config
from arbor.targets.landscape import Landscape, LandscapeError, Point, load_landscape
from arbor.targets.landscape import median as _median
from arbor.targets.numerics_knobs import changes_outputs
from arbor.sandbox.runner import Runner
from arbor.search_tree.records import MeasurementRecord
from arbor.search_tree.store import artifact_sha

from .base import TargetAdapter

# Kernel-template moves edit Python constants; on a replayed config the same move is a knob move.
_AS_KNOB_MOVE = {"const_set": "knob_set", "const_step": "knob_step"}
DEFAULT_PRIOR = 0.5


def _numeric(values: list) -> bool:
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)


def _label(value: object) -> str:
    text = str(value).lower() if isinstance(value, bool) else str(value)
    return re.sub(r"[^A-Za-z0-9_.:-]", "_", text)


def knob_moves(landscape: Landscape, mode: str) -> list[MoveSpec]:
    """The replayed move space. ``recorded`` reuses the recorded campaign's skill moves (ids,
    priors, families) as knob moves; ``neighbours`` steps ordered numeric knobs by one value and
    sets categorical ones; ``any`` sets every knob to every value. Generated moves carry no domain
    knowledge: one prior for all, and each move its own family — the values of one knob are
    alternatives, not correlated arms (an interior optimum makes "up" and "down" answer opposite
    ways), so one's measurement must not lower another's; the same move below another parent is
    still informed by its own (docs/architecture.md#scoring)."""
    if mode == "recorded" and landscape.moves:
        out = []
        for m in landscape.moves:
            params = dict(m.params)
            transform = _AS_KNOB_MOVE.get(m.transform, m.transform)
            if transform != m.transform:
                params["knob"] = params.pop("name")
            out.append(MoveSpec(id=m.id, transform=transform, params=params, prior=m.prior,
                                family=m.family, description=m.description))
        return out
    out = []
    for k in landscape.knobs:
        if len(k.values) < 2:
            continue
        if mode != "any" and _numeric(k.values):
            for step, word in ((1, "up"), (-1, "down")):
                out.append(MoveSpec(id=f"{k.name}:{word}", transform="knob_step", family=f"{k.name}:{word}",
                                    params={"knob": k.name, "values": list(k.values), "step": step},
                                    prior=DEFAULT_PRIOR, description=f"{k.name} one value {word}"))
        else:
            for v in k.values:
                out.append(MoveSpec(id=f"{k.name}:{_label(v)}", transform="knob_set", family=f"{k.name}:{_label(v)}",
                                    params={"knob": k.name, "value": v}, prior=DEFAULT_PRIOR,
                                    description=f"set {k.name} to {v!r}"))
    return out


class ReplaySpecialist(HeuristicKernelSpecialist):
    """The kernel specialist over knob moves, offering only configurations the landscape recorded:
    a landscape that leaves a combination out (compiling an already compiled model) says that move
    does not apply there, as a live transform that returns nothing does."""

    def __init__(self, moves: list[MoveSpec], seed: int, lookup) -> None:  # type: ignore[no-untyped-def]
        super().__init__(moves, seed)
        self._lookup = lookup

    def valid(self, new_source: str) -> bool:
        return self._lookup(new_source) is not None


class ReplayAdapter(TargetAdapter):
    kind = "replay"
    uses_device = False  # a replayed measurement only sleeps its recorded time
    artifact_kind = "config"

    def __init__(self, spec):
        super().__init__(spec)
        self._draws: Counter[str] = Counter()

    @cached_property
    def landscape(self) -> Landscape:
        return load_landscape(self.spec.landscape_path())

    @property
    def seed(self) -> int:
        s = self.spec.target.seed
        return self.spec.agents.seed if s is None else s

    def validate(self) -> None:
        ls = self.landscape
        path = self.spec.landscape_path()
        if ls.point(ls.default_config()) is None:
            raise LandscapeError(f"{path}: the default point {ls.default_config()} was not recorded — "
                                 "re-record the landscape")

    def root_source(self) -> str:
        return canonical_config(self.landscape.default_config())

    def moves(self, skills: list[SkillSpec]) -> list[MoveSpec]:
        return knob_moves(self.landscape, self.spec.target.moves)

    def heuristic_specialist(self, skills: list[SkillSpec], seed: int, store=None):  # type: ignore[no-untyped-def]
        return ReplaySpecialist(self.moves(skills), seed, self.lookup)

    def lookup(self, source: str) -> Point | None:
        cfg = parse_config(source)
        return None if cfg is None else self.landscape.point(cfg)

    def measure(self, runner: Runner, source: str, timeout_s: float | None = None) -> dict:
        result = self.replay_result(source)
        simulate_duration(result, self.spec.target.time_scale)
        return result

    def worker_task(self, source: str):  # type: ignore[no-untyped-def]
        """The draw order lives in this process: draw here, spend only the simulated duration
        on the worker."""
        return partial(_canned, self.replay_result(source), self.spec.target.time_scale)

    def replay_result(self, source: str) -> dict:
        """The next recorded measurement of ``source`` without its simulated duration: a remote
        worker sleeps it instead, while this process keeps the per-artifact draw count."""
        point = self.lookup(source)
        if point is None:
            return _error("harness_error", "configuration is not a point of the landscape "
                          f"{self.landscape.name} (off-grid or not recorded)")
        if point.status != "ok" or not point.runs:
            return _error(point.error_class or "runtime_error", point.error_text or "failed when recorded")
        unchecked = self.unchecked_numerics(point)
        if unchecked:
            return _error("incorrect", f"{', '.join(unchecked)} change the generated tokens and this point "
                          f"was recorded with accuracy {point.accuracy or 'unchecked'}: a replay does not "
                          "accept it on speed alone — record it with the accuracy gate passing")
        sha = artifact_sha(source)
        b, c, seconds = self.landscape.replay(point, self.seed, self._draws[sha])
        self._draws[sha] += 1
        if self.spec.target.pace:
            time.sleep(seconds * self.spec.target.pace)
        seeds = list(self.spec.measurement.seeds)
        return {
            "status": "ok", "error_class": None, "error_text": None,
            "correctness": [{"seed": s, "ok": True, "replayed": True} for s in seeds],
            "baseline_samples": b, "candidate_samples": c,
            "fingerprint": {"replay": self.landscape.name, **self.landscape.recorded.get("machine", {})},
            "duration_s": seconds,
        }

    def unchecked_numerics(self, point: Point) -> list[str]:
        """Serving: the knobs that change numerics (declared or by name, as live campaigns judge
        them) on which ``point`` differs from the default, unless its recorded accuracy passed."""
        if self.landscape.kind != "serving" or point.accuracy == "passed":
            return []
        base = self.landscape.default_config()
        return sorted(n for n, v in point.knobs.items() if v != base.get(n) and changes_outputs(n, None))

    def judge(self, critic, ev: Evidence, m: MeasurementRecord) -> Judgement:
        """The gates on the replayed samples. A *recorded* landscape's points were measured one
        after another over an hour or more, each run paired (reference and config in the same
        rounds), with the machine drifting between them: a point's runs may have a reference 20-30%
        slower than the baseline point's. Live, the Critic tells machine drift from a candidate
        that slows its own reference by measuring the baseline again beside it; a replay cannot —
        its probe is the baseline point's runs, recorded at another time. So for a recorded
        landscape the reference evidence (the baseline's reference time and the probe) is not
        handed to the Critic, and a replayed run is judged on its paired ratio, as a live one is
        once the probe shows the machine slowed — unless its reference lies beyond what the
        landscape itself trusts (``Landscape.trusted_reference_s``), where the Critic sees it as it would
        live. Left in, the recorded Softmax optimum (runs at +19-25%, tolerance 18%) was rejected
        as ``env_drift``, or as ``hack_suspected`` beside a fast probe, in one campaign in five at
        4-8 workers. Hand-written landscapes (no ``recorded``) keep both: that is how the tests
        stage a machine that slowed and a reference taxed by its candidate."""
        if self.landscape.recorded and ev.baseline_reference_s is not None:
            limit = self.landscape.trusted_reference_s
            ref = _median(m.baseline_samples) if m.baseline_samples else None  # a failed point has none
            ev = replace(ev, reference_probe_s=None,
                         baseline_reference_s=ev.baseline_reference_s if ref and limit and ref > limit else None)
        return critic.judge(ev, m.baseline_samples or [], m.candidate_samples or [])

    def static_check(self, critic, source: str) -> Judgement | None:
        """A config is data, not code: the only thing to check is that it is one."""
        if parse_config(source) is None:
            return Judgement("fail", "compile_error", "the artifact is not a JSON object of knob values",
                             "failed", gates=[{"gate": "guard", "passed": False, "reason": "not a config"}])
        return None

    def signature(self, trace: bool = True) -> dict:
        """A replayed landscape is its own problem: the landscape's name stands for its op mix."""
        return {"ops": {f"landscape:{self.landscape.name}": 1.0}, "shapes": [], "dtype": "float32",
                "source": "landscape"}

    def describe(self) -> str:
        ls = self.landscape
        host = ls.recorded.get("machine", {}).get("host", "?")
        return f"replay of landscape {ls.name} ({len(ls.points)} points, recorded on {host})"


def _canned(result: dict, time_scale: float, runner: Runner) -> dict:
    simulate_duration(result, time_scale)
    return result


def simulate_duration(result: dict, time_scale: float) -> None:
    if time_scale > 0 and result.get("duration_s"):
        time.sleep(float(result["duration_s"]) * time_scale)


def _error(error_class: str, text: str) -> dict:
    return {"status": "error", "error_class": error_class, "error_text": text, "correctness": [],
            "baseline_samples": [], "candidate_samples": [], "fingerprint": {}, "duration_s": 0.0}
