"""A reference that runs slow in a candidate's measurement (``env_drift``) makes the loop measure
the baseline again before the candidate's re-measurement: a machine that slowed down after the
baseline no longer rejects every later candidate, while a candidate that slows its own process's
reference is still rejected (replayed, so it takes seconds)."""

from __future__ import annotations

from pathlib import Path

from arbor.campaign.one_number import paired_estimate
from arbor.campaign.run import run_campaign
from arbor.targets.landscape import FORMAT, Landscape
from arbor.search_tree import open_store
from arbor.spec import parse_spec

CRITIC = {"max_cv": 0.5, "min_speedup": 1.02, "max_remeasures": 1, "confirm_new_best": False,
          "final_measurements": 1}


def _run(b: float, c: float, n: int = 12) -> dict:
    return {"b": [b * (1 + 0.01 * ((i % 3) - 1)) for i in range(n)], "c": [c * (1 + 0.01 * ((i % 3) - 1)) for i in range(n)]}


def _landscape(tmp_path: Path, root_runs: list[dict]) -> Landscape:
    """Default K=A; K=B runs 2x faster than a reference that takes 1.8 s in its measurements."""
    return Landscape.model_validate({
        "format": FORMAT, "name": "drift",
        "knobs": [{"name": "K", "values": ["A", "B"], "default": "A"}],
        "points": [{"knobs": {"K": "A"}, "runs": root_runs},
                   {"knobs": {"K": "B"}, "runs": [_run(1.8, 0.9)] * 3}],
        "campaign": {"critic": CRITIC, "measurement": {"seeds": [0]}},
    })


_FIRST: dict = {}  # tmp_path -> the candidate's first verdict's diagnosis


def _campaign(tmp_path: Path, ls: Landscape, critic: dict = CRITIC):  # type: ignore[no-untyped-def]
    root = ls.point({"K": "A"})
    # a seed whose first replay of the baseline is its fast (1.0 s) run: the slowdown comes later
    seed = next(s for s in range(50) if max(ls.replay(root, s, 0)[0]) < 1.1)
    path = tmp_path / "drift.json"
    ls.dump(path)
    spec = parse_spec({
        "name": "drift", "target": {"kind": "replay", "landscape": str(path), "seed": seed, "moves": "any"},
        "budget": {"max_evaluations": 3}, "critic": critic,
        "store": {"url": f"sqlite:///{tmp_path / 'd.db'}"},
    }, "<test>", tmp_path)
    summary = run_campaign(spec, lambda *a: None)
    store = open_store(spec.store_url())
    try:
        camp = store.get_campaign("drift")
        cand = next(n for n in store.nodes(camp.id) if n.parent_id is not None)
        root_purposes = [m.purpose for m in store.measurements(camp.root_node_id)]
        reprobes = store.events(camp.id, limit=100, kinds=["reference_reprobe"])
        _FIRST[tmp_path] = store.verdicts(cand.id)[0].diagnosis
        return summary, cand, root_purposes, reprobes
    finally:
        store.close()


def test_a_machine_slowed_after_the_baseline_is_reprobed_and_the_candidate_judged(tmp_path):
    summary, cand, root_purposes, reprobes = _campaign(tmp_path, _landscape(tmp_path, [_run(1.0, 1.0), _run(1.8, 1.8)]))
    assert root_purposes[:2] == ["primary", "reference"]
    assert reprobes and reprobes[0].payload["before_s"] < 1.1 < reprobes[0].payload["after_s"]
    assert cand.state == "accepted" and 1.9 < cand.speedup < 2.1  # the paired ratio, unbiased
    assert summary.speedup and summary.speedup > 1.9


def _with_candidate(ls: Landscape, runs: list[dict]) -> Landscape:
    return Landscape.model_validate({**ls.model_dump(mode="json"),
                                     "points": [ls.points[0].model_dump(mode="json"),
                                                {"knobs": {"K": "B"}, "runs": runs}]})


