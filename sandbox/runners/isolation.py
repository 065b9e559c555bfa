"""Kernel-level isolation for the local runner, as explicit layers a job gets or does not get.

A candidate runs as the same user as Arbor, so rlimits alone leave it free to read ``~/.ssh``,
``/proc/<arbor>/environ`` (the API keys we scrubbed from *its* environment), to open sockets, and
to ``kill`` Arbor itself. Unprivileged kernel features close most of that without Docker, each a
*layer* of an ``IsolationPlan``:

* ``netns`` — a private network namespace (``unshare(CLONE_NEWNET)``, root only): no interfaces
  but a down loopback, so no TCP, UDP or raw traffic; abstract unix sockets, which live in the
  network namespace, are confined to the job's own;
* ``seccomp_net`` — a seccomp filter refusing IPv4/IPv6/packet sockets and io_uring
  (``seccomp.py``): the network layer where the namespace cannot be had or breaks a device;
* ``landlock_fs`` — Landlock filesystem rules: reads of system paths, the interpreter and the
  workdir only (``filesystem: isolate``), writes to the workdir only;
* ``landlock_tcp`` — Landlock TCP rules: no connect, no bind (ABI >= 4);
* ``scope_signal`` — no signals or ptrace to processes outside the job (ABI >= 6), so "kill your
  parent" and "read the parent's environ" fail with EPERM;
* ``scope_abstract_unix`` — no connecting to abstract unix sockets created outside the job
  (ABI >= 6);
* ``private_ns`` — private PID and mount namespaces (``private_ns.py``; root or unprivileged user
  namespaces): the job's own procfs, writable beneath by every process of the job and nobody
  else's (CUDA's driver writes its own ``/proc/<pid>``, in a job's children too), and its own
  ``/dev/shm``. Comes with the Landlock filesystem rules, which it widens only to the job's own.

``plan_for`` turns the runner settings (``network``, ``filesystem``) and what this kernel offers
(``KernelSupport``) into the full plan; what the settings ask for but the kernel lacks becomes a
notice (``plan_notices``), never an error: a laptop without Landlock still runs campaigns. A
layer that breaks a device driver is found and replaced by ``sandbox/gpu/probe.py``.

``prepare`` builds everything in the parent (the Landlock ruleset, the BPF program, the
capability dropper); the returned ``ChildIsolation.apply`` runs in the child — between fork and
exec (the local runner's preexec), or right after ``fork()`` in a running Python process — and
makes only syscalls through pre-resolved functions, keeping it async-signal-safe-ish.
"""

from __future__ import annotations

import ctypes
import dataclasses
import os
import site
import subprocess
import sys
from dataclasses import dataclass
from functools import lru_cache

from . import private_ns
from .landlock import FS_ISOLATE, FS_WRITES, Ruleset, landlock_abi, libc
from .seccomp import NetworkFilter, seccomp_available

__all__ = ["IsolationPlan", "KernelSupport", "ChildIsolation", "LAYERS", "kernel_support", "plan_for",
           "plan_notices", "prepare", "landlock_abi", "netns_available", "seccomp_available", "libc",
           "PR_SET_PDEATHSIG", "PR_SET_NO_NEW_PRIVS", "CLONE_NEWNET", "default_read_paths",
           "make_capability_dropper", "FS_ISOLATE", "FS_WRITES"]

PR_SET_PDEATHSIG = 1
PR_SET_NO_NEW_PRIVS = 38
_PR_CAPBSET_DROP, _PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 24, 47, 4
CLONE_NEWNET = 0x40000000

# layer -> how notices and the device probe name it
LAYERS = {
    "netns": "private network namespace",
    "seccomp_net": "seccomp network filter",
    "landlock_fs": "Landlock filesystem rules",
    "landlock_tcp": "Landlock TCP rules",
    "scope_signal": "Landlock signal scope",
    "scope_abstract_unix": "Landlock abstract-unix-socket scope",
    "private_ns": "private /proc and /dev/shm (PID + mount namespaces)",
}


