"""Budgets that hold: with measurements that take real time (a replay paced at its recorded
durations), a campaign stops starting steps that would not fit and ends within 10% of max_wall_s,
its final verification included."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from arbor.campaign.run import run_campaign
from arbor.spec import parse_spec
from arbor.targets.landscape import FORMAT, Landscape


def serial(ctx):  # type: ignore[no-untyped-def]
    """A stand-in context measuring as the serial loop does."""
    from arbor.campaign.serial import SerialMeasurer

    ctx.measurer = SerialMeasurer(ctx)
    return ctx


def _run(speedup: float, s: float, n: int = 12) -> dict:
    return {"b": [1.0 * (1 + 0.01 * ((i % 3) - 1)) for i in range(n)],
            "c": [(1.0 / speedup) * (1 + 0.01 * ((i % 3) - 1)) for i in range(n)], "s": s}


def _landscape(tmp_path: Path, s: float) -> Path:
    values = [str(v) for v in range(8)]
    points = [{"knobs": {"K": v}, "runs": [_run(1.0 + 0.1 * i, s)] * 3} for i, v in enumerate(values)]
    ls = Landscape.model_validate({"format": FORMAT, "name": "paced",
                                   "knobs": [{"name": "K", "values": values, "default": "0"}],
                                   "points": points, "campaign": {"critic": {"max_cv": 0.5}}})
    path = tmp_path / "paced.json"
    ls.dump(path)
    return path


@pytest.mark.timing
def test_wall_budget_overrun_at_most_10_percent(tmp_path):
    landscape = _landscape(tmp_path, s=0.6)
    max_wall = 6.0
    spec = parse_spec({"name": "paced", "target": {"kind": "replay", "landscape": str(landscape), "moves": "any",
                                                   "pace": 1.0},
                       "budget": {"max_evaluations": 100, "max_wall_s": max_wall},
                       "critic": {"max_cv": 0.5, "min_speedup": 1.02, "final_measurements": 3},
                       "store": {"url": f"sqlite:///{tmp_path / 'p.db'}"}}, "<test>", tmp_path)
    events = []
    t0 = time.monotonic()
    summary = run_campaign(spec, lambda kind, data: events.append((kind, data)))
    wall = time.monotonic() - t0
    assert summary.stop_reason.startswith("budget"), summary.stop_reason
    assert summary.elapsed_s <= max_wall * 1.10, (summary.elapsed_s, summary.stop_reason)
    assert wall <= max_wall * 1.10 + 2.0  # + process set-up, which the campaign clock does not count
    measuring = [d for k, d in events if k == "measuring"]
    assert any(d.get("eta_s") is not None for d in measuring) and any(d.get("expected_s") for d in measuring)
    assert summary.verified is not None  # the final verification ran inside the budget


def _mixed_landscape(tmp_path: Path, short: float, long: float) -> Path:
    """Every other point measures four times longer (as a compiled candidate's first measurement
    does beside eager ones), and the better points are the long ones."""
    values = [str(v) for v in range(8)]
    points = [{"knobs": {"K": v}, "runs": [_run(1.0 + 0.1 * i, short if i % 2 == 0 else long)] * 3}
              for i, v in enumerate(values)]
    ls = Landscape.model_validate({"format": FORMAT, "name": "mixed",
                                   "knobs": [{"name": "K", "values": values, "default": "0"}],
                                   "points": points, "campaign": {"critic": {"max_cv": 0.5}}})
    path = tmp_path / "mixed.json"
    ls.dump(path)
    return path


@pytest.mark.timing
@pytest.mark.parametrize("seed", [0, 1])
def test_two_workers_end_inside_max_wall_s(tmp_path, seed):
    """With several workers a step returns as soon as its candidate is on a worker, so the step's
    own fit says nothing: a dispatch must leave room for its confirmation, what is in flight and
    the final verification, each as long as the candidates measured so far can be
    (timing.dispatch_ahead_s). Seen live: 255 s against max_wall_s 210 with two workers."""
    landscape = _mixed_landscape(tmp_path, 0.3, 1.2)
    max_wall = 6.0
    spec = parse_spec({"name": "mixed", "target": {"kind": "replay", "landscape": str(landscape), "moves": "any",
                                                   "time_scale": 1.0, "seed": seed},
                       "budget": {"max_evaluations": 100, "max_wall_s": max_wall},
                       "agents": {"seed": seed},
                       "critic": {"max_cv": 0.5, "min_speedup": 1.02, "final_measurements": 3},
                       "executor": {"workers": 2},
                       "store": {"url": f"sqlite:///{tmp_path / 'p2.db'}"}}, "<test>", tmp_path)
    summary = run_campaign(spec, lambda kind, data: None)
    assert summary.stop_reason.startswith("budget"), summary.stop_reason
    assert summary.elapsed_s <= max_wall, (summary.elapsed_s, summary.stop_reason)
    assert summary.verified is not None and summary.measurements >= 6  # it did use both workers
    assert summary.counts.get("running", 0) == 0


def test_a_compiled_candidate_is_held_to_its_own_kind_of_duration(tmp_path):
    """Compiled candidates pay their compilation in the first measurement (30 s against 7 s eager
    on the quickstart) and load from the compile cache in later ones: the dispatch check reads
    each kind's own history, so a compiled candidate that would end after max_wall_s is held back
    while an eager one still goes."""
    from types import SimpleNamespace

    from arbor.campaign import timing
    from arbor.search_tree import open_store

    store = open_store(f"sqlite:///{tmp_path / 'k.db'}")
    camp = store.get_or_create_campaign("kinds", "kernel", {})
    eager = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x.relu()\n"
    compiled = eager + "\nModelNew = torch.compile\n"

    def node(source: str, parent=None, durations=()):
        n = store.add_node(camp.id, store.put_artifact(source, "kernel_source"), "t", parent_id=parent)
        for attempt, d in enumerate(durations, 1):
            store.record_measurement(n.id, attempt, "primary" if attempt == 1 else "confirm",
                                     {"status": "ok", "duration_s": d}, "local")
        return n

    root = node("# reference\n" + eager, durations=[7.0])
    camp = store.update_campaign(camp.id, root_node_id=root.id)
    node(eager + "# a\n", root.id, [7.0, 7.0])
    node(eager + "# b\n", root.id, [8.0])
    node(compiled + "# c\n", root.id, [30.0, 9.0])
    sources = {}
    ctx = serial(SimpleNamespace(
        store=store, cid=camp.id, campaign=camp, target=SimpleNamespace(verify_best=True),
        spec=SimpleNamespace(critic=SimpleNamespace(confirm_new_best=True, final_measurements=3),
                             budget=SimpleNamespace(max_wall_s=95.0)),
        source=lambda sha: sources.setdefault(sha, store.get_artifact(sha)), flush_elapsed=lambda: 50.0))
    kinds = timing.by_kind(ctx)
    assert kinds["compiled"]["first"] == 30.0 and kinds["compiled"]["ratio"] == 0.3
    assert kinds["eager"]["first"] == 8.0 and kinds["eager"]["ratio"] == 1.0
    # 50 s used of 95: eager 8 + 8 (confirmation) + 8 (final) fits; compiled 30 + 9 + 9 does not
    assert timing.dispatch_fits(ctx, eager + "# new\n") is None
    reason = timing.dispatch_fits(ctx, compiled + "# new\n")
    assert reason is not None and "compiled candidate" in reason
    store.close()


@pytest.mark.parametrize("best_reference, lacks", [(1.0, 1), (1.3, 3)])
def test_the_verification_is_reserved_for_the_measurements_it_will_really_take(tmp_path, best_reference, lacks):
    """The final verification counts only measurements whose reference stayed near the baseline's
    latest (final_count.py). Seen on the quickstart: the best's first, re-measurement and
    confirmation had their reference 16-22% slow (the machine's, as the probe showed, so the Critic
    judged them on their paired ratios), the verification took three measurements (21 s) where one
    (7 s) had been reserved, and the campaign ended at 223 s against max_wall_s 210."""
    from arbor.campaign import timing
    from arbor.search_tree import open_store

    store = open_store(f"sqlite:///{tmp_path / 'v.db'}")
    camp = store.get_or_create_campaign("verify", "kernel", {})
    src = RELU

    def measured(node_id: int, attempt: int, ref: float, cand: float) -> None:
        store.record_measurement(node_id, attempt, "primary", {
            "status": "ok", "duration_s": 7.0, "baseline_samples": [ref] * 12,
            "candidate_samples": [cand] * 12}, "local")

    root = store.add_node(camp.id, store.put_artifact("# reference\n" + src, "kernel_source"), "t")
    measured(root.id, 1, 1.0, 1.0)
    camp = store.update_campaign(camp.id, root_node_id=root.id)
    best = store.add_node(camp.id, store.put_artifact(src + "# best\n", "kernel_source"), "t", parent_id=root.id)
    measured(best.id, 1, best_reference, 0.5)
    measured(best.id, 2, best_reference, 0.5)
    ctx = _verify_ctx(store, camp, best.id)
    assert timing.verify_lacks(ctx, 3) == lacks
    assert timing.expected(ctx)["verify_s"] == pytest.approx(7.0 * lacks)
    store.close()


RELU = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x.relu()\n"


def _node(store, camp_id: int, source: str, parent=None, durations=(), paired: bool = False):  # type: ignore[no-untyped-def]
    """A node with measurements of the given durations: ``paired`` ones carry samples (a 2x
    candidate, each a primary measurement), others a first measurement and confirmations."""
    n = store.add_node(camp_id, store.put_artifact(source, "kernel_source"), "t", parent_id=parent)
    for attempt, d in enumerate(durations, 1):
        result = {"status": "ok", "duration_s": d}
        if paired:
            result.update(baseline_samples=[1.0] * 12, candidate_samples=[0.5] * 12)
        purpose = "primary" if paired or attempt == 1 else "confirm"
        store.record_measurement(n.id, attempt, purpose, result, "local")
    return n


def _verify_ctx(store, camp, best_id: int, **extra):  # type: ignore[no-untyped-def]
    """The serial loop's context as the timing and verification estimates read it."""
    from types import SimpleNamespace

    from arbor.agents.critic.gates import CriticConfig

    budget = extra.pop("budget", None)
    return serial(SimpleNamespace(
        store=store, cid=camp.id, campaign=camp, noise_floor=0.01, step_walls=[],
        target=SimpleNamespace(verify_best=True, reports_times=True),
        index=SimpleNamespace(best=lambda: store.get_node(best_id)),
        critic=SimpleNamespace(config=CriticConfig()),
        spec=SimpleNamespace(critic=SimpleNamespace(final_measurements=3), budget=budget,
                             agents=SimpleNamespace(proposals_per_step=1)), **extra))


