"""Does the GPU start inside the sandbox? Found out with a tiny device job, never assumed.

A GPU driver is a kernel module plus a user-space library that opens device nodes, maps memory,
and talks over sockets; a sandbox layer can break any of that. On an H100 with driver 580 no
sandboxed CUDA job could start (``cudaGetDeviceCount ... Error 304``) under any setting that
applied Landlock, while a plain private network namespace did not hurt. So before the first
measurement of a GPU campaign the runner runs a tiny device job (``DEVICE_JOB``):

1. **bare** (a plain subprocess): if the device does not start even there, the driver or torch is
   the problem, not the sandbox — stop, saying so;
2. under the **full plan** (every layer the settings ask for): if it starts, nothing changes;
3. otherwise each layer **alone** (the Landlock scopes separately: the abstract-unix-socket scope
   is the suspect), then the full plan **without** each layer that failed alone — the record
   that confirms or refutes which layer is the culprit;
4. the **strongest plan that starts the device**: each broken layer replaced by one that gives
   the same protection another way — the private network namespace by the seccomp network
   filter plus Landlock TCP rules; the abstract-unix scope by the namespace itself (abstract
   sockets live in a network namespace, so a job in its own sees only its own) — and verified
   with one more job. A layer with no replacement the settings insist on (filesystem rules under
   ``filesystem: isolate``, the signal scope, any network layer under ``network: none``) makes
   the runner stop before the baseline with the reason and the fix (``sandbox.kind: docker``, or
   the setting to relax knowingly).

The result is cached per machine, driver and settings (``probe_cache.py``); a change is one line
(``DeviceProbe.notice``) that the campaign shows and stores. The Docker runner gets the same
check inside its warm container (``check_container``).

The decision (``decide``) sees only "run the device job under plan P → ok / error text", so it is
tested with fakes; ``device_check.py`` wires it to a real runner, and its command line (``python -m
arbor.sandbox.gpu.device_check``) prints every attempt as a JSON line (``scripts/gpu_check.sh`` keeps them).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from typing import Callable

from ..runners.isolation import LAYERS, IsolationPlan, KernelSupport
from ..runners.jobio import scrubbed_env
from ..runner import Job, JobResult, SandboxError
from .probe_cache import ProbeCache, probe_key

__all__ = ["DEVICE_JOB", "DeviceProbe", "Attempt", "decide", "device_job", "job_outcome", "run_bare", "ProbeCache",
           "probe_key"]

OK_MARK = "ARBOR_DEVICE_OK"
# argv[1] is the device; ROCm builds of torch answer the same torch.cuda API
DEVICE_JOB = ("import sys\nimport torch\ntorch.cuda.init()\n"
              f"print({OK_MARK!r}, torch.cuda.device_count(), torch.ones(2, device=sys.argv[1]).sum().item())\n")
TIMEOUT_S = 180.0  # a first CUDA start on a many-GPU machine takes tens of seconds
MIN_SANDBOXED_TIMEOUT_S = 30.0
DOCKER_FIX = ("install the NVIDIA container toolkit where dockerd runs (docker info must list the nvidia "
              "runtime or NVIDIA CDI devices) so the container gets the GPU (--gpus), or use sandbox.kind: local")
DRIVER_FIX = ("check the driver and torch outside Arbor (nvidia-smi; python -c 'import torch; torch.cuda.init()'), "
              "or set target.device: cpu")
# what to give up first when only a combination of layers breaks the device
_GIVE_UP_ORDER = ("private_ns", "scope_abstract_unix", "landlock_tcp", "netns", "seccomp_net", "landlock_fs", "scope_signal")

TryPlan = Callable[[IsolationPlan | None], tuple[bool, str]]  # None: bare, outside the runner


@dataclass
class Attempt:
    label: str  # bare | full | base | only <layer> | without <layer> | chosen | ...
    layers: list[str]
    ok: bool
    error: str = ""
    seconds: float = 0.0


@dataclass
class DeviceProbe:
    """What the probe found and chose. ``plan`` is None when the runner must stop (``stop``)."""

    device: str
    runner: str = "local"
    attempts: list[Attempt] = field(default_factory=list)
    plan: dict | None = None  # IsolationPlan.to_dict() of the chosen plan
    full: dict | None = None
    changes: list[str] = field(default_factory=list)
    broken: list[str] = field(default_factory=list)  # the culprit layers
    notice: str | None = None  # one line when the plan differs from the full one
    stop: str | None = None  # one line: the reason, then " — fix: ..."
    fix: str | None = None
    cached: bool = False

    @property
    def chosen(self) -> IsolationPlan | None:
        return IsolationPlan.from_dict(self.plan) if self.plan is not None else None

    def to_dict(self) -> dict:
        d = asdict(self)
        d.pop("cached")
        return d

    @classmethod
    def from_dict(cls, data: dict, cached: bool = False) -> DeviceProbe:
        d = dict(data)
        d["attempts"] = [Attempt(**a) for a in d.get("attempts", [])]
        names = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in d.items() if k in names}, cached=cached)

    def summary(self) -> str:
        """One line for ``arbor doctor`` and the campaign log."""
        if self.stop:
            return self.stop
        if self.notice:
            return self.notice
        what = self.chosen.describe() if self.chosen is not None else "the container"
        return f"{self.device} starts under the sandbox's isolation ({what})" + (" [cached]" if self.cached else "")


# ------------------------------------------------------------------------------------ jobs
def device_job(device: str, code: str = DEVICE_JOB, timeout_s: float = TIMEOUT_S) -> Job:
    return Job([sys.executable, "-I", "-c", code, device], {}, timeout_s, memory_bytes=None)


def short_text(text: str, limit: int = 240) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def job_outcome(returncode: int | None, stdout: str, stderr: str, timed_out: bool = False,
                timeout_s: float = TIMEOUT_S) -> tuple[bool, str]:
    """(started, the error's telling line) from a device job's exit and output."""
    if timed_out:
        return False, f"the device job did not finish within {timeout_s:g} s"
    if returncode == 0 and OK_MARK in stdout:
        return True, ""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    pick = next((ln for ln in reversed(lines) if "Error" in ln or "error" in ln), lines[-1] if lines else "")
    return False, short_text(pick or f"the device job exited with code {returncode} and said nothing")


def job_result_outcome(res: JobResult, timeout_s: float) -> tuple[bool, str]:
    return job_outcome(res.returncode, res.stdout_tail, res.stderr_tail, res.timed_out, timeout_s)


def run_bare(device: str, code: str = DEVICE_JOB, timeout_s: float = TIMEOUT_S) -> tuple[bool, str]:
    """The device job as a plain subprocess (scrubbed environment, its own directory), no sandbox."""
    with tempfile.TemporaryDirectory(prefix="arbor-probe-") as work:
        proc = subprocess.Popen([sys.executable, "-I", "-c", code, device], cwd=work, env=scrubbed_env(work, {}),
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, start_new_session=True)
        try:
            out, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            return job_outcome(None, "", "", True, timeout_s)
        except BaseException:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
    return job_outcome(proc.returncode, out, err)


# ------------------------------------------------------------------------------------ deciding
def _fix_for(protection: str) -> str:
    relax = {"network": "sandbox.network: host", "filesystem": "sandbox.filesystem: host"}.get(protection)
    return "sandbox.kind: docker" + (f", or {relax} to give that protection up knowingly" if relax else "")


class _Trials:
    """Runs and records attempts, never the same plan twice."""

    def __init__(self, try_plan: TryPlan, on_attempt: Callable[[Attempt], None] | None = None) -> None:
        self.try_plan, self.on_attempt = try_plan, on_attempt
        self.attempts: list[Attempt] = []
        self._seen: dict[IsolationPlan | None, Attempt] = {}

    def run(self, label: str, plan: IsolationPlan | None) -> Attempt:
        if plan in self._seen:
            return self._seen[plan]
        t0 = time.monotonic()
        try:
            ok, err = self.try_plan(plan)
        except SandboxError as exc:  # the runner could not even set the job up
            ok, err = False, short_text(str(exc))
        a = Attempt(label, list(plan.layers) if plan is not None else [], ok, "" if ok else err,
                    round(time.monotonic() - t0, 3))
        self.attempts.append(a)
        self._seen[plan] = a
        if self.on_attempt is not None:
            self.on_attempt(a)
        return a


def _replace(full: IsolationPlan, broken: list[str], trials: _Trials, filesystem: str,
             kernel: KernelSupport) -> tuple[IsolationPlan, list[str], str | None]:
    """The plan with each broken layer replaced: (plan, what changed, the protection lost or None)."""
    plan = full.without(*broken)
    changes: list[str] = []
    lost = None
    if "netns" in broken:
        seccomp_ok = kernel.seccomp and trials.run("only seccomp_net", IsolationPlan(seccomp_net=True)).ok
        if seccomp_ok:
            plan = plan.with_layer("seccomp_net")
            tcp = kernel.landlock_abi >= 4 and "landlock_tcp" not in broken
            plan = plan.with_layer("landlock_tcp", tcp) if tcp else plan
            changes.append("private network namespace replaced by the seccomp network filter"
                           + (" + Landlock TCP rules" if tcp else "") + " (no TCP, UDP or raw sockets; abstract unix "
                           + ("sockets: the Landlock scope)" if plan.scope_abstract_unix and
                              "scope_abstract_unix" not in broken else "sockets of host processes now reachable)"))
        else:
            lost = "network"
    if "seccomp_net" in broken:  # it stood in for a namespace this machine cannot give
        lost = "network"
    if "landlock_fs" in broken:
        if filesystem == "isolate":
            lost = lost or "filesystem"
        else:
            changes.append("Landlock write rules off (filesystem: host): candidates can write outside their workdir")
    if "landlock_tcp" in broken:
        if plan.netns or plan.seccomp_net:
            changes.append("Landlock TCP rules off (TCP stays refused by the "
                           + ("private network namespace)" if plan.netns else "seccomp network filter)"))
        else:
            lost = lost or "network"
    if "scope_signal" in broken:
        lost = lost or "signals"
    if "private_ns" in broken:
        changes.append("private /proc and /dev/shm off: the job's own first process starts the device, its child "
                       "processes cannot (CUDA error 304), and /dev/shm is the host's, read-only")
    if "scope_abstract_unix" in broken:
        changes.append("Landlock abstract-unix-socket scope off: " + (
            "abstract unix sockets stay confined to the candidate's own network namespace" if plan.netns else
            "candidates can connect to abstract unix sockets of host processes (no private network namespace)"))
    return plan, changes, lost


def decide(full: IsolationPlan, try_plan: TryPlan, *, device: str, network: str = "none",
           filesystem: str = "isolate", kernel: KernelSupport | None = None, exhaustive: bool = False,
           on_attempt: Callable[[Attempt], None] | None = None) -> DeviceProbe:
    """Find the strongest plan under which ``device`` starts (see the module docstring).

    ``try_plan(None)`` runs the device job bare, ``try_plan(plan)`` inside the runner under
    ``plan``; each answers (started, error text). ``kernel`` says what replacements this machine
    offers. ``exhaustive`` tries every layer alone and the full plan without each even when the
    full plan works (the GPU check script's record); ``on_attempt`` hears of each as it ends."""
    kernel = kernel or KernelSupport(6, full.netns, True)
    trials = _Trials(try_plan, on_attempt)
    probe = DeviceProbe(device=device, full=full.to_dict(), attempts=trials.attempts)
    where = "inside the local sandbox"

    def stop(reason: str, fix: str) -> DeviceProbe:
        probe.plan, probe.fix = None, fix
        probe.stop = f"{reason} — fix: {fix}"
        return probe

    bare = trials.run("bare", None)
    if not bare.ok:
        return stop(f"{device} does not start on this machine even outside the sandbox ({bare.error})", DRIVER_FIX)
    whole = trials.run("full", full)
    if whole.ok and not exhaustive:
        probe.plan = full.to_dict()
        return probe
    layers = list(full.layers)
    solo = {name: trials.run(f"only {name}", full.only(name)) for name in layers}
    if exhaustive:
        if kernel.seccomp and "seccomp_net" not in layers:
            trials.run("only seccomp_net", IsolationPlan(seccomp_net=True))
        for name in layers:
            trials.run(f"without {name}", full.without(name))
    if whole.ok:
        probe.plan = full.to_dict()
        return probe
    broken = [n for n, a in solo.items() if not a.ok]
    if len(broken) == len(layers):  # every layer fails alone (or there is none): is it the runner itself?
        base = trials.run("base", IsolationPlan())
        if not base.ok:
            return stop(f"{device} starts outside the sandbox but not in the local runner even with no isolation "
                        f"layer ({base.error})", "sandbox.kind: docker")
    for name in broken:  # does dropping only this layer start the device? (recorded either way)
        trials.run(f"without {name}", full.without(name))
    error = solo[broken[0]].error if broken else whole.error
    if not broken:  # only a combination fails: give up the cheapest layer that makes it start
        for name in _GIVE_UP_ORDER:
            if name in layers and trials.run(f"without {name}", full.without(name)).ok:
                broken = [name]
                break
        else:
            return stop(f"{device} does not start {where} under its layers together ({whole.error}), though it "
                        "does under each alone", "sandbox.kind: docker")
    probe.broken = broken
    named = ", ".join(LAYERS[n] for n in broken)
    plan, changes, lost = _replace(full, broken, trials, filesystem, kernel)
    if lost:
        return stop(f"{device} does not start {where} under the {named} ({error}), and nothing else gives its "
                    f"{_LOST[lost]}", _fix_for(lost))
    chosen = trials.run("chosen", plan)
    if not chosen.ok:
        return stop(f"{device} does not start {where} under the {named} ({error}), nor with "
                    f"{'it' if len(broken) == 1 else 'them'} replaced ({chosen.error})", "sandbox.kind: docker")
    probe.plan, probe.changes = plan.to_dict(), changes
    probe.notice = (f"local sandbox: {device} does not start under the {named} ({short_text(error, 120)}); "
                    f"{'; '.join(changes)} — isolation now: {plan.describe()}")
    return probe


_LOST = {"network": "network isolation (network: none)", "filesystem": "filesystem confinement (filesystem: isolate)",
         "signals": "protection of Arbor's own processes from the candidate's signals"}
