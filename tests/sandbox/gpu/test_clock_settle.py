"""The lock is settled and verified once per campaign and only checked per job (issue 25): against
the fake GPUs, which park idle clocks low (GDDR boards their memory clock too), run a held lock at
its clock under load and boost to max when the lock is gone; and the ``verify``-mode notice for a
power-capped card."""

from __future__ import annotations

import time

import pytest

from arbor.sandbox.gpu.clocks import ClockGuard, ClockTargets
from arbor.sandbox.gpu.control import ClockError, NvmlBackend
from arbor.sandbox.runner import Job, JobResult
from tests.sandbox.fakes import h100_sxm


class Counted:
    """``load`` and ``sleep`` hooks that count the expensive part: settle waits and load bursts."""

    def __init__(self, m) -> None:  # type: ignore[no-untyped-def]
        self.m, self.bursts, self.waits = m, 0, []

    def load(self, key):  # type: ignore[no-untyped-def]
        self.bursts += 1
        return self.m.busy(key)

    def sleep(self, s: float) -> None:
        self.waits.append(s)


def _guard(m, mode="lock", **kw) -> tuple[ClockGuard, Counted]:  # type: ignore[no-untyped-def]
    c = Counted(m)
    g = ClockGuard(mode, "cuda:0", ClockTargets(settle_s=3.0), backend_factory=NvmlBackend, load=c.load,
                   sleep=c.sleep, sample_interval_s=0.01, **kw)
    return g, c


def _job(g: ClockGuard, m, busy_s: float = 0.05) -> dict:  # type: ignore[no-untyped-def]
    job, res = Job(["true"], {}, 10), JobResult(0, False, busy_s, "", "", {})
    g.before(job)
    with m.busy():
        time.sleep(busy_s)
    g.after(job, res)
    return res.fingerprint


@pytest.mark.parametrize("board", ["hbm", "gddr"])
def test_the_lock_is_settled_once_per_campaign_and_checked_cheaply_per_job(machine, nvml, board):
    m = machine([h100_sxm(0, idle_mem_mhz=405 if board == "gddr" else None)])
    nv = nvml(m)
    g, c = _guard(m)
    g.start()
    assert (g.settles, c.bursts, c.waits.count(3.0)) == (1, 1, 1)  # start: lock, wait, verify under load
    calls = []
    for _ in range(4):
        before = len(nv.calls)
        fp = _job(g, m)
        calls.append(len(nv.calls) - before)
        assert fp["clocks_locked"] and "clock_resettled" not in fp
    # between jobs the idle GPU parks graphics (and a GDDR board its memory clock): not a lost lock
    assert (g.settles, c.bursts, c.waits.count(3.0)) == (1, 1, 1)
    assert calls == [0, 0, 0, 0]  # no setter was called again (nv.calls logs the root-only ones)
    g.close()
    assert m.refresh().gpus[0].locked is None


def test_a_lost_lock_is_noticed_and_settled_again(machine, nvml):
    m = machine([h100_sxm(0)])
    nvml(m)
    g, c = _guard(m)
    g.start()
    _job(g, m)
    m.refresh()
    m.gpus[0].locked = None  # nvidia-smi -rgc by someone else: idle, it reads like a held lock
    m.save()
    fp = _job(g, m)  # this job ran at max boost: the sampler saw it
    assert fp["gpu_sampled"]["graphics_max_mhz"] == 1980 and "clock_resettled" not in fp
    fp = _job(g, m)  # so the lock is applied, settled and verified under load before the next one
    assert "clock_resettled" in fp and "graphics up to 1980 MHz" in fp["clock_resettled"]
    assert (g.settles, c.bursts) == (2, 2) and m.refresh().gpus[0].locked == "tdp"
    assert fp["gpu_sampled"]["graphics_max_mhz"] == 1590
    fp = _job(g, m)
    assert "clock_resettled" not in fp and g.settles == 2
    restored = []
    g.on_restore = lambda r: restored.append(r)
    g.close()
    assert len(restored) == 1 and restored[0]["graphics_mhz"] == 1590  # one lock, one restore record