def test_the_verification_is_priced_at_the_best_candidates_own_measurements(tmp_path):
    """A candidate that builds a C++ extension in every measurement process costs ~30 s a
    measurement where the campaign's median is ~7 s; priced at the median, the serial loop started
    a step it had no time for and ended 6 s past max_wall_s (l1_02 on the development set)."""
    from arbor.campaign import timing
    from arbor.search_tree import open_store

    store = open_store(f"sqlite:///{tmp_path / 'p.db'}")
    camp = store.get_or_create_campaign("price", "kernel", {})
    root = _node(store, camp.id, RELU + "# reference\n", durations=[7.0], paired=True)
    camp = store.update_campaign(camp.id, root_node_id=root.id)
    for k in range(4):
        _node(store, camp.id, RELU + f"# eager {k}\n", root.id, [7.0], paired=True)
    best = _node(store, camp.id, RELU + "# extension\n", root.id, [31.0, 29.0], paired=True)
    ctx = _verify_ctx(store, camp, best.id)
    assert timing.expected(ctx)["measurement_s"] == 7.0
    assert timing.expected(ctx)["verify_s"] == pytest.approx(29.0 * timing.verify_lacks(ctx, 3))
    assert timing.measurement_s(ctx, best.id) == 29.0 and timing.measurement_s(ctx, root.id + 1) == 7.0
    store.close()


