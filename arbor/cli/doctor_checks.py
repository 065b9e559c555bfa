"""``arbor doctor``'s checks: is this machine ready to measure, and if not, what to do about it.

Each check returns ``Check`` rows (status ok | warn | fail | skip, a detail, and a fix for anything
not ok). Checks never raise: a broken dependency is itself a finding. With a campaign file the
checks follow its settings (sandbox kind and image, device, clocks mode, LLM endpoints, store);
without one they describe the machine.
"""

from __future__ import annotations

import os
from typing import Callable

from .doctor_gpu import clock_permission, device_checks, sandbox_device_checks, toolchain_checks
from .doctor_row import Check

__all__ = ["Check", "run_checks"]


def _torch() -> list[Check]:
    try:
        import torch
    except Exception as exc:  # noqa: BLE001
        return [Check("torch", "fail", f"cannot import torch: {exc}", "scripts/setup.sh (installs torch)")]
    rows = [Check("torch", "ok", f"torch {torch.__version__} ({'CUDA ' + torch.version.cuda if torch.version.cuda else 'CPU build'})")]
    if torch.cuda.is_available():
        names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        rows.append(Check("cuda", "ok", f"{len(names)} GPU(s): {', '.join(names)}"))
    else:
        why = "CPU-only torch build" if not torch.version.cuda else "no usable NVIDIA driver/GPU"
        rows.append(Check("cuda", "warn", f"torch sees no GPU ({why}); CPU targets only",
                          "install the driver and a CUDA torch build for target.device: cuda"))
    return rows


def _gpu(mode: str, device: str, backend_pref: str) -> list[Check]:
    from arbor.sandbox.gpu import ClockError, decode_throttle, open_backend

    needed = device.startswith("cuda")
    try:
        backend = open_backend(backend_pref)
    except ClockError as exc:
        status = "fail" if needed and mode == "lock" else ("warn" if needed else "skip")
        return [Check("gpu control", status, str(exc),
                      "pip install 'arbor-opt[gpu]' on a machine with the NVIDIA driver" if needed else "")]
    rows = []
    try:
        n = backend.count()
        for i in range(n):
            st = backend.state(i)
            bad = decode_throttle(st.throttle_reasons)
            rows.append(Check(f"gpu {i}", "warn" if any(b for b in bad if b not in ("gpu_idle",)) else "ok",
                              f"{st.name} {st.uuid} driver {st.driver}: {st.graphics_mhz}/{st.memory_mhz} MHz, "
                              f"{st.temperature_c} C, {st.power_w} W, throttle {bad or 'none'} ({backend.name})"))
    except ClockError as exc:
        rows.append(Check("gpu state", "fail", str(exc), "check the driver (nvidia-smi)"))
    rows.append(clock_permission(mode))
    return rows


def _local_isolation() -> list[Check]:
    from arbor.sandbox.runners import isolation
    from arbor.sandbox.runners.proctree import cgroup_available

    k = isolation.kernel_support()
    abi = k.landlock_abi
    net = ("private network namespace per job" if k.netns else
           "seccomp network filter per job (no network namespace: needs root)" if k.seccomp else
           "no network namespace (needs root) and no seccomp filter: UDP stays open")
    rows = [
        Check("landlock", "ok" if abi >= 6 else "warn",
              f"ABI {abi}" + ("" if abi >= 6 else " (< 6: candidates can signal other processes)") if abi
              else "unavailable: local candidates can read files outside their workdir",
              "" if abi >= 6 else "Linux >= 6.12 with Landlock, or sandbox.kind: docker"),
        Check("network isolation", "ok" if k.netns or k.seccomp else "warn", net,
              "" if k.netns or k.seccomp else "run as root or use sandbox.kind: docker"),
        Check("process containment", "ok" if cgroup_available() else "warn",
              "pids cgroup per job" if cgroup_available() else "no pids cgroup: /proc scanning only",
              "" if cgroup_available() else "run as root (cgroup v1) or delegate a cgroup v2 subtree"),
    ]
    return rows


def _docker(kind: str, image: str, device: str, base_url: str | None) -> list[Check]:
    needed = kind == "docker"
    bad = "fail" if needed else "skip"
    try:
        from arbor.sandbox.runners.docker import connect
        from arbor.sandbox.runners.images import image_status, resolve_image
        from arbor.sandbox.runner import SandboxError
    except ImportError:
        return [Check("docker", bad, "the docker SDK is not installed", "pip install 'arbor-opt[docker]'")]
    try:
        client = connect(base_url, timeout=10)
    except SandboxError as exc:
        return [Check("docker engine", bad, str(exc).split(" — ")[0],
                      "start dockerd (apt-get install docker.io), or set DOCKER_HOST")]
    v = client.version()
    rows = [Check("docker engine", "ok", f"Docker {v.get('Version')} (API {v.get('ApiVersion')})")]
    plan = resolve_image(image)
    present, why = image_status(client, plan)
    rows.append(Check("docker image", "ok" if present else ("warn" if plan.recipe == "host" else bad), why,
                      "" if present or plan.recipe == "host" else why.split(" — ")[-1]))
    if device.startswith("cuda"):
        from arbor.sandbox.runners.docker import gpu_support

        ok = gpu_support(client)
        rows.append(Check("docker gpu", "ok" if ok else bad, "NVIDIA container runtime present" if ok else
                          "no NVIDIA container runtime", "" if ok else "install nvidia-container-toolkit"))
    return rows


