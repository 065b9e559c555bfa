"""``arbor doctor``'s GPU-specific checks: a torch that can reach the campaign's device, the
compilers its kernels need, whether the device starts inside the sandbox the campaign would use
(the runner's own device probe, ``sandbox.gpu.check_device``), and whether this process may lock
clocks at all.

Clock permission is not "euid == 0": the driver refuses ``nvmlDeviceSetGpuLockedClocks`` to a
caller without admin rights, and root inside a container usually lacks CAP_SYS_ADMIN and always
talks to a driver whose policy the host sets. So the check reads the effective capabilities and
says when it runs in a container; the guard's own lock attempt (``arbor run``) is the final word.
"""

from __future__ import annotations

import os
import shutil

from .doctor_row import Check

__all__ = ["device_checks", "toolchain_checks", "clock_permission", "sandbox_device_checks"]

STATUS_PATH = "/proc/self/status"
_CAP_SYS_ADMIN = 21
CUDA_TORCH_FIX = ("install a CUDA build of torch (pip install torch --index-url "
                  "https://download.pytorch.org/whl/cu124), or set target.device: cpu")


def device_checks(device: str) -> list[Check]:
    """A ``device: cuda`` campaign on a torch that cannot run CUDA fails here, not at the first job."""
    if not device.startswith("cuda"):
        return []
    try:
        import torch
    except Exception:  # noqa: BLE001 - the torch row already reports it
        return []
    if not (torch.version.cuda or getattr(torch.version, "hip", None)):
        return [Check("torch device", "fail", f"target.device is {device} but torch {torch.__version__} is a "
                      "CPU-only build: every measurement would fail", CUDA_TORCH_FIX)]
    if not torch.cuda.is_available():
        return [Check("torch device", "fail", f"target.device is {device} but torch sees no GPU "
                      "(driver missing or too old for this CUDA build)", "install/upgrade the NVIDIA driver "
                      "(nvidia-smi must work), or run where the GPU is")]
    return [Check("torch device", "ok", f"{device}: {torch.cuda.get_device_name(0)}")]


def sandbox_device_checks(spec, device: str) -> list[Check]:  # type: ignore[no-untyped-def]
    """The device job inside the sandbox the campaign would use, through the runner's own probe
    (cached per machine, driver and settings, like ``arbor run``): fail with the fix when the
    device cannot start there, warn naming the replacement when a layer had to be replaced."""
    if spec is None or not device.startswith("cuda"):
        return []
    from arbor.sandbox.gpu import check_device
    from arbor.sandbox.runner import SandboxError, make_runner

    sb = spec.sandbox
    name = "device in sandbox"
    try:
        if sb.kind == "docker":
            from arbor.spec_runners import runner_for

            runner = runner_for(spec, guarded=False, kind="docker", build=False, device_check=False)
        else:
            runner = make_runner("local", network=sb.network, filesystem=sb.filesystem, device_check=False)
    except SandboxError as exc:  # the docker rows above say why
        return [Check(name, "skip", f"no {sb.kind} sandbox to try the device in: {str(exc).split(' — ')[0]}")]
    try:
        probe = check_device(runner, device)
    finally:
        runner.close()
    if probe.stop:
        reason, _, _fix = probe.stop.partition(" — fix: ")
        return [Check(name, "fail", reason, probe.fix or "sandbox.kind: docker")]
    if probe.notice:
        return [Check(name, "warn", probe.notice, "sandbox.kind: docker keeps every protection (network_mode "
                      "none, its own filesystem) without the replaced layer")]
    return [Check(name, "ok", probe.summary())]


def toolchain_checks(device: str, sandbox_kind: str) -> list[Check]:
    """What GPU candidates compile with: Triton (``@triton.jit``), and nvcc + ninja for
    ``torch.utils.cpp_extension.load_inline``. In Docker the image provides them instead."""
    if not device.startswith("cuda"):
        return []
    if sandbox_kind == "docker":
        return [Check("gpu toolchain", "skip", "sandbox.kind docker: the image provides triton, nvcc and ninja")]
    rows = []
    try:
        import triton

        rows.append(Check("triton", "ok", f"triton {triton.__version__}"))
    except Exception as exc:  # noqa: BLE001
        rows.append(Check("triton", "fail", f"cannot import triton ({type(exc).__name__}): Triton candidates "
                          "would all be compile errors", "pip install triton (matching your torch)"))
    nvcc = shutil.which("nvcc") or (os.path.join(os.environ["CUDA_HOME"], "bin", "nvcc")
                                    if os.environ.get("CUDA_HOME") else None)
    rows.append(Check("nvcc", "ok" if nvcc and os.path.exists(nvcc) else "warn",
                      nvcc if nvcc and os.path.exists(nvcc) else "not found: CUDA C++ (load_inline) candidates "
                      "will be compile errors", "" if nvcc and os.path.exists(nvcc) else
                      "install the CUDA toolkit and set CUDA_HOME (or put nvcc on PATH)"))
    ninja = shutil.which("ninja")
    rows.append(Check("ninja", "ok" if ninja else "warn", ninja or "not found: load_inline needs it",
                      "" if ninja else "pip install ninja"))
    return rows


def _cap_eff() -> int | None:
    try:
        with open(STATUS_PATH, encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("CapEff:"):
                    return int(line.split()[1], 16)
    except (OSError, ValueError, IndexError):
        return None
    return None


def _in_container() -> bool:
    if os.path.exists("/.dockerenv") or os.path.exists("/run/.containerenv"):
        return True
    try:
        with open("/proc/1/cgroup", encoding="ascii", errors="replace") as f:
            text = f.read()
        return any(w in text for w in ("docker", "kubepods", "containerd", "libpod"))
    except OSError:
        return False


def clock_permission(mode: str) -> Check:
    caps = _cap_eff()
    admin = caps is not None and bool(caps >> _CAP_SYS_ADMIN & 1)
    root = os.geteuid() == 0
    bad = "fail" if mode == "lock" else "warn"
    if not root or not admin:
        who = "not root" if not root else "root without CAP_SYS_ADMIN"
        return Check("clock permission", bad, f"{who}: the driver refuses clock locks",
                     "lock clocks as root on the host, or use sandbox.clocks: verify")
    if _in_container():
        return Check("clock permission", "warn", "root with CAP_SYS_ADMIN, but inside a container: the host's driver "
                     "may still refuse clock locks (arbor run verifies the lock under load)",
                     "lock clocks on the host, or run the container privileged; else sandbox.clocks: verify")
    return Check("clock permission", "ok", "root with CAP_SYS_ADMIN on the host: clocks can be locked")
