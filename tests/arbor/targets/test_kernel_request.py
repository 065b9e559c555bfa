"""The root's A/A is timed more precisely than a candidate: its interval sets the noise floor
every later candidate must clear (issue 41: a 3% floor needs a half-width near 1.5%)."""

from __future__ import annotations

from pathlib import Path

from arbor.spec import load_spec
from arbor.targets import make_adapter

REPO = Path(__file__).resolve().parents[3]


def test_the_root_gets_the_baseline_target_and_twice_the_rounds_a_candidate_does_not():
    spec = load_spec(REPO / "campaigns" / "quickstart.yaml")
    spec.measurement = spec.measurement.model_copy(update={"baseline_target_ci": 0.01, "max_repeats": 150})
    a = make_adapter(spec)
    root = a.request(a.root_source())
    assert (root.target_ci, root.max_repeats) == (0.01, 300)
    cand = a.request(a.root_source().replace("return", "return  ", 1))  # any other source is a candidate
    assert (cand.target_ci, cand.max_repeats) == (0.02, 150)


def test_a_baseline_target_out_of_range_is_a_spec_error_naming_the_field():
    import pytest

    from arbor.spec import SpecError, parse_spec

    import yaml

    data = yaml.safe_load((REPO / "campaigns" / "quickstart.yaml").read_text())
    data["measurement"]["baseline_target_ci"] = 0
    with pytest.raises(SpecError, match="baseline_target_ci"):
        parse_spec(data, "quickstart.yaml", REPO / "campaigns")