def test_a_candidate_that_slows_its_own_reference_is_named_a_hack(tmp_path):
    """The fresh baseline runs at its usual 1.0 s: the slow reference (1.8 s) was the candidate's
    doing, and its 1.8x exists only through it (the candidate runs at 1.0 s, as the reference does
    alone): the diagnosis says so with the factor instead of blaming the machine (issue 27)."""
    ls = _with_candidate(_landscape(tmp_path, [_run(1.0, 1.0)] * 2), [_run(1.8, 1.0)] * 3)
    summary, cand, root_purposes, reprobes = _campaign(tmp_path, ls)
    assert "reference" in root_purposes and reprobes and reprobes[0].payload["after_s"] < 1.1
    assert cand.state == "rejected" and cand.diagnosis == "hack_suspected"
    assert "reference slowed inside the candidate's process (x1.80)" in cand.reason
    assert "seen before too (x1.80)" in cand.reason  # named only once it repeated
    assert "the speedup exists only through it" in cand.reason
    assert root_purposes.count("reference") == 2  # a fresh probe before each look
    assert (summary.speedup or 1.0) == 1.0


def test_a_speedup_that_survives_without_the_slowdown_is_kept_at_the_lower_figure(tmp_path):
    """The reference runs 1.8 s beside the candidate at both looks, 1.0 s alone; the candidate runs
    at 0.9 s. Whether its process slowed the reference or the load moved between the sandboxes
    twice (a compiled honest twin read x1.34 then x1.20 on a loaded CI box), the speedup against the
    reference alone is 1.11x, which clears the bar: accepted at 1.11x, never at the 2x it read
    beside its slowed reference — a tax gains nothing."""
    summary, cand, root_purposes, reprobes = _campaign(tmp_path, _landscape(tmp_path, [_run(1.0, 1.0)] * 2))
    assert cand.state == "accepted" and 1.09 < cand.speedup < 1.13, (cand.diagnosis, cand.reason)
    assert "as it runs alone (2.000x beside the candidate" in cand.reason and "x1.80 slower" in cand.reason
    assert root_purposes.count("reference") == 2
    assert summary.speedup and summary.speedup < 1.13
    store = open_store(f"sqlite:///{tmp_path / 'd.db'}")
    try:  # the times shown beside that number are the ones it was judged on
        ref_s, cand_s, (lo, hi) = paired_estimate(store, cand.id, cand.speedup)
    finally:
        store.close()
    assert 0.97 < ref_s < 1.03 and 0.88 < cand_s < 0.92 and lo <= cand.speedup <= hi


def test_a_slowdown_beside_the_candidate_seen_once_is_looked_at_again_not_named(tmp_path):
    """An honest candidate whose reference read slow twice in a row (once against the baseline,
    once against the fresh probe: a load that moved between the two sandboxes, as on a loaded
    2-core CI box, where an honest red-team twin read x1.26 against a 20% tolerance) is measured
    once more beside a new probe; its reference is back at 1.0 s there, so it is judged on its
    paired ratio — not named a hack on one comparison of two moments."""
    ls = _landscape(tmp_path, [_run(1.0, 1.0)] * 3)
    cand = ls.points[1]
    order = list(range(3))
    import random
    random.Random(f"0:{ls.key(cand.knobs)}").shuffle(order)  # the replay's order under seed 0
    runs = [_run(1.8, 0.9)] * 3
    runs[order[2]] = _run(1.0, 0.5)  # the third look: the reference as fast as alone, still 2x
    summary, cand, root_purposes, reprobes = _campaign(tmp_path, _with_candidate(ls, runs))
    assert cand.state == "accepted" and 1.9 < cand.speedup < 2.1, (cand.diagnosis, cand.reason)
    assert root_purposes.count("reference") == 2