@dataclass(frozen=True)
class IsolationPlan:
    """Which layers a job gets. A value: built once from the settings, compared, cached, logged."""

    netns: bool = False
    seccomp_net: bool = False
    landlock_fs: str | None = None  # FS_ISOLATE | FS_WRITES | None
    landlock_tcp: bool = False
    scope_signal: bool = False
    scope_abstract_unix: bool = False
    private_ns: bool = False

    @property
    def layers(self) -> tuple[str, ...]:
        return tuple(name for name in LAYERS if getattr(self, name))

    @property
    def uses_landlock(self) -> bool:
        return bool(self.landlock_fs or self.landlock_tcp or self.scope_signal or self.scope_abstract_unix)

    def without(self, *names: str) -> IsolationPlan:
        return dataclasses.replace(self, **{n: None if n == "landlock_fs" else False for n in names})

    def only(self, name: str) -> IsolationPlan:
        """This plan's ``name`` layer alone (as configured here: the same filesystem mode)."""
        return IsolationPlan().with_layer(name, getattr(self, name) or True)

    def with_layer(self, name: str, value: object = True) -> IsolationPlan:
        if name == "landlock_fs" and value is True:
            value = FS_ISOLATE
        return dataclasses.replace(self, **{name: value})

    def describe(self) -> str:
        """One phrase: 'private network namespace + Landlock (filesystem, TCP, signal scope)'."""
        parts = [LAYERS[n] for n in ("netns", "seccomp_net") if getattr(self, n)]
        ll = [{"landlock_fs": "filesystem" if self.landlock_fs == FS_ISOLATE else "writes",
               "landlock_tcp": "TCP", "scope_signal": "signal scope",
               "scope_abstract_unix": "abstract-unix scope"}[n]
              for n in ("landlock_fs", "landlock_tcp", "scope_signal", "scope_abstract_unix") if getattr(self, n)]
        if ll:
            parts.append(f"Landlock ({', '.join(ll)})")
        if self.private_ns:
            parts.append("private /proc and /dev/shm")
        return " + ".join(parts) or "no isolation layers"

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> IsolationPlan:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


@dataclass(frozen=True)
class KernelSupport:
    """What this kernel and this process offer: the Landlock ABI, a network namespace, seccomp."""

    landlock_abi: int
    netns: bool
    seccomp: bool
    private_ns: bool = False


def kernel_support() -> KernelSupport:
    return KernelSupport(landlock_abi(), netns_available(), seccomp_available(), private_ns.available())


def plan_for(network: str, filesystem: str, kernel: KernelSupport) -> IsolationPlan:
    """The full plan ``network`` / ``filesystem`` ask for, as far as ``kernel`` offers it.

    Landlock is used when either setting isolates: under ``filesystem: host`` its filesystem
    part still keeps writes in the workdir (reads anywhere). The scopes come with any Landlock
    ruleset, and so do private namespaces where the kernel lets us have them (a job's children
    start CUDA only with them). Without a network namespace the seccomp filter takes its place."""
    abi = kernel.landlock_abi if (filesystem == "isolate" or network == "none") else 0
    netns = network == "none" and kernel.netns
    return IsolationPlan(
        netns=netns,
        seccomp_net=network == "none" and not netns and kernel.seccomp,
        landlock_fs=(FS_ISOLATE if filesystem == "isolate" else FS_WRITES) if abi >= 1 else None,
        landlock_tcp=network == "none" and abi >= 4,
        scope_signal=abi >= 6,
        scope_abstract_unix=abi >= 6,
        private_ns=abi >= 3 and kernel.private_ns,  # truncation (ABI 3) is part of the /proc grant
    )


def plan_notices(network: str, filesystem: str, kernel: KernelSupport) -> list[str]:
    """What the settings ask for that this machine cannot give, one line each, with the fix."""
    plan = plan_for(network, filesystem, kernel)
    out = []
    if network == "none" and not plan.netns:
        if plan.seccomp_net:
            how = ("IPv4/IPv6/raw sockets refused by a seccomp filter"
                   + (", abstract unix sockets by the Landlock scope" if plan.scope_abstract_unix else
                      "; abstract unix sockets of host processes stay reachable"))
        elif plan.landlock_tcp:
            how = "TCP connect/bind blocked by Landlock, UDP still open"
        else:
            how = "candidates can reach the network — use sandbox.kind: docker to isolate it"
        out.append(f"local sandbox: no private network namespace (needs root); {how}")
    if filesystem == "isolate" and plan.landlock_fs is None:
        out.append("local sandbox: Landlock unavailable (Linux >= 5.13 needed): candidates can read files "
                   "outside their workdir — use sandbox.kind: docker")
    if plan.landlock_fs is not None and not plan.private_ns:
        out.append("local sandbox: no private PID/mount namespaces (needs root or unprivileged user namespaces): "
                   "a job's child processes cannot start CUDA (error 304) and share the host's /dev/shm "
                   "read-only — use sandbox.kind: docker for GPU candidates that fork")
    if plan.uses_landlock and not plan.scope_signal:
        out.append(f"local sandbox: Landlock ABI {kernel.landlock_abi} < 6: candidates can signal other "
                   "processes of this user (Arbor included) — use sandbox.kind: docker")
    return out


# ---------------------------------------------------------------------------------- the child side
class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32)]


def cap_last_cap() -> int:
    try:
        return int(open("/proc/sys/kernel/cap_last_cap").read())
    except (OSError, ValueError):
        return 40


