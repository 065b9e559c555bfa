"""Which Landlock filesystem right does a GPU driver need? Bisects it on the machine, unattended.

    python scripts/landlock_rights.py            # one JSON line per variant

Each variant is the sandbox's own `filesystem: isolate` ruleset (the interpreter's read paths, the
workdir, device nodes) plus one extra grant, applied in a forked child that then calls `cuInit`
through ctypes (no torch: a fraction of a second each). `scripts/device_probe.py` says *which
layer* breaks the device; this says *which right* within the filesystem rules — how the own
`/proc/<pid>` grant of `sandbox/runners/landlock.py` was found on an H100 host (docs/gpu.md). Exit 0.
"""

from __future__ import annotations

import ctypes
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sandbox.runners import isolation  # noqa: E402  (the checkout, installed or not)
from sandbox.runners import landlock as L  # noqa: E402

OWN_PROC = "<own /proc/pid>"  # added in the child, as the sandbox does


def variants(work: str) -> dict[str, tuple[int, list[tuple[str, int]]]]:
    abi = L.landlock_abi()
    handled, read, wt = L._handled_fs(abi), L._READ, L._WRITE_FILE | L._TRUNCATE
    base = [(p, read) for p in isolation.default_read_paths()] + [
        (work, handled), ("/dev", read | L._WRITE_FILE | L._IOCTL_DEV)]
    v = {"isolate without the own-/proc grant": (handled, base),
         "+ own /proc/pid write+truncate (the sandbox's rules)": (handled, base + [(OWN_PROC, wt)]),
         "+ own /proc/pid write": (handled, base + [(OWN_PROC, L._WRITE_FILE)]),
         "+ /proc write+truncate": (handled, base + [("/proc", wt)]),
         "+ /proc/driver write+truncate": (handled, base + [("/proc/driver", wt)]),
         "+ /proc/sys write+truncate": (handled, base + [("/proc/sys", wt)]),
         "+ /sys write+truncate": (handled, base + [("/sys", wt)]),
         "+ /dev everything": (handled, base + [("/dev", handled)]),
         "+ /dev/shm everything": (handled, base + [("/dev/shm", handled)]),
         "+ /tmp everything": (handled, base + [("/tmp", handled)]),
         "+ /run everything": (handled, base + [("/run", handled)]),
         "+ /etc read": (handled, base + [("/etc", read)]),
         "+ $HOME everything": (handled, base + [(os.path.expanduser("~"), handled)]),
         "reads anywhere (filesystem: writes)": (handled, [("/", read)] + base[-2:]),
         "everything everywhere (Landlock on, nothing denied)": (handled, [("/", handled)])}
    if abi >= 5:
        v["IOCTL_DEV not handled"] = (handled & ~L._IOCTL_DEV, base)
    return v


def attempt(handled: int, rules: list[tuple[str, int]]) -> dict:
    abi = L.landlock_abi()
    attr = L._RulesetAttr(handled, 0, 0)
    fd = L.libc().syscall(L._SYS_CREATE, ctypes.byref(attr), ctypes.c_size_t(8 if abi < 4 else (16 if abi < 6 else 24)),
                          ctypes.c_uint32(0))
    if fd < 0:
        return {"error": f"landlock_create_ruleset: {os.strerror(ctypes.get_errno())}"}
    own = 0
    for path, access in rules:
        if path == OWN_PROC:
            own |= access
        else:
            L.Ruleset._add(fd, path, access & handled)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - reports through the pipe
        os.close(r)
        try:
            L.libc().prctl(isolation.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
            if own:
                L.Ruleset._add(fd, "/proc/self", own & handled)
            L.Ruleset(fd, abi).restrict_self()
            rc = ctypes.CDLL("libcuda.so.1").cuInit(0)
            msg = {"cuInit": rc, "starts": rc == 0}
        except Exception as exc:  # noqa: BLE001 - the line says what broke
            msg = {"error": f"{type(exc).__name__}: {exc}"}
        os.write(w, json.dumps(msg).encode())
        os._exit(0)
    os.close(w)
    os.close(fd)
    out = os.read(r, 4096).decode()
    os.close(r)
    os.waitpid(pid, 0)
    return json.loads(out or '{"error": "the child said nothing"}')


def main() -> int:
    if L.landlock_abi() < 1:
        print(json.dumps({"error": "no Landlock on this kernel: nothing to bisect"}))
        return 0
    import ctypes.util

    if ctypes.util.find_library("cuda") is None:  # found, not loaded: each child loads its own
        print(json.dumps({"error": "no CUDA driver (libcuda) here: run this on the GPU host"}))
        return 0
    work = tempfile.mkdtemp(prefix="arbor-landlock-")
    print(json.dumps({"landlock_abi": L.landlock_abi(), "kernel": os.uname().release}), flush=True)
    for name, (handled, rules) in variants(work).items():
        print(json.dumps({"variant": name, **attempt(handled, rules)}), flush=True)
    os.rmdir(work)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
