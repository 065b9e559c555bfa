"""Which physical GPU a ``cuda``/``cuda:N`` job runs on, and proof that it ran there.

CUDA numbers devices *after* ``CUDA_VISIBLE_DEVICES`` (``cuda:0`` with ``CUDA_VISIBLE_DEVICES=1``
is physical GPU 1), NVML and nvidia-smi never do. So the guard maps the device string through the
visibility list the job inherits (entries are PCI-order indices — jobs run with
``CUDA_DEVICE_ORDER=PCI_BUS_ID`` — or UUIDs), then holds the GPU by UUID. The harness reports the
UUID and PCI bus id torch saw; a measurement whose harness ran elsewhere is refused.
"""

from __future__ import annotations

import os

from .state import ClockError

__all__ = ["physical_key", "device_uuid", "identity_mismatch", "check_identity"]

_VISIBLE = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")


def physical_key(device: str, env: dict | None = None):  # type: ignore[no-untyped-def]
    """The driver-side key (int PCI-order index or UUID string) for ``device`` as a job sees it."""
    env = os.environ if env is None else env
    logical = int(device.partition(":")[2] or 0)
    for var in _VISIBLE:
        raw = env.get(var)
        if raw is None or var != "CUDA_VISIBLE_DEVICES" and "CUDA_VISIBLE_DEVICES" in env:
            continue
        entries = [e.strip() for e in raw.split(",") if e.strip()]
        if logical >= len(entries):
            raise ClockError(f"{device}: {var}={raw!r} makes only {len(entries)} GPU(s) visible — "
                             "fix target.device or the variable")
        entry = entries[logical]
        return int(entry) if entry.isdigit() else entry
    return logical


def device_uuid(device: str, env: dict | None = None, backend_factory=None) -> str:  # type: ignore[no-untyped-def]
    """The UUID of the GPU ``device`` names (for Docker's device_requests); the driver-side index
    as a string when no backend can tell (the engine then resolves it the same way NVML does)."""
    key = physical_key(device, env)
    if isinstance(key, str):
        return key
    try:
        if backend_factory is None:
            from .control import open_backend

            backend_factory = open_backend
        return backend_factory().state(key).uuid or str(key)
    except ClockError:
        return str(key)


def _norm(uuid: object) -> str | None:
    if not uuid:
        return None
    u = str(uuid).strip().lower()
    return u if u.startswith(("gpu-", "mig-")) else f"gpu-{u}"


def _norm_pci(bus: object) -> tuple[int, str] | None:
    """(domain, "bus:dev.fn"): torch prints a 4-digit domain, NVML an 8-digit one."""
    if not bus:
        return None
    dom, _, rest = str(bus).strip().lower().rpartition(":")
    dom, _, bus_part = dom.rpartition(":") if dom.count(":") else ("0", "", dom)
    try:
        return int(dom or "0", 16), f"{int(bus_part, 16):02x}:{rest}"
    except ValueError:
        return None


def identity_mismatch(harness_fp: dict, runner_fp: dict) -> str | None:
    """Why the harness's device is not the one the runner held (clocks, fingerprint), or None.

    Compares UUIDs when both sides have one, else PCI bus ids (domain width differs between torch
    and NVML: ``0000:3b:00.0`` vs ``00000000:3B:00.0``)."""
    seen, held = _norm(harness_fp.get("device_uuid")), _norm(runner_fp.get("gpu_uuid"))
    if seen and held:
        if seen != held and not (held.startswith("gpu-") and seen.startswith("mig-")):
            return f"the job ran on {harness_fp.get('device_uuid')} but the clock guard held {runner_fp.get('gpu_uuid')}"
        return None
    a, b = harness_fp.get("device_pci_bus_id"), runner_fp.get("gpu_pci_bus_id")
    na, nb = _norm_pci(a), _norm_pci(b)
    if na and nb and na != nb:
        return f"the job ran on PCI {a} but the clock guard held PCI {b}"
    return None


def check_identity(harness_fp: dict, runner_fp: dict) -> None:
    why = identity_mismatch(harness_fp, runner_fp)
    if why:
        raise ClockError(f"wrong GPU: {why} — refusing the measurement; check CUDA_VISIBLE_DEVICES "
                         "and target.device (nvidia-smi -L lists UUIDs)")
