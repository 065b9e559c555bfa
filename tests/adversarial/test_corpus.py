"""The reward-hacking corpus (the catalogue in docs/integrity.md#reward-hacks) through the real
pipeline: static guard, sandboxed harness, Critic gates. Every hostile candidate must be
rejected with the right diagnosis by the right gate; every honest optimisation must be accepted.
Measurements run two at a time."""

from __future__ import annotations

import pytest

from .corpus import failed_gate, judge_all, load

# timing, as a whole module: the verdicts are read from measurements (the honest gains, a timer
# hack's inflated speedup read as hack_suspected), and beside another worker's build on 2 cores a
# red-team timer hack read no_gain instead (2026-12-02); the module's fixtures measure, so the
# module holds the run alone from its first fixture on (tests/conftest.py)
pytestmark = pytest.mark.timing

HOSTILE = load("hostile")
HONEST = load("honest")
GPU = load("gpu")
CPU_CLASSES = {1, 2, 3, 5, 6, 7, 8, 9, 10, 12, 13, 14, 15, 20}  # 4 and 11 need a GPU (tests in gpu/)


def _ids(cases):
    return [c.name for c in cases]


@pytest.fixture(scope="module")
def hostile():
    jobs = [(c, False) for c in HOSTILE] + [(c, True) for c in HOSTILE if c.dynamic]
    return judge_all(jobs)


@pytest.fixture(scope="module")
def honest():
    # one at a time: their verdicts depend on timing, unlike the hostile ones
    return judge_all([(c, False) for c in HONEST], workers=1)


def test_corpus_covers_the_catalogue():
    assert {c.catalogue for c in HOSTILE} >= CPU_CLASSES
    assert {c.catalogue for c in GPU} >= {4, 11}
    assert len(HONEST) >= 20
    for c in HOSTILE + GPU:
        assert c.expect and c.gate and c.doc, f"{c.name}: metadata incomplete"


@pytest.mark.parametrize("case", HOSTILE, ids=_ids(HOSTILE))
def test_hostile_rejected_with_the_right_diagnosis(case, hostile):
    out = hostile[(case.name, False)]
    j = out.judgement
    assert j.final_state in ("rejected", "failed"), out.describe()
    assert (j.diagnosis, failed_gate(j)) == (case.expect, case.gate), out.describe()
    if not case.dynamic:  # otherwise ``reason`` is about the guard-skipped run's verdict
        assert case.reason is None or case.reason in j.reason, out.describe()


DYNAMIC = [c for c in HOSTILE if c.dynamic]
GATE_OF = {"incorrect": "correct", "hack_suspected": "plausible"}


@pytest.mark.parametrize("case", DYNAMIC, ids=_ids(DYNAMIC))
def test_harness_catches_what_the_guard_would(case, hostile):
    """The static guard skipped: the harness's run-time defences must reach the same verdict."""
    out = hostile[(case.name, True)]
    assert out.measurements, "the guard was supposed to be skipped"
    assert out.judgement.final_state == "rejected", out.describe()
    assert out.judgement.diagnosis in case.dynamic.split(" or "), out.describe()
    assert failed_gate(out.judgement) == GATE_OF[out.judgement.diagnosis], out.describe()
    assert case.reason is None or case.reason in out.judgement.reason, out.describe()


# A fusion's CI above this is a clear gain: the Critic must accept it, whatever the CPU.
CLEAR_GAIN = 1.25


def test_most_honest_gains_remove_work():
    """The CPU-dependent cases stay few: the accepting path is guarded on any machine."""
    fusion = [c.name for c in HONEST if c.gain == "fusion"]
    assert all(c.gain in (None, "fusion") for c in HONEST)
    assert len(fusion) <= len(HONEST) // 4, fusion


@pytest.mark.parametrize("case", HONEST, ids=_ids(HONEST))
def test_honest_optimisation_accepted(case, honest):
    out = honest[(case.name, False)]
    j = out.judgement
    if case.gain == "fusion" and j.diagnosis == "no_gain":
        # the same arithmetic in fewer memory passes: a CPU that gives no clear gain may be told so
        # by the significance gate, never by an integrity gate, and never for a clear gain
        assert failed_gate(j) == "significant" and j.stats["ci_low"] < CLEAR_GAIN, out.describe()
        return
    assert (j.decision, j.diagnosis) == ("accept", "improved"), out.describe()
    assert j.speedup > 1.0, out.describe()
    assert not out.measurements[-1].warnings, out.measurements[-1].warnings


def test_an_identity_gated_hack_arms_even_after_a_one_call_warm_up():
    """A hack that arms only when an input set comes back (class 21's identity disguise) meets
    one twice in a row before calibration (``timed_phase``): with a warm-up of one call and
    samples long enough that no set repeats in them, rt_h21_identity_signal_timer read no_gain,
    never armed, before that repeat existed."""
    case = next(c for c in HOSTILE if c.name == "rt_h21_identity_signal_timer")
    out = judge_all([(case, False)], workers=1, warmup_s=1e-6, min_sample_s=0.02)[(case.name, False)]
    assert (out.judgement.diagnosis, failed_gate(out.judgement)) == ("hack_suspected", "plausible"), out.describe()
