"""The final verification when the machine's speed moved after the baseline: a drifted final
measurement makes it measure the baseline again (so the rule counts measurements against the
machine as it is now), and retries stop at ``max_wall_s``. Seen live: a two-worker quickstart's
contender was measured three times at a reference +15% from the baseline's, none counted, and
the campaign ended at 233 s of 210. A scripted target and a fake clock: it takes milliseconds."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from arbor.agents.critic.gates import CriticConfig
from arbor.campaign.verify import run_final_verification
from arbor.search_tree import open_store

SRC = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x.relu()\n"
SECONDS = 20.0  # every measurement, on the fake clock


def serial(ctx):  # type: ignore[no-untyped-def]
    """A stand-in context measuring as the serial loop does."""
    from arbor.campaign.serial import SerialMeasurer

    ctx.measurer = SerialMeasurer(ctx)
    return ctx


def _paired(ref: float, speedup: float) -> dict:
    return {"status": "ok", "duration_s": SECONDS, "baseline_samples": [ref] * 12,
            "candidate_samples": [ref / speedup] * 12, "correctness": [], "fingerprint": {}}


class Machine:
    """A target whose reference now runs at ``ref`` (the baseline measured at 1.0), on a clock
    that each measurement moves by ``SECONDS``."""

    def __init__(self, ref: float, speedups: dict[str, float]):
        self.ref, self.speedups, self.clock, self.calls = ref, speedups, 0.0, []

    def measure(self, runner, source: str, timeout_s=None) -> dict:  # type: ignore[no-untyped-def]
        self.clock += SECONDS
        self.calls.append(source)
        return _paired(self.ref, self.speedups.get(source, 1.0))


def _accepted(store, camp_id: int, source: str, parent, speedups: list[float], ref: float = 1.0):  # type: ignore[no-untyped-def]
    n = store.add_node(camp_id, store.put_artifact(source, "kernel_source"), "t", parent_id=parent)
    store.transition(n.id, "queued")
    store.start_running(n.id, "o")
    ms = [store.record_measurement(n.id, i, "primary" if i == 1 else "confirm", _paired(ref, s), "local")
          for i, s in enumerate(speedups, 1)]
    value = min(speedups)
    store.record_verdict(n.id, ms[0].id, "accept", "improved" if parent else "baseline", "ok", [],
                         final_state="accepted", value=value, speedup=value)
    return store.get_node(n.id)


def _campaign(tmp_path, ref_now: float, max_wall_s: float, elapsed: float):  # type: ignore[no-untyped-def]
    store = open_store(f"sqlite:///{tmp_path / 'v.db'}")
    camp = store.get_or_create_campaign("drift", "kernel", {})
    root = _accepted(store, camp.id, SRC + "# reference\n", None, [1.0])
    camp = store.update_campaign(camp.id, root_node_id=root.id)
    best = _accepted(store, camp.id, SRC + "# best\n", root.id, [6.60, 6.61])
    # measured later, when the machine had slowed by 10% (inside the tolerance)
    contender = _accepted(store, camp.id, SRC + "# contender\n", root.id, [6.86, 6.53], ref=1.10)
    machine = Machine(ref_now, {SRC + "# reference\n": 1.0, SRC + "# best\n": 6.6, SRC + "# contender\n": 6.85})
    start = machine.clock
    ctx = serial(SimpleNamespace(
        store=store, cid=camp.id, campaign=camp, noise_floor=0.01, step_walls=[],
        owner="o", heartbeat_s=60.0, runner=SimpleNamespace(name="local"),
        report=lambda kind, data: None, source=store.get_artifact,
        flush_elapsed=lambda: elapsed + machine.clock - start,
        target=SimpleNamespace(verify_best=True, reports_times=True, measure=machine.measure),
        index=SimpleNamespace(best=lambda: store.get_node(best.id)),
        critic=SimpleNamespace(config=CriticConfig()),
        spec=SimpleNamespace(critic=SimpleNamespace(final_measurements=3),
                             budget=SimpleNamespace(max_wall_s=max_wall_s), runs_dir=lambda: tmp_path / "runs",
                             agents=SimpleNamespace(proposals_per_step=1))))
    return ctx, machine, best, contender


def test_a_machine_that_slowed_after_the_baseline_is_probed_once_and_the_verification_counts(tmp_path):
    """Reference +16% (beyond the 15% tolerance): the first final measurement drifts, the
    baseline is measured again, and from then on the measurements count against the fresh
    baseline, the best's and the contender's alike — no measurement wasted on a stale rule."""
    ctx, machine, best, contender = _campaign(tmp_path, ref_now=1.16, max_wall_s=10_000, elapsed=0.0)
    out = run_final_verification(ctx)
    probes = [e for e in ctx.store.events(ctx.cid, kinds=["reference_reprobe"])]
    assert len(probes) == 1 and probes[0].payload["after_s"] == pytest.approx(1.16)
    nodes = {v["node_id"]: v for v in out["nodes"]}
    assert nodes[best.id]["speedup"] == pytest.approx(6.6) and not nodes[best.id]["failed"]
    assert nodes[contender.id]["speedup"] == pytest.approx(6.85) and out["best"] == contender.id
    assert nodes[contender.id]["speedups"] == pytest.approx([6.86, 6.53, 6.85])
    # the best's earlier measurements (reference 1.0) no longer count against a 1.16 baseline: its
    # drifted final, the probe, two more; the contender's (1.10) still do: one more
    assert len(machine.calls) == 1 + 1 + 2 + 1
    ctx.store.close()


def test_retries_stop_at_max_wall_s_and_keep_what_counted(tmp_path):
    """Out of time after the best's first final measurement: no probe, no retry; the best keeps
    its two counted measurements (marked short), the contender is not started."""
    ctx, machine, best, contender = _campaign(tmp_path, ref_now=1.16, max_wall_s=110.0, elapsed=80.0)
    out = run_final_verification(ctx)
    assert len(machine.calls) == 1  # the reserved one; 100 s of 110 used, a retry would end at 120
    v = next(v for v in out["nodes"] if v["node_id"] == best.id)
    assert v["speedup"] == pytest.approx(6.605) and v["failed"] is None and "max_wall_s" in v["short"]
    assert ctx.flush_elapsed() <= 110.0
    assert out["best"] == best.id and contender.id not in {v["node_id"] for v in out["nodes"]}
    ctx.store.close()


def test_a_steady_machine_verifies_as_before(tmp_path):
    ctx, machine, best, contender = _campaign(tmp_path, ref_now=1.02, max_wall_s=10_000, elapsed=0.0)
    out = run_final_verification(ctx)
    assert not ctx.store.events(ctx.cid, kinds=["reference_reprobe"])
    assert len(machine.calls) == 2  # one final each: two of three counted already
    assert out["best"] == contender.id
    ctx.store.close()
