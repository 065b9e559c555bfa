"""Campaigns with several measurements in flight (executor.workers > 1), on the local executor."""

from __future__ import annotations

import pytest

import arbor.campaign.parallel as parallel
from arbor.campaign.run import run_campaign
from arbor.spec_runners import slot_runner_factory
from arbor.sandbox.executors import Done, LocalExecutor, plan_slots

from .parallel_helpers import assert_nothing_lost_or_doubled, replay_spec, rows


def _events(kinds):
    seen = []
    return seen, (lambda kind, data: seen.append((kind, data)) if kind in kinds else None)


def test_three_workers_overlap_stay_in_budget_and_verify(tmp_path):
    spec = replay_spec(tmp_path, "par3", workers=3, max_evaluations=8)
    seen, report = _events({"measuring"})
    s = run_campaign(spec, report)
    db = tmp_path / "arbor.db"
    assert s.stop_reason.startswith("budget: 8 evaluations"), s.stop_reason
    assert s.verified is not None and s.speedup > 1.0  # final verification ran on the workers
    assert_nothing_lost_or_doubled(db)
    distinct = rows(db, "SELECT COUNT(DISTINCT m.node_id) FROM measurements m JOIN nodes n ON n.id = m.node_id "
                        "WHERE n.parent_id IS NOT NULL")[0][0]
    assert distinct == 8  # work in flight counts against the budget: no overshoot
    workers = {d["worker"] for _, d in seen if d.get("worker")}
    assert len(workers) == 3  # every slot measured
    assert rows(db, "SELECT payload FROM events WHERE kind='executor'")  # the run says how it measured


def test_workers_1_is_the_serial_loop(tmp_path):
    spec = replay_spec(tmp_path, "serial", workers=1, max_evaluations=3)
    seen, report = _events({"measuring"})
    run_campaign(spec, report)
    assert all("worker" not in d for _, d in seen)
    assert rows(tmp_path / "arbor.db", "SELECT COUNT(*) FROM events WHERE kind='executor'") == [(0,)]


class _LosesFirstResult(LocalExecutor):
    """A worker that dies mid-measurement: the first task's result never arrives."""

    def _collect(self, timeout):
        out = super()._collect(timeout)
        for i, d in enumerate(out):
            if not getattr(self, "_lost_one", False) and d.result is not None and d.key != 1:
                self._lost_one = True
                out[i] = Done(d.key, d.worker, lost=f"{d.worker} died mid-measurement (test)")
        return out


def test_a_lost_worker_requeues_its_node_once_and_loses_nothing(tmp_path, monkeypatch):
    def open_losing(ctx):
        return _LosesFirstResult(plan_slots(2, "none"), slot_runner_factory(ctx.spec))

    monkeypatch.setattr(parallel, "open_executor", open_losing)
    spec = replay_spec(tmp_path, "lost", workers=2, max_evaluations=5)
    s = run_campaign(spec, lambda *a: None)
    db = tmp_path / "arbor.db"
    lost = rows(db, "SELECT node_id, json_extract(payload, '$.requeued') FROM events WHERE kind='worker_lost'")
    assert len(lost) == 1 and lost[0][1] == 1
    nid = lost[0][0]
    assert rows(db, f"SELECT attempt, purpose FROM measurements WHERE node_id={nid} AND attempt=1") == [(1, "primary")]
    assert_nothing_lost_or_doubled(db)
    assert s.stop_reason.startswith("budget: 5 evaluations")


def test_too_many_local_workers_is_one_line(tmp_path):
    from arbor.sandbox.runner import SandboxError

    from arbor.spec import load_spec

    from .parallel_helpers import REPO

    k = load_spec(REPO / "campaigns" / "quickstart.yaml")
    k.store.url = f"sqlite:///{tmp_path / 'k.db'}"
    k.executor = k.executor.model_copy(update={"workers": 64})
    with pytest.raises(SandboxError, match=r"executor.workers=64 .* lower executor.workers"):
        run_campaign(k, lambda *a: None)