def test_the_serial_loop_leaves_a_candidate_queued_when_its_own_kind_would_not_fit(tmp_path):
    """The serial loop starts a step when the median step fits; a candidate that builds a C++
    extension in every measurement (~30 s each: first, confirmation, final) started at 201 s of
    240 ended a development-set campaign at 315 s. Before its first measurement the candidate's own
    kind is priced; one that would not fit stays queued and its reason becomes the stop reason."""
    from types import SimpleNamespace

    from arbor.campaign import timing
    from arbor.search_tree import open_store

    store = open_store(f"sqlite:///{tmp_path / 'x.db'}")
    camp = store.get_or_create_campaign("ext", "kernel", {})
    eager = RELU
    extension = eager + "from torch.utils.cpp_extension import load_inline\n"

    def node(source: str, parent=None, durations=()):
        return _node(store, camp.id, source, parent, durations)

    root = node("# reference\n" + eager, durations=[7.0])
    camp = store.update_campaign(camp.id, root_node_id=root.id)
    for k in range(3):
        node(eager + f"# {k}\n", root.id, [7.0])
    node(extension + "# built\n", root.id, [30.0, 30.0])
    assert timing.kind_of_source(extension) == "extension" and timing.kind_of_source(eager) == "eager"
    reports = []
    sources = {}
    ctx = serial(SimpleNamespace(
        store=store, cid=camp.id, campaign=camp, target=SimpleNamespace(verify_best=True),
        spec=SimpleNamespace(critic=SimpleNamespace(confirm_new_best=True, final_measurements=3),
                             budget=SimpleNamespace(max_wall_s=240.0)),
        source=lambda sha: sources.setdefault(sha, store.get_artifact(sha)), flush_elapsed=lambda: 201.0,
        report=lambda kind, payload: reports.append((kind, payload))))
    # 201 s used of 240: eager 7 + 7 + 7 fits; an extension 30 + 30 + 30 does not
    fresh_eager = node(eager + "# new\n", root.id)
    fresh_ext = node(extension + "# new\n", root.id)
    deferred = ctx.measurer.deferred
    assert not ctx.measurer.defer_for_time(store.get_node(fresh_eager.id))
    assert ctx.measurer.defer_for_time(store.get_node(fresh_ext.id))
    assert "C++-extension candidate" in deferred[fresh_ext.id] and fresh_eager.id not in deferred
    assert [e.payload["reason"] for e in store.events(camp.id, kinds=["deferred"])] == [deferred[fresh_ext.id]]
    store.close()