def _recorded(tmp_path: Path, root_runs: list[dict], cand_runs: list[dict]) -> Landscape:
    ls = _landscape(tmp_path, root_runs).model_dump(mode="json")
    ls["points"][1]["runs"] = cand_runs
    return Landscape.model_validate({**ls, "recorded": {"machine": {"host": "vm"}}})


def test_a_recorded_landscape_judges_a_drifted_run_on_its_paired_ratio(tmp_path):
    """A *recorded* landscape: configs measured one after another while the machine drifted, so a
    point's runs may have a reference 25% slower than the baseline point's (beyond the Critic's
    tolerance). A replay cannot measure the baseline beside them (its probe is a run from another
    time), so the run is judged on its paired ratio, as a live one is once the probe shows the
    machine slowed — not rejected as env_drift or named a hack (the recorded Softmax optimum was,
    in one campaign in five at 4-8 workers)."""
    ls = _recorded(tmp_path, [_run(1.0, 1.0)] * 2, [_run(1.25, 0.625)] * 3)
    summary, cand, root_purposes, reprobes = _campaign(tmp_path, ls)
    assert cand.state == "accepted" and 1.9 < cand.speedup < 2.1, (cand.diagnosis, cand.reason)


def test_a_recorded_run_the_landscape_distrusts_still_meets_the_reference_gate(tmp_path):
    """Beyond the landscape's own trusted reference (1.5x its typical one), a run's ratio is
    inflated by its slow reference: the Critic sees the drift as it would live."""
    ls = _recorded(tmp_path, [_run(1.0, 1.0)] * 4, [_run(3.0, 1.5)] * 3)
    summary, cand, root_purposes, reprobes = _campaign(tmp_path, ls)
    assert cand.state == "rejected" and cand.diagnosis == "env_drift", (cand.diagnosis, cand.reason)


def test_a_recorded_point_that_failed_is_judged_a_failure(tmp_path):
    """A recorded config that crashed has no samples: it fails as recorded (no reference to read)."""
    ls = _landscape(tmp_path, [_run(1.0, 1.0)] * 2).model_dump(mode="json")
    ls["points"][1] = {"knobs": {"K": "B"}, "status": "error", "error_class": "runtime_error", "error_text": "boom"}
    summary, cand, root_purposes, reprobes = _campaign(
        tmp_path, Landscape.model_validate({**ls, "recorded": {"machine": {"host": "vm"}}}))
    assert cand.state == "failed" and cand.diagnosis == "runtime_error"


def _taxed(n: int = 12) -> dict:
    """A reference slowed by a tax that varies from round to round (1.3-2.3 s), a steady candidate:
    the paired ratios scatter (``unstable``) and the reference is slow."""
    return {"b": [1.3 + (i * 7 % 11) / 10 for i in range(n)], "c": [0.9] * n}


def test_a_spread_from_a_reference_tax_is_named_not_called_unstable(tmp_path):
    """Issue 27: before calling a spread ``unstable``, the loop measures the baseline alone; it runs
    at its usual 1.0 s, so the slow, scattered reference lives in the candidate's process."""
    critic = {**CRITIC, "max_cv": 0.05, "max_ci_halfwidth": 0.01}
    ls = Landscape.model_validate({
        "format": FORMAT, "name": "drift",
        "knobs": [{"name": "K", "values": ["A", "B"], "default": "A"}],
        "points": [{"knobs": {"K": "A"}, "runs": [_run(1.0, 1.0)] * 2}, {"knobs": {"K": "B"}, "runs": [_taxed()] * 3}],
        "campaign": {"critic": critic, "measurement": {"seeds": [0]}},
    })
    summary, cand, root_purposes, reprobes = _campaign(tmp_path, ls, critic)
    assert _FIRST[tmp_path] == "unstable"  # the stable gate asked for the probe, not the reference gate
    assert "reference" in root_purposes and reprobes
    assert cand.state == "rejected" and cand.diagnosis == "hack_suspected", (cand.diagnosis, cand.reason)
    assert "reference slowed inside the candidate's process" in cand.reason