def test_the_baselines_children_are_measured_while_it_is_and_judged_after_it(tmp_path):
    spec = replay_spec(tmp_path, "early", workers=4, max_evaluations=6, time_scale=0.05)
    seen, report = _events({"measuring", "verdict"})
    s = run_campaign(spec, report)
    order = [(kind, d["node"].parent_id is None) for kind, d in seen]
    root_verdict = order.index(("verdict", True))
    before = order[:root_verdict]
    assert ("measuring", False) in before  # a candidate started while the baseline was measured
    assert ("verdict", False) not in before  # but nothing was judged before the baseline's noise floor
    assert s.stop_reason.startswith("budget: 6 evaluations")
    assert_nothing_lost_or_doubled(tmp_path / "arbor.db")


def test_no_early_start_when_the_baselines_verdict_brings_advice():
    from types import SimpleNamespace as NS

    par = parallel.Parallel.__new__(parallel.Parallel)
    for profiles, on, knowledge, early in ((False, True, None, True), (True, True, None, False),
                                           (True, False, None, True),  # profiles switched off: no advice
                                           (False, True, NS(enabled=True), False),
                                           (False, True, NS(enabled=False), True)):
        par.ctx = NS(target=NS(profiles=profiles), spec=NS(knowledge=knowledge, measurement=NS(profile=on)))
        assert par.early_start() is early, (profiles, on, knowledge)


def test_free_workers_take_the_bests_missing_final_measurements():
    from types import SimpleNamespace as NS

    from arbor.campaign.verify import verify_ahead

    started, flying = [], {7: 0}

    class Workers(parallel.Parallel):  # the scheduler's own count, over five free workers
        def __init__(self, ctx):  # type: ignore[no-untyped-def]
            self.ctx, self.executor = ctx, NS(free_slots=lambda: 5)

        def finals_in_flight(self, nid: int) -> int:
            return flying[nid]

        def submit_final(self, nid: int) -> None:
            started.append(nid)
            flying[nid] += 1

    best = NS(id=7, parent_id=1)
    ctx = NS(spec=NS(critic=NS(final_measurements=4)), target=NS(verify_best=True),
             index=NS(best=lambda: best), store=NS(measurements=lambda nid: [NS(status="ok"), NS(status="ok")]))
    ctx.measurer = Workers(ctx)
    assert verify_ahead(ctx) == 2 and started == [7, 7]  # 4 wanted, 2 measured: the 2 missing start now
    assert verify_ahead(ctx) == 0  # already in flight: never more than the verification needs
    best.parent_id = None
    flying[7] = 0
    assert verify_ahead(ctx) == 0  # the baseline is not verified


def test_final_measurements_taken_ahead_are_unique_and_complete_the_verification(tmp_path):
    spec = replay_spec(tmp_path, "ahead", workers=4, max_evaluations=10, time_scale=0.02)
    s = run_campaign(spec, lambda *a: None)
    db = tmp_path / "arbor.db"
    assert_nothing_lost_or_doubled(db)
    assert s.verified is not None
    best = s.verified["node_id"]
    ok = rows(db, f"SELECT COUNT(*) FROM measurements WHERE node_id={best} AND status='ok'")[0][0]
    assert ok >= spec.critic.final_measurements


def test_workers_with_nothing_judged_to_expand_take_children_of_nodes_in_flight(tmp_path):
    # the softmax landscape's baseline has 5 moves: with 8 workers, 2 would idle for a whole round
    spec = replay_spec(tmp_path, "bets", workers=8, max_evaluations=10, time_scale=0.05)
    seen, report = _events({"measuring", "verdict"})
    run_campaign(spec, report)
    judged, bets = set(), []
    for kind, d in seen:
        n = d["node"]
        if kind == "verdict":
            judged.add(n.id)
        elif d.get("purpose") == "primary" and n.parent_id is not None and n.parent_id not in judged:
            bets.append(n)
    root = min(d["node"].id for _, d in seen)
    assert any(n.parent_id != root for n in bets)  # a child of a candidate still being measured
    assert_nothing_lost_or_doubled(tmp_path / "arbor.db")


