"""A new kind of target is an adapter plus a spec model, registered in one call: the loop, the
agents' wiring, final verification, the summary and the report run it without naming it."""

from __future__ import annotations

import random
from typing import ClassVar, Literal

import pytest
from pydantic import Field

from arbor.agents.skills import MoveSpec
from arbor.agents.transforms.knobs import canonical_config, parse_config
from arbor.campaign.run import run_campaign
from arbor.search_tree import open_store
from arbor.spec import SpecError, TargetModel, parse_spec
from arbor.targets import TargetAdapter, make_adapter, register_target_kind, traits, unregister_target_kind

LEVELS = [0, 1, 2, 3, 4]


class DialTarget(TargetModel):
    """A dial whose every notch makes a synthetic workload 20% faster."""

    kind: Literal["dial"]
    gain: float = Field(default=0.2, gt=0)
    summary: ClassVar[str] = "a toy dial"


class DialAdapter(TargetAdapter):
    kind = "dial"
    artifact_kind = "dial_config"
    best_artifact_name = "best_dial.json"

    def validate(self) -> None:
        pass

    def root_source(self) -> str:
        return canonical_config({"notch": 0})

    def moves(self, skills) -> list[MoveSpec]:
        return [MoveSpec(id=f"notch:{w}", transform="knob_step", family="notch", prior=0.5,
                         params={"knob": "notch", "values": LEVELS, "step": s}, description=f"notch {w}")
                for s, w in ((1, "up"), (-1, "down"))]

    limits: ClassVar[list] = []  # the job limits the loop passed

    def measure(self, runner, source: str, timeout_s=None) -> dict:
        self.limits.append(timeout_s)
        notch = parse_config(source)["notch"]
        rng = random.Random(notch)
        base = [1e-3 * (1 + rng.gauss(0, 0.01)) for _ in range(30)]
        cand = [b / (1 + self.spec.target.gain * notch) for b in base]
        return {"status": "ok", "error_class": None, "error_text": None,
                "correctness": [{"seed": s, "ok": True} for s in self.spec.measurement.seeds],
                "baseline_samples": base, "candidate_samples": cand, "fingerprint": {"dial": True},
                "duration_s": 0.0}

    def judge(self, critic, ev, m):
        return critic.judge(ev, m.baseline_samples or [], m.candidate_samples or [])

    def static_check(self, critic, source: str):
        return None


@pytest.fixture
def dial():
    register_target_kind(DialTarget, DialAdapter)
    yield
    unregister_target_kind("dial")


def test_a_registered_kind_runs_a_whole_campaign(dial, tmp_path):
    spec = parse_spec({"name": "dial", "target": {"kind": "dial", "gain": 0.25},
                       "budget": {"max_evaluations": 6, "max_wall_s": 120},
                       "critic": {"min_speedup": 1.02, "max_cv": 0.5, "final_measurements": 2}},
                      "dial.yaml", tmp_path)
    assert isinstance(spec.target, DialTarget) and spec.objective.metric == "latency"
    assert isinstance(make_adapter(spec), DialAdapter)
    summary = run_campaign(spec, lambda kind, data: None)
    store = open_store(spec.store_url())
    try:
        camp = store.get_campaign("dial")
        assert camp.kind == "dial"
        best = store.get_node(summary.best_node)
        assert parse_config(store.get_artifact(best.artifact_sha))["notch"] >= 2
    finally:
        store.close()
    assert summary.speedup > 1.4 and summary.verified is not None  # final verification ran on it
    assert summary.best_path.endswith("best_dial.json")
    assert traits("dial") is DialAdapter
    # every job was limited to what was left of max_wall_s: a slow build cannot overrun it
    assert DialAdapter.limits and all(30.0 <= t <= 120 for t in DialAdapter.limits)


def test_an_unregistered_kind_is_one_line_naming_the_known_ones(tmp_path):
    with pytest.raises(SpecError) as err:
        parse_spec({"name": "x", "target": {"kind": "dial"}}, "x.yaml", tmp_path)
    assert "use kernel, serving or replay" in str(err.value) and "dial" not in str(err.value).split("use ")[-1]
    assert traits("dial") is TargetAdapter  # a store written elsewhere still reads with defaults
