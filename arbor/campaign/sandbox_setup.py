"""Opening a campaign's sandbox: the runner its spec asks for, clock control, and their records.

The sandbox package never touches the store (dependencies point one way), so this glue writes
what the store must remember about the machine:

* ``sandbox_notice`` — isolation this machine could not provide (shown as a warning as well),
  including a layer the GPU device check replaced (with the probe's findings), the reason a
  campaign stopped before its baseline because the device cannot start inside the sandbox, and the
  clock guard's advice (a power-capped card under ``clocks: verify``: once per campaign, resumes
  included);
* ``clocks_locked`` / ``clocks_restored`` — a lock without its restore means an Arbor died with
  the GPU pinned; the next start on this host restores it before doing anything else.
"""

from __future__ import annotations

import socket
from typing import Callable

from arbor.sandbox.gpu import ClockGuard, ClockTargets, owner_alive
from arbor.sandbox.gpu import ClockError, open_backend
from arbor.spec_runners import runner_for, spec_device
from arbor.sandbox.runner import Runner, SandboxError
from arbor.search_tree.store import Store

from arbor.spec import CampaignSpec

__all__ = ["open_sandbox", "restore_stale_clocks"]

Report = Callable[[str, dict], None]


def restore_stale_clocks(store: Store, campaign_id: int, backend_factory: Callable, report: Report) -> int:
    """Undo clock locks that a dead Arbor on this host left behind (its recorded pid is gone),
    restoring the saved state on the recorded GPU. Returns how many."""
    host = socket.gethostname()
    pending: dict[tuple[str, str], tuple[int, dict]] = {}
    for camp in store.list_campaigns():
        for ev in store.events(camp.id, limit=100_000, kinds=("clocks_locked", "clocks_restored")):
            p = ev.payload or {}
            if p.get("host") != host:
                continue
            key = (str(p.get("uuid") or p.get("index")), str(p.get("backend")))
            if ev.kind == "clocks_locked":
                pending[key] = (camp.id, p)
            else:
                pending.pop(key, None)
    restored = 0
    for (_uuid, _backend), (owner_cid, rec) in pending.items():
        if owner_alive(rec):  # a live campaign's lock (another Arbor on this host): not stale
            continue
        try:
            backend = backend_factory()
            key = rec.get("uuid") or rec.get("pci_bus_id") or rec.get("index", 0)  # by identity, not index
            key = int(key) if isinstance(key, str) and key.isdigit() else key
            undo = getattr(backend, "restore", None)
            if undo is not None:
                undo(key, rec.get("saved"))  # what was there before, not the driver defaults
            else:
                backend.reset(key)
            ok, err = True, None
        except ClockError as exc:
            ok, err = False, str(exc)
        payload = {**rec, "reason": "left locked by a run that died", "ok": ok, "error": err}
        store.append_event(owner_cid, "clocks_restored", payload, agent="sandbox")
        if owner_cid != campaign_id:
            store.append_event(campaign_id, "clocks_restored", payload, agent="sandbox")
        report("sandbox_warning", {"text": f"restored GPU clocks left locked by a dead run ({'ok' if ok else err})"})
        restored += 1
    return restored


def _make_runner(spec: CampaignSpec, store: Store, campaign_id: int) -> Runner:
    """The runner; for a GPU device its constructor first checks that the device starts inside
    it (``sandbox.gpu.check_device``). A check that stops the campaign is recorded too."""
    try:
        return runner_for(spec, guarded=False)  # the guard below records its locks
    except SandboxError as exc:
        store.append_event(campaign_id, "sandbox_notice", {"text": str(exc), "runner": spec.sandbox.kind,
                                                           "stopped": True}, agent="sandbox")
        raise


def _probe_payload(runner: Runner) -> dict:
    probe = getattr(runner, "device_probe", None)
    return {"device_probe": probe.to_dict()} if probe is not None else {}


def open_sandbox(spec: CampaignSpec, store: Store, campaign_id: int, report: Report) -> Runner:
    """The campaign's runner with its clock guard attached; raises SandboxError (one line)."""
    runner = _make_runner(spec, store, campaign_id)
    try:
        probe = getattr(runner, "device_probe", None)
        if probe is not None and not probe.notice:
            report("sandbox_info", {"text": f"device check: {probe.summary()}"})
        sb = spec.sandbox
        t = sb.clock_targets
        host = socket.gethostname()

        def backend_factory():  # type: ignore[no-untyped-def]
            return open_backend(sb.gpu_backend)

        def on_lock(rec: dict) -> None:
            store.append_event(campaign_id, "clocks_locked", {**rec, "host": host}, agent="sandbox")

        def on_restore(rec: dict) -> None:
            store.append_event(campaign_id, "clocks_restored", {**rec, "host": host}, agent="sandbox")

        def on_notice(text: str) -> None:  # the guard says it once per run; the store, once per campaign
            seen = store.events(campaign_id, limit=10_000, kinds=("sandbox_notice",))
            if any((e.payload or {}).get("code") == "clocks" for e in seen):
                return
            store.append_event(campaign_id, "sandbox_notice", {"text": text, "code": "clocks", "runner": runner.name},
                               agent="sandbox")
            report("sandbox_warning", {"text": text})

        device = spec_device(spec)
        if device.startswith("cuda"):
            restore_stale_clocks(store, campaign_id, backend_factory, report)
        guard = ClockGuard(sb.clocks, device, ClockTargets(t.graphics_mhz, t.memory_mhz, t.tolerance_mhz,
                                                            t.settle_s),
                           backend_factory=backend_factory, on_lock=on_lock, on_restore=on_restore,
                           on_notice=on_notice)
        locked = guard.start()
        if locked is not None:
            report("sandbox_info", {"text": f"GPU {locked['index']} clocks locked at "
                                            f"{locked['graphics_mhz']}/{locked['memory_mhz']} MHz "
                                            f"({locked.get('graphics_source', 'clock_targets')}; verified under load)"})
        notices = list(runner.notices)
        if guard.gpu_error and device.startswith("cuda"):
            notices.append(f"clocks not verified: {guard.gpu_error}")
        for text in notices:
            extra = _probe_payload(runner) if probe is not None and text == probe.notice else {}
            store.append_event(campaign_id, "sandbox_notice", {"text": text, "runner": runner.name, **extra},
                               agent="sandbox")
            report("sandbox_warning", {"text": text})
        runner.hooks.append(guard)
    except BaseException:
        runner.close()
        raise
    return runner