def test_the_first_extension_candidate_of_a_campaign_is_priced_with_its_build(tmp_path):
    """Before a campaign has measured any candidate that builds an extension, one is assumed to
    cost an eager measurement plus the build (timing.EXTENSION_BUILD_S), and as much again in each
    later measurement: the first one of l1_13's campaign was priced at 13 s a measurement and ended
    it 43 s past max_wall_s."""
    from types import SimpleNamespace

    from arbor.campaign import timing
    from arbor.search_tree import open_store

    store = open_store(f"sqlite:///{tmp_path / 'f.db'}")
    camp = store.get_or_create_campaign("first", "kernel", {})
    root = _node(store, camp.id, "# reference\n" + RELU, durations=[7.0])
    camp = store.update_campaign(camp.id, root_node_id=root.id)
    sources = {}
    ctx = SimpleNamespace(store=store, cid=camp.id, campaign=camp, source=lambda sha: sources.setdefault(sha, store.get_artifact(sha)))
    kinds = timing.by_kind(ctx)
    assert kinds["extension"]["first"] == 7.0 + timing.EXTENSION_BUILD_S and kinds["extension"]["ratio"] == 1.0
    assert kinds["eager"]["first"] == 7.0
    store.close()


def _replay_spec(tmp_path: Path, name: str, max_evaluations: int):  # type: ignore[no-untyped-def]
    """A replayed campaign with no measurement noise, stored in ``<name>.db``."""
    landscape = _landscape(tmp_path, s=0.0)
    return parse_spec({"name": name, "target": {"kind": "replay", "landscape": str(landscape), "moves": "any"},
                       "budget": {"max_evaluations": max_evaluations, "max_wall_s": 600},
                       "critic": {"max_cv": 0.5, "min_speedup": 1.02, "final_measurements": 3},
                       "store": {"url": f"sqlite:///{tmp_path / f'{name}.db'}"}}, "<test>", tmp_path)