def _llm(spec) -> list[Check]:  # type: ignore[no-untyped-def]
    from arbor.spec import LLM_ROLES

    endpoints: dict[tuple, list[str]] = {}
    for role in LLM_ROLES:
        eff = spec.agents.role(role)
        if eff["backend"] == "openai":
            endpoints.setdefault((eff["base_url"], eff["api_key_env"], eff["model"]), []).append(role)
    if not endpoints:
        return [Check("llm endpoint", "skip", "all agents are heuristic (no endpoint configured)")]
    rows = []
    for (base_url, key_env, model), roles in endpoints.items():
        label = f"llm {'/'.join(roles)}"
        where = base_url or "api.openai.com"
        key = os.environ.get(key_env) if key_env else os.environ.get("OPENAI_API_KEY")
        if key_env and not key:
            rows.append(Check(label, "fail", f"{where}: ${key_env} is not set", f"export {key_env}=..."))
            continue
        try:
            import openai

            client = openai.OpenAI(base_url=base_url, api_key=key or "not-needed", timeout=10, max_retries=0)
            models = [m.id for m in client.models.list()]
        except Exception as exc:  # noqa: BLE001 - any failure to reach it is the finding
            rows.append(Check(label, "fail", f"{where}: {type(exc).__name__}: {str(exc)[:160]}",
                              "start the server / check agents.base_url and the API key"))
            continue
        known = not models or model in models
        rows.append(Check(label, "ok" if known else "warn", f"{where}: {len(models)} model(s)"
                          + ("" if known else f", {model!r} not among them"),
                          "" if known else f"set agents.model to one of: {', '.join(models[:5])}"))
    return rows


def _store(url: str | None) -> list[Check]:
    if url is None:
        return [Check("store", "skip", "no campaign given (arbor doctor CAMPAIGN.yaml checks its store)")]
    if url.startswith("sqlite:///"):  # doctor looks, it never creates a store
        path = url[len("sqlite:///"):]
        if not os.path.exists(path):
            parent = os.path.dirname(path) or "."
            ok = os.access(parent, os.W_OK)
            return [Check("store", "ok" if ok else "fail", f"{url}: not created yet (first run creates it)"
                          + ("" if ok else f"; {parent} is not writable"),
                          "" if ok else "make the directory writable or set store.url")]
    try:
        from arbor.search_tree import open_store

        store = open_store(url)
        try:
            n = len(store.list_campaigns())
            rev = store.schema_revision()
        finally:
            store.close()
    except Exception as exc:  # noqa: BLE001
        return [Check("store", "fail", f"{url}: {str(exc)[:200]}", "check store.url and that its directory is writable")]
    return [Check("store", "ok", f"{url}: schema {rev}, {n} campaign(s)")]


def run_checks(spec=None, skip_llm: bool = False) -> list[Check]:  # type: ignore[no-untyped-def]
    """Every check, in the order a person fixes things: software, GPU, sandbox, LLM, store."""
    sb = spec.sandbox if spec is not None else None
    device = str(getattr(spec.target, "device", "cpu") or "cpu") if spec is not None else "cpu"
    kind = sb.kind if sb else "local"
    groups: list[Callable[[], list[Check]]] = [
        lambda: _torch() + device_checks(device) + toolchain_checks(device, kind),
        lambda: _gpu(sb.clocks if sb else "verify", device, sb.gpu_backend if sb else "auto"),
        _local_isolation,
        lambda: _docker(kind, sb.docker.image if sb else "host", device, sb.docker.base_url if sb else None),
        lambda: sandbox_device_checks(spec, device),
    ]
    if spec is not None and not skip_llm:
        groups.append(lambda: _llm(spec))
    groups.append(lambda: _store(spec.store_url() if spec is not None else None))
    rows: list[Check] = []
    for g in groups:
        try:
            rows += g()
        except Exception as exc:  # noqa: BLE001 - a check that crashes is reported, not raised
            rows.append(Check(getattr(g, "__name__", "check").strip("_<>") or "check", "fail",
                              f"check crashed: {type(exc).__name__}: {exc}", "report this as a bug"))
    return rows