def make_capability_dropper():  # type: ignore[no-untyped-def]
    """A child-side function that makes sure ``execve`` grants root *no* capabilities.

    Landlock's ptrace scoping is bypassed by CAP_SYS_PTRACE, and a root child could read
    ``/proc/<arbor>/environ`` or signal anything; an empty bounding set plus cleared inheritable
    and ambient sets leave it uid 0 (so root-owned interpreters still load) but powerless.
    """
    lib = libc()
    prctl, capget, capset = lib.prctl, lib.capget, lib.capset
    last = cap_last_cap()
    header, data = _CapHeader(0x20080522, 0), (_CapData * 2)()

    def drop() -> None:
        for cap in range(last + 1):
            prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)
        prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
        if capget(ctypes.byref(header), data) == 0:
            data[0].inheritable = data[1].inheritable = 0
            capset(ctypes.byref(header), data)

    return drop


class ChildIsolation:
    """One job's isolation, prepared in the parent; ``apply`` in the child, ``close`` in the parent.

    Order in the child: the namespaces first (they need the capabilities the next step drops; the
    private PID namespace makes the rest happen in a forked child, its parent waiting as a reaper),
    then capabilities, no_new_privs, Landlock, seccomp. Every layer that cannot be applied raises:
    a job never runs with less than its plan says."""

    def __init__(self, plan: IsolationPlan, ruleset: Ruleset | None, net_filter: NetworkFilter | None,
                 namespaces: private_ns.PrivateNamespaces | None = None) -> None:
        self.plan, self.ruleset, self.net_filter, self.namespaces = plan, ruleset, net_filter, namespaces
        lib = libc()
        self._prctl, self._unshare = lib.prctl, lib.unshare
        self._drop_caps = make_capability_dropper() if os.geteuid() == 0 else None

    def apply(self) -> None:
        if self.plan.netns and self._unshare(CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNET) failed")
        ns = self.namespaces
        if ns is not None:
            ns.enter()
        if self._drop_caps is not None:
            self._drop_caps()
        if self._prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
        if self.ruleset is not None:
            self.ruleset.restrict_self(private_proc=ns is not None,
                                       shm=private_ns.SHM if ns is not None and ns.private_shm else None)
        if self.net_filter is not None:
            self.net_filter.install()

    def close(self) -> None:
        if self.ruleset is not None:
            self.ruleset.close()


def prepare(plan: IsolationPlan, workdir: str, read_paths: list[str] | tuple[str, ...] = (),
            abi: int | None = None) -> ChildIsolation:
    """Build ``plan`` for one job in ``workdir``: open paths, create the ruleset, assemble BPF."""
    ruleset = None
    if plan.uses_landlock:
        ruleset = Ruleset.build(landlock_abi() if abi is None else abi, fs=plan.landlock_fs, workdir=workdir,
                                read_paths=list(read_paths), tcp=plan.landlock_tcp, scope_signal=plan.scope_signal,
                                scope_abstract_unix=plan.scope_abstract_unix)
    try:
        net_filter = NetworkFilter() if plan.seccomp_net else None
        namespaces = private_ns.PrivateNamespaces(workdir) if plan.private_ns else None
        return ChildIsolation(plan, ruleset, net_filter, namespaces)
    except BaseException:
        if ruleset is not None:
            ruleset.close()
        raise


def default_read_paths() -> list[str]:
    """What a Python child needs to start: the interpreter prefix, site-packages, system libs.

    /etc is limited to the files the dynamic loader and libc read; /proc is readable (torch reads
    cpuinfo and its own maps) but other processes' environ/mem stay closed by Landlock's ptrace
    scoping. /dev and /sys are readable for GPU drivers; /dev is also writable (device nodes).
    """
    paths = ["/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/opt", "/proc", "/sys",
             "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime",
             "/etc/passwd", "/etc/group", "/etc/nsswitch.conf", "/etc/os-release",
             "/etc/alternatives", "/etc/ssl/certs", "/etc/OpenCL", "/etc/vulkan",
             sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(os.path.realpath(sys.executable))]
    try:
        paths += site.getsitepackages()
    except AttributeError:  # virtualenvs built by old tools
        pass
    # Packages can also come from `pip install --user` (~/.local/...) or from a site directory a
    # `.pth` line or PYTHONPATH put on sys.path (a venv layered over another environment's
    # site-packages). Without them a candidate's import of torch or setuptools fails with
    # PermissionError inside the sandbox. Only site directories: never the checkout or the cwd,
    # which hold the reference and the campaign's files.
    try:
        paths.append(site.getusersitepackages())
    except AttributeError:
        pass
    paths += [p for p in sys.path if os.path.basename(p.rstrip(os.sep)) in ("site-packages", "dist-packages")]
    return list(dict.fromkeys(p for p in paths if p and os.path.exists(p)))


def _probe_netns() -> None:
    if libc().unshare(CLONE_NEWNET) != 0:
        raise OSError(ctypes.get_errno(), "unshare")


@lru_cache(maxsize=1)
def netns_available() -> bool:
    """Whether this process may give a child its own (empty) network namespace. Checked once."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        r = subprocess.run([sys.executable, "-I", "-c", "pass"], preexec_fn=_probe_netns,
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return r.returncode == 0