def test_a_serial_campaign_that_leaves_candidates_queued_stops_with_the_reason(tmp_path, monkeypatch):
    """Candidates the serial loop leaves queued for want of time end the campaign with that reason
    once DEFER_LIMIT of them were (each costs a proposal, no measurement), and the loop does not go
    back to measure them (it once spun there for ten minutes on the quickstart, its store's log
    growing); a later run with more time measures them."""
    from arbor.campaign import timing
    from arbor.campaign.measurer import DEFER_LIMIT

    spec = _replay_spec(tmp_path, "defer", max_evaluations=100)
    calls = []
    reason = "budget: a candidate that would not fit (test)"
    monkeypatch.setattr(timing, "dispatch_fits", lambda ctx, source: calls.append(1) or (reason if len(calls) >= 3 else None))
    t0 = time.monotonic()
    summary = run_campaign(spec, lambda kind, data: None)
    assert time.monotonic() - t0 < 60
    assert summary.stop_reason == f"{reason} (and {DEFER_LIMIT - 1} more candidates left queued for want of time)"
    from arbor.search_tree import open_store

    store = open_store(f"sqlite:///{tmp_path / 'defer.db'}")
    camp = store.get_campaign("defer")
    deferred = [e.node_id for e in store.events(camp.id, kinds=["deferred"])]
    assert len(deferred) == DEFER_LIMIT == len(set(deferred)) and len(calls) == 2 + DEFER_LIMIT
    assert all(store.get_node(n).state == "queued" and not store.measurements(n) for n in deferred)
    store.close()
    monkeypatch.setattr(timing, "dispatch_fits", lambda ctx, source: None)
    spec.budget.max_evaluations = 4
    again = run_campaign(spec, lambda kind, data: None)
    store = open_store(f"sqlite:///{tmp_path / 'defer.db'}")
    assert store.measurements(deferred[0]) and again.stop_reason.startswith("budget")


def test_one_candidate_too_expensive_for_the_time_left_does_not_end_the_campaign(tmp_path, monkeypatch):
    """A ReLU campaign once stopped at 60 s of 180 on one candidate priced at 123 s: the loop now
    leaves it queued and measures cheaper ones until the budget ends the campaign."""
    from arbor.campaign import timing

    spec = _replay_spec(tmp_path, "defer1", max_evaluations=5)
    calls = []
    monkeypatch.setattr(timing, "dispatch_fits",
                        lambda ctx, source: calls.append(1) or ("budget: too dear (test)" if len(calls) == 2 else None))
    summary = run_campaign(spec, lambda kind, data: None)
    assert summary.stop_reason.startswith("budget: 5 evaluations"), summary.stop_reason
    from arbor.search_tree import open_store

    store = open_store(f"sqlite:///{tmp_path / 'defer1.db'}")
    camp = store.get_campaign("defer1")
    deferred = [e.node_id for e in store.events(camp.id, kinds=["deferred"])]
    assert len(deferred) == 1 and store.get_node(deferred[0]).state == "queued"
    measured = [n for n in store.nodes(camp.id) if n.parent_id is not None and store.measurements(n.id)]
    assert len(measured) == 5 and deferred[0] not in {n.id for n in measured}
    store.close()
    store.close()


@pytest.mark.parametrize("elapsed, profiled", [(100.0, True), (178.0, False)])
def test_a_new_best_is_profiled_only_when_the_final_verification_still_fits(tmp_path, elapsed, profiled):
    """A profile job imports the candidate as a measurement does (~25 s for one that builds a C++
    extension); profiled at 178 s of 210, the quickstart's new best ended the campaign at 228 s."""
    from types import SimpleNamespace

    from arbor.campaign import steps
    from arbor.search_tree import open_store

    store = open_store(f"sqlite:///{tmp_path / 'q.db'}")
    camp = store.get_or_create_campaign("prof", "kernel", {})
    root = _node(store, camp.id, RELU + "# reference\n", durations=[7.0], paired=True)
    camp = store.update_campaign(camp.id, root_node_id=root.id)
    best = _node(store, camp.id, RELU + "# extension\n", root.id, [27.0, 27.0], paired=True)
    reports = []
    ctx = _verify_ctx(store, camp, best.id, budget=SimpleNamespace(max_wall_s=210.0),
                      flush_elapsed=lambda: elapsed, report=lambda kind, data: reports.append(data["text"]))
    assert steps._time_to_profile(ctx, best.id) is profiled
    assert bool(reports) is not profiled and all("no profile of node" in r for r in reports)
    store.close()