def test_the_leading_node_keeps_half_the_workers_on_its_children():
    from types import SimpleNamespace as NS

    par = parallel.Parallel.__new__(parallel.Parallel)
    pending = {"n": 0}
    idx = NS(leading_row=lambda: 3, node=lambda row: NS(id=30), is_expandable=lambda row: True,
             pending_children=lambda nid: pending["n"])
    par.ctx, par.executor = NS(index=idx), NS(workers=8)
    assert par.focus_row() == 3
    pending["n"] = 3
    assert par.focus_row() == 3
    pending["n"] = 4  # its share (half of 8) is in flight: the policy picks freely
    assert par.focus_row() is None
    pending["n"] = 0
    par.executor = NS(workers=2)  # too few workers to split
    assert par.focus_row() is None
    par.executor = NS(workers=8)
    idx.is_expandable = lambda row: False  # nothing left to try there
    assert par.focus_row() is None


def _drifting_landscape(tmp_path):
    """Every point but the default runs its reference 60% slower, more than its speedup (1.1-1.5x
    beside it) owes to anything else: each candidate's reference drifts (as a candidate that taxes
    the reference in its own process makes it, for a speedup that exists only through it), so each is
    re-measured after a fresh measurement of the baseline — which takes twice
    as long as a candidate's, so a candidate measured beside it lands first and must wait."""
    from arbor.targets.landscape import FORMAT, Landscape

    def run(ref, speedup, s):
        return {"b": [ref * (1 + 0.004 * (i % 3)) for i in range(12)],
                "c": [ref / speedup * (1 + 0.004 * (i % 3)) for i in range(12)], "s": s}

    values = [str(v) for v in range(6)]
    points = [{"knobs": {"K": v}, "runs": [run(1e-3, 1.0, 2.0) if i == 0 else run(1.6e-3, 1.0 + 0.1 * i, 1.0)] * 3}
              for i, v in enumerate(values)]
    ls = Landscape.model_validate({"format": FORMAT, "name": "drift", "campaign": {"critic": {"max_cv": 0.5}},
                                   "knobs": [{"name": "K", "values": values, "default": "0"}], "points": points})
    path = tmp_path / "drift.json"
    ls.dump(path)
    return path


@pytest.mark.parametrize("workers", [2, 4])
def test_a_drifted_reference_is_measured_again_before_the_candidate_is_judged(tmp_path, workers):
    """The serial loop measures the baseline again before a re-measurement the `reference` gate
    asked for; with several workers too — beside it on another free worker, else first on the
    same one — and the candidate is judged only once that measurement has landed."""
    from arbor.spec import parse_spec

    from benchmarks.virtual_time import VirtualClock, virtual_campaigns

    spec = parse_spec({"name": "drift", "target": {"kind": "replay", "landscape": str(_drifting_landscape(tmp_path)),
                                                   "moves": "any", "time_scale": 0.0},
                       "budget": {"max_evaluations": 4, "max_wall_s": 1e6},
                       "critic": {"max_cv": 0.5, "max_remeasures": 1, "reference_drift": 0.2},
                       "executor": {"workers": workers},
                       "store": {"url": f"sqlite:///{tmp_path / 'arbor.db'}"}}, "<drift>", tmp_path)
    with virtual_campaigns(VirtualClock(), workers):
        run_campaign(spec, lambda *a: None)
    db = tmp_path / "arbor.db"
    assert_nothing_lost_or_doubled(db)
    probes = rows(db, "SELECT json_extract(payload, '$.for_node'), json_extract(payload, '$.attempt') "
                      "FROM events WHERE kind='reference_reprobe'")
    remeasured = rows(db, "SELECT node_id FROM measurements WHERE purpose='remeasure'")
    # one probe before each re-measurement: the drift's, then the one that sees the slowdown repeat
    assert remeasured and sorted(n for n, _ in probes) == sorted(n for (n,) in remeasured)
    last_probe = {nid: attempt for nid, attempt in sorted(probes, key=lambda p: p[1])}
    for nid, attempt in last_probe.items():
        fresh = rows(db, f"SELECT m.created_at FROM measurements m JOIN nodes n ON n.id = m.node_id "
                         f"WHERE n.parent_id IS NULL AND m.attempt = {attempt} AND m.purpose = 'reference'")[0][0]
        judged = rows(db, f"SELECT created_at, decision, diagnosis FROM verdicts WHERE node_id = {nid} "
                          "ORDER BY id DESC LIMIT 1")[0]
        # the fresh probe measured the reference alone at its old speed: slower only beside the
        # candidate is the candidate's doing (docs/integrity.md, the reference gate)
        assert judged[0] > fresh and judged[1:] == ("reject", "hack_suspected")