def test_a_lock_lost_between_jobs_above_the_target_is_settled_before_the_job(machine, nvml):
    m = machine([h100_sxm(0)])
    nvml(m)
    g, c = _guard(m)
    g.start()
    m.refresh()
    m.gpus[0].locked, m.gpus[0].idle_mhz = None, 1755  # unlocked and not parked low: the reading shows it
    m.save()
    fp = _job(g, m)
    assert "before a job: graphics 1755 MHz" in fp["clock_resettled"] and g.settles == 2


def test_a_lock_the_driver_no_longer_takes_refuses_the_job(machine, nvml):
    m = machine([h100_sxm(0)])
    nvml(m)
    g, _ = _guard(m)
    g.start()
    m.refresh()
    m.gpus[0].locked, m.ignore_lock = None, True
    m.save()
    _job(g, m)
    with pytest.raises(ClockError, match=r"graphics 1980 MHz \(want 1590±50\).*did not hold the lock"):
        _job(g, m)
    g.close()


def test_a_power_cap_the_lock_runs_into_is_throttling_not_a_lost_lock(machine, nvml):
    m = machine([h100_sxm(0)])
    nvml(m)
    g, _ = _guard(m)
    g.start()
    m.refresh()
    m.gpus[0].power_cap_mhz = 1400  # a hotter workload than the burst: held down below the lock
    m.save()
    for _ in range(2):
        fp = _job(g, m)
        assert "clock_resettled" not in fp and fp["gpu_sampled"]["power_capped"]
    assert g.settles == 1 and "fell to 1400 MHz" in fp["gpu_clock_off_under_load"]
    g.close()


def test_verify_mode_notices_a_power_capped_card_once(machine, nvml):
    m = machine([h100_sxm(0, power_cap_mhz=1500)])
    nvml(m)
    notices: list[str] = []
    g, c = _guard(m, mode="verify", on_notice=notices.append)
    g.start()
    for _ in range(3):
        fp = _job(g, m)
        assert fp["gpu_power_capped"] is True
    assert len(notices) == 1 and "\n" not in notices[0]
    assert "SwPowerCap" in notices[0] and "sandbox.clocks: lock" in notices[0]
    assert (g.settles, c.bursts) == (0, 0)  # verify changes nothing and loads nothing
    quiet = machine([h100_sxm(0)])
    nvml(quiet)
    g2, _ = _guard(quiet, mode="verify", on_notice=notices.append)
    g2.start()
    _job(g2, quiet)
    assert len(notices) == 1  # a card under its cap gets no notice


def test_the_notice_is_one_event_per_campaign_across_runs(tmp_path, machine, nvml, monkeypatch, device_starts):
    import arbor.campaign.sandbox_setup as setup
    from arbor.search_tree import open_store
    from arbor.spec import parse_spec

    m = machine([h100_sxm(0, power_cap_mhz=1500)])
    nvml(m)
    monkeypatch.setattr(setup, "open_backend", lambda pref="auto": NvmlBackend())
    (tmp_path / "p.py").write_text("x = 1\n")
    spec = parse_spec({"name": "clk", "target": {"problem": "p.py", "device": "cuda"},
                       "sandbox": {"clocks": "verify"}}, "t.yaml", tmp_path)
    store = open_store(f"sqlite:///{tmp_path / 'a.db'}")
    try:
        cid = store.get_or_create_campaign("clk", "kernel", {}).id
        seen: list = []
        for _run in range(2):  # a resumed campaign is a second run: still one notice
            runner = setup.open_sandbox(spec, store, cid, lambda k, d: seen.append((k, d)))
            guard = runner.hooks[-1]
            guard.sample_interval_s = 0.01
            for _ in range(2):
                _job(guard, m)
            runner.close()
        notes = [e for e in store.events(cid, kinds=("sandbox_notice",)) if (e.payload or {}).get("code") == "clocks"]
        assert len(notes) == 1 and "clocks: lock" in notes[0].payload["text"]
        assert sum(1 for k, d in seen if k == "sandbox_warning" and "SwPowerCap" in d["text"]) == 1
    finally:
        store.close()
