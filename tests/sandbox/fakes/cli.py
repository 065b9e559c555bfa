"""``nvidia-smi`` and ``amd-smi`` executables over a ``FakeMachine`` (its JSON state file).

Output and errors follow the tools' documented forms: nvidia-smi's ``--query-gpu`` CSV, ``-L``
listing MIG devices indented under their GPU, multi-line errors ending in "Terminating early due
to previous errors."; amd-smi's ``--json`` documents (list/static/metric) with "N/A" for absent
sensors (MI300X has no edge temperature) and VBIOS before the driver in ``static``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from .machine import FakeMachine

_REPO = Path(__file__).resolve().parents[3]


def install_cli(bin_dir: Path, machine: FakeMachine, name: str) -> str:
    bin_dir.mkdir(parents=True, exist_ok=True)
    exe = bin_dir / name
    exe.write_text(f"#!{sys.executable}\nimport sys\nsys.path.insert(0, {str(_REPO)!r})\n"
                   f"from tests.sandbox.fakes.cli import main\nsys.exit(main({str(machine.path)!r}))\n")
    exe.chmod(0o755)
    return str(exe)


def _fail(*lines: str, code: int = 4) -> int:
    for ln in lines:
        print(ln, file=sys.stderr)
    return code


def _value(args: list[str], flag: str) -> str | None:
    for a in args:
        if a.startswith(flag + "="):
            return a.split("=", 1)[1]
    if flag in args and args.index(flag) + 1 < len(args):
        return args[args.index(flag) + 1]
    return None


def main(state: str) -> int:
    m = FakeMachine.load(state)
    args = sys.argv[1:]
    with open(state + ".log", "a") as log:
        log.write(" ".join(args) + "\n")
    return _amd(m, args) if os.path.basename(sys.argv[0]) == "amd-smi" else _nvidia(m, args)


_NOT_ROOT = "{what} is not permitted for the current user on GPU {pci}."
_END = "Terminating early due to previous errors."


def _nvidia(m: FakeMachine, args: list[str]) -> int:
    key = _value(args, "-i") or _value(args, "--id")
    if "-L" in args:
        for i, g in enumerate(m.gpus):
            print(f"GPU {i}: {g.name} (UUID: {g.uuid})")
            for j, mig in enumerate(g.mig):
                print(f"  MIG 1g.10gb     Device  {j}: (UUID: {mig})")
        return 0
    gpus = [m.find(key)] if key is not None else list(m.gpus)
    if None in gpus:
        return _fail(f"No devices were found matching the identifier {key}", code=6)
    query = _value(args, "--query-gpu")
    if query:
        fields = query.split(",")
        bad = [f for f in fields if f == ("clocks_event_reasons.active" if m.old_field_names
                                         else "clocks_throttle_reasons.active")]
        if bad:
            return _fail(f'Field "{bad[0]}" is not a valid field to query.', code=2)
        for g in gpus:
            gr, mem, reasons = m.clocks(g)
            vals = {"name": g.name, "uuid": g.uuid, "driver_version": "550.54.15", "pci.bus_id": g.pci,
                    "clocks.gr": gr, "clocks.sm": gr, "clocks.mem": mem, "temperature.gpu": 45,
                    "power.draw": 650.0 if g.busy else 70.0,
                    "clocks_event_reasons.active": f"0x{reasons:016X}",
                    "clocks_throttle_reasons.active": f"0x{reasons:016X}",
                    "clocks.default_applications.graphics": g.default_app_mhz, "clocks.max.graphics": g.max_mhz,
                    "clocks.max.memory": g.mem_mhz, "clocks.applications.graphics": g.app_mhz or g.default_app_mhz,
                    "clocks.applications.memory": g.app_mem_mhz or g.mem_mhz}
            print(", ".join(str(vals[f]) for f in fields))
        return 0
    if _value(args, "--query-compute-apps"):
        for g in gpus:
            for p in g.procs:
                print(p)
        return 0
    g = gpus[0]
    setters = [a for a in args if a.startswith("--") and a.split("=")[0] in (
        "--lock-gpu-clocks", "--lock-memory-clocks", "--applications-clocks", "--reset-gpu-clocks",
        "--reset-memory-clocks", "--reset-applications-clocks")]
    if not setters:
        return _fail("Invalid combination of input arguments.", code=2)
    op, _, val = setters[0].partition("=")
    if not m.root:
        what = {"--lock-gpu-clocks": "Setting locked GPU clocks", "--lock-memory-clocks": "Setting locked memory clocks"
                }.get(op, "Changing clocks")
        return _fail(_NOT_ROOT.format(what=what, pci=g.pci), _END)
    if op == "--lock-gpu-clocks":
        if not m.ignore_lock:
            g.locked = int(val.split(",")[0])
        print(f"GPU clocks set to \"(gpuClkMin {val.split(',')[0]}, gpuClkMax {val.split(',')[-1]})\" for GPU {g.pci}")
    elif op == "--lock-memory-clocks":
        if not m.mem_lock_supported:
            return _fail(f"Setting locked memory clocks is not supported for GPU {g.pci}.", _END, code=3)
        g.mem_locked = int(val.split(",")[0])
    elif op == "--applications-clocks":
        g.app_mem_mhz, g.app_mhz = (int(v) for v in val.split(","))
    elif op == "--reset-gpu-clocks":
        g.locked = None
    elif op == "--reset-memory-clocks":
        if not m.mem_lock_supported:
            return _fail(f"Resetting locked memory clocks is not supported for GPU {g.pci}.", _END, code=3)
        g.mem_locked = None
    elif op == "--reset-applications-clocks":
        g.app_mhz = g.app_mem_mhz = None
    m.save()
    return 0


def _amd(m: FakeMachine, args: list[str]) -> int:
    cmd = args[0] if args else ""
    key = _value(args, "-g")
    if cmd == "list":
        print(json.dumps([{"gpu": i, "bdf": g.pci, "uuid": g.uuid} for i, g in enumerate(m.gpus)]))
        return 0
    g = m.find(key) if key is not None else None
    if g is None:
        return _fail(f"AMDSMI_STATUS_INVAL - Invalid GPU: {key}", code=2)
    i = m.gpus.index(g)
    if cmd == "static":
        print(json.dumps([{"gpu": i, "asic": {"market_name": g.name, "asic_serial": "0x1A2B"},
                           "vbios": {"name": "MI300X", "version": "113-M3000100-102"},
                           "driver": {"name": "amdgpu", "version": "6.8.5"}}]))
        return 0
    if cmd == "metric":
        gr, mem, _ = m.clocks(g)
        print(json.dumps([{"gpu": i, "usage": {"gfx_activity": {"value": 97 if g.busy else 0, "unit": "%"}},
                           "power": {"socket_power": {"value": 650 if g.busy else 140, "unit": "W"}},
                           "clock": {"gfx_0": {"clk": {"value": gr, "unit": "MHz"}},
                                     "mem_0": {"clk": {"value": mem, "unit": "MHz"}}},
                           "temperature": {"edge": "N/A", "hotspot": {"value": 52, "unit": "C"},
                                           "mem": {"value": 40, "unit": "C"}}}]))
        return 0
    if cmd in ("set", "reset"):
        if not m.root:
            return _fail("AMDSMI_STATUS_NO_PERM - Permission Denied: this command requires root", code=13)
        level, det = _value(args, "--perf-level"), _value(args, "--perf-determinism")
        if cmd == "set" and level:
            g.perf_level, g.soft_max_mhz = level, None
        elif cmd == "set" and det:
            g.soft_max_mhz = int(det)
        elif cmd == "reset":
            g.soft_max_mhz, g.perf_level = None, "AUTO"
        m.save()
        return 0
    return _fail(f"unknown command {cmd}", code=2)
