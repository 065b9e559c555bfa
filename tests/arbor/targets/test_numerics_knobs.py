"""The accuracy gate runs for every candidate that changes numerics, even where the campaign file
forgot ``changes_outputs: true`` on the knob."""

from __future__ import annotations

from pathlib import Path

from arbor.spec import load_spec
from arbor.targets.serving import ServingAdapter

REPO = Path(__file__).resolve().parents[3]


def _adapter(undeclare: bool) -> ServingAdapter:
    spec = load_spec(REPO / "campaigns" / "serving_cpu.yaml")
    if undeclare:
        knobs = {n: k.model_copy(update={"changes_outputs": False}) for n, k in spec.target.knobs.items()}
        spec.target = spec.target.model_copy(update={"knobs": knobs})
    return ServingAdapter(spec)


def test_dtype_change_gets_the_accuracy_probe_declared_or_not():
    for undeclare in (False, True):
        a = _adapter(undeclare)
        base = a.t.defaults()
        assert a.needs_accuracy({**base, "dtype": "bfloat16"})
        assert not a.needs_accuracy({**base, "max_batch_size": 8})
    # a knob the file marks is still honoured (compile is not numerics by name)
    assert _adapter(False).needs_accuracy({**_adapter(False).t.defaults(), "compile": True})
    assert not _adapter(True).needs_accuracy({**_adapter(True).t.defaults(), "compile": True})


def test_every_measurement_of_a_numerics_change_carries_the_probe_resumed_ones_included():
    """The request is built from the stored artifact alone (no purpose, no run state): a resumed
    process, a re-measurement, a confirmation and a final verification all get the probe."""
    import json

    first = _adapter(True)
    source = json.dumps({**first.t.defaults(), "dtype": "bfloat16"})
    resumed = _adapter(True)  # a new process after a kill: a fresh adapter from the same file
    assert first.request(source).accuracy is not None
    assert resumed.request(source).accuracy is not None
    assert resumed.request(resumed.root_source()).accuracy is None  # the baseline's A/A
