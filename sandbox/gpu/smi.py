"""The two vendor CLIs as GPU backends: ``nvidia-smi`` (where nvidia-ml-py is missing) and ``amd-smi``.

Both print several lines on failure — nvidia-smi ends with "Terminating early due to previous
errors.", which says nothing — so an error keeps every informative line and names the operation.
"""

from __future__ import annotations

import json
import shutil
import subprocess

from .state import ClockError, GpuState, is_pci_bus_id, permission_fix

__all__ = ["NvidiaSmiBackend", "AmdSmiBackend", "run_cli", "STABLE"]

STABLE = "stable_std"  # AMD lock target: the driver's fixed profiling clocks (perf level STABLE_STD)
_NOISE = ("terminating early due to previous errors",)
_DENIED = ("not permitted", "permission", "insufficient", "requires root", "must be root", "root/admin")


def run_cli(argv: list[str], timeout: float = 20) -> str:
    """stdout of ``argv``, or a ClockError naming the operation with everything the tool said."""
    what = " ".join([argv[0].rsplit("/", 1)[-1], *argv[1:]])
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        raise ClockError(f"{what}: cannot run ({exc})") from None
    if r.returncode != 0:
        lines = [ln.strip() for ln in (r.stderr + "\n" + r.stdout).splitlines() if ln.strip()]
        said = [ln for ln in lines if not ln.lower().rstrip(".").startswith(_NOISE)]
        text = " ".join(said) or f"exit code {r.returncode}"
        if any(w in text.lower() for w in _DENIED):
            raise ClockError(permission_fix(f"{what} ({text})"))
        raise ClockError(f"{what}: {text}")
    return r.stdout


def _num(v: object) -> float | None:
    try:
        return float(str(v).strip())
    except ValueError:
        return None


def _int(v: object) -> int | None:
    n = _num(v)
    return int(n) if n is not None else None


class NvidiaSmiBackend:
    """The nvidia-smi CLI. ``-i`` takes an index, a UUID or a PCI bus id alike."""

    name = "nvidia-smi"
    _BASE = ("name,uuid,driver_version,pci.bus_id,clocks.gr,clocks.mem,clocks.sm,temperature.gpu,"
             "power.draw,{reasons},clocks.default_applications.graphics,clocks.max.graphics,"
             "clocks.max.memory,clocks.applications.graphics,clocks.applications.memory")
    # clocks_throttle_reasons.* is deprecated in favour of clocks_event_reasons.*; drivers older
    # than the rename only know the old name, so it is the fallback.
    _REASONS = ("clocks_event_reasons.active", "clocks_throttle_reasons.active")

    def __init__(self, exe: str | None = None) -> None:
        self.exe = exe or shutil.which("nvidia-smi")
        if self.exe is None:
            raise ClockError("nvidia-smi: not found (no NVIDIA driver on this machine)")
        self._reasons = self._REASONS[0]

    def _query(self, key) -> list[str]:  # type: ignore[no-untyped-def]
        for _ in self._REASONS:
            fields = self._BASE.format(reasons=self._reasons)
            try:
                out = run_cli([self.exe, "-i", str(key), f"--query-gpu={fields}", "--format=csv,noheader,nounits"])
            except ClockError as exc:
                if "not a valid field" in str(exc).lower() and self._reasons == self._REASONS[0]:
                    self._reasons = self._REASONS[1]
                    continue
                raise
            return [v.strip() for v in out.strip().splitlines()[0].split(",")]
        raise ClockError("nvidia-smi: no clock-event reasons field is known to this driver")

    def count(self) -> int:
        """Physical GPUs only: ``-L`` also lists MIG devices, indented under their GPU."""
        out = run_cli([self.exe, "--query-gpu=uuid", "--format=csv,noheader"])
        return sum(1 for ln in out.splitlines() if ln.strip().startswith("GPU-"))

    def state(self, key) -> GpuState:  # type: ignore[no-untyped-def]
        f = self._query(key)
        r = f[9]
        reasons = int(r, 16) if r.startswith("0x") else _int(r)
        return GpuState(index=key, name=f[0], uuid=f[1], driver=f[2], pci_bus_id=f[3],
                        graphics_mhz=_int(f[4]), memory_mhz=_int(f[5]), sm_mhz=_int(f[6]),
                        temperature_c=_num(f[7]), power_w=_num(f[8]), throttle_reasons=reasons)

    def default_targets(self, key) -> tuple:  # type: ignore[no-untyped-def]
        f = self._query(key)
        g, top, m = _int(f[10]), _int(f[11]), _int(f[12])
        if g is not None and top is not None and g < top:
            return g, m, f"default applications clock ({g} MHz, below max boost {top} MHz)"
        return None, m, (f"no sustainable clock known: the default applications clock is max boost ({top} MHz) "
                         "— set sandbox.clock_targets.graphics_mhz to the base clock (nvidia-smi -q -d CLOCK), "
                         "or install nvidia-ml-py to lock at the TDP clock")

    def save(self, key) -> dict:  # type: ignore[no-untyped-def]
        f = self._query(key)
        return {"app_graphics_mhz": _int(f[13]), "app_memory_mhz": _int(f[14]), "app_clocks_set": False}

    def lock(self, key, graphics_mhz, memory_mhz, saved: dict | None = None) -> None:  # type: ignore[no-untyped-def]
        if graphics_mhz is not None:
            run_cli([self.exe, "-i", str(key), f"--lock-gpu-clocks={graphics_mhz},{graphics_mhz}"])
        if memory_mhz is not None:
            try:
                run_cli([self.exe, "-i", str(key), f"--lock-memory-clocks={memory_mhz},{memory_mhz}"])
            except ClockError as exc:
                if "not supported" not in str(exc).lower():
                    raise
                # Before Ampere the memory clock is only settable as an application clock.
                g = graphics_mhz if isinstance(graphics_mhz, int) else self.state(key).graphics_mhz
                run_cli([self.exe, "-i", str(key), f"--applications-clocks={memory_mhz},{g}"])
                if saved is not None:
                    saved["app_clocks_set"] = True

    def restore(self, key, saved: dict | None) -> None:  # type: ignore[no-untyped-def]
        run_cli([self.exe, "-i", str(key), "--reset-gpu-clocks"])
        try:
            run_cli([self.exe, "-i", str(key), "--reset-memory-clocks"])
        except ClockError as exc:
            if "not supported" not in str(exc).lower():
                raise
        if saved and saved.get("app_clocks_set"):
            g, m = saved.get("app_graphics_mhz"), saved.get("app_memory_mhz")
            run_cli([self.exe, "-i", str(key)] + ([f"--applications-clocks={m},{g}"] if g and m
                                                   else ["--reset-applications-clocks"]))

    def reset(self, key) -> None:  # type: ignore[no-untyped-def]
        self.restore(key, None)

    def processes(self, key) -> list[int]:  # type: ignore[no-untyped-def]
        out = run_cli([self.exe, "-i", str(key), "--query-compute-apps=pid", "--format=csv,noheader"])
        return sorted(int(p) for p in out.split() if p.strip().isdigit())


def _walk(obj, *keys):  # type: ignore[no-untyped-def]
    """The value under the first of ``keys`` found (in the order given) anywhere in amd-smi's JSON;
    its layout moves between ROCm releases, the names do not. "N/A" counts as absent."""
    for key in keys:
        found = _find(obj, key)
        if found is not None and found != "N/A":
            return found
    return None


def _find(obj, key):  # type: ignore[no-untyped-def]
    if isinstance(obj, dict):
        if key in obj and obj[key] not in (None, "N/A"):
            return obj[key]
        obj = list(obj.values())
    if isinstance(obj, list):
        for v in obj:
            found = _find(v, key)
            if found is not None:
                return found
    return None


def _value(v) -> float | None:  # type: ignore[no-untyped-def]
    if isinstance(v, dict):
        v = v.get("value", v.get("clk"))
        if isinstance(v, dict):
            v = v.get("value")
    return _num(str(v).split()[0]) if v not in (None, "N/A", "") else None


class AmdSmiBackend:
    """AMD GPUs through ``amd-smi``, addressed by PCI address (``-g`` takes an id, BDF or UUID).

    ``--perf-determinism SCLK`` only sets a soft *maximum* (the clock still drops below it), so it
    is not a lock: the lock is perf level STABLE_STD, the driver's fixed profiling clocks, read
    back under load; ``AUTO`` restores normal power management."""

    name = "amd-smi"

    def __init__(self, exe: str | None = None) -> None:
        self.exe = exe or shutil.which("amd-smi")
        if self.exe is None:
            raise ClockError("amd-smi: not found (no ROCm on this machine)")

    def _json(self, *args: str):  # type: ignore[no-untyped-def]
        try:
            return json.loads(run_cli([self.exe, *args, "--json"]))
        except ValueError:
            raise ClockError(f"amd-smi {' '.join(args)}: output is not JSON — upgrade ROCm") from None

    def _list(self) -> list[dict]:
        data = self._json("list")
        return data if isinstance(data, list) else [data]

    def count(self) -> int:
        return len(self._list())

    def bdf(self, key) -> str:  # type: ignore[no-untyped-def]
        """The PCI address of ``key`` (an amd-smi index, a BDF, or a UUID)."""
        if is_pci_bus_id(key):
            return str(key).lower()
        for g in self._list():
            if str(g.get("gpu")) == str(key) or str(g.get("uuid")) == str(key):
                if g.get("bdf"):
                    return str(g["bdf"]).lower()
        raise ClockError(f"amd-smi: no GPU {key} (amd-smi list shows the ids and PCI addresses)")

    def state(self, key) -> GpuState:  # type: ignore[no-untyped-def]
        dev = self.bdf(key)
        static, metric = self._json("static", "-g", dev), self._json("metric", "-g", dev)
        driver = _find(static, "driver")
        clock = _find(metric, "clock") or metric
        activity = _value(_walk(metric, "gfx_activity"))
        return GpuState(index=key, name=_walk(static, "market_name", "asic_name"),
                        uuid=_walk(_list_entry(self._list(), dev), "uuid") or _walk(static, "asic_serial"),
                        driver=_walk(driver, "version") if isinstance(driver, dict) else None,
                        graphics_mhz=_int(_value(_walk(_walk(clock, "gfx_0", "GFX_0", "sclk"), "clk"))),
                        memory_mhz=_int(_value(_walk(_walk(clock, "mem_0", "MEM_0", "mclk"), "clk"))),
                        # MI300 has no edge sensor ("N/A"): the hotspot (junction) is the one to watch
                        temperature_c=_value(_walk(_find(metric, "temperature") or metric, "hotspot", "edge")),
                        power_w=_value(_walk(metric, "socket_power", "average_socket_power")),
                        throttle_reasons=None, pci_bus_id=dev,
                        busy=None if activity is None else activity > 0)

    def default_targets(self, key) -> tuple:  # type: ignore[no-untyped-def]
        return STABLE, None, "STABLE_STD profiling clocks (amd-smi --perf-level STABLE_STD)"

    def lock(self, key, graphics_mhz, memory_mhz, saved: dict | None = None) -> None:  # type: ignore[no-untyped-def]
        if graphics_mhz not in (STABLE, None) or memory_mhz is not None:
            raise ClockError("amd-smi: AMD clocks cannot be pinned to a chosen MHz (--perf-determinism only sets a "
                             "soft maximum) — leave sandbox.clock_targets unset to lock the STABLE_STD clocks")
        run_cli([self.exe, "set", "-g", self.bdf(key), "--perf-level", "STABLE_STD"])

    def restore(self, key, saved: dict | None) -> None:  # type: ignore[no-untyped-def]
        run_cli([self.exe, "set", "-g", self.bdf(key), "--perf-level", "AUTO"])

    def reset(self, key) -> None:  # type: ignore[no-untyped-def]
        self.restore(key, None)


def _list_entry(entries: list[dict], bdf: str) -> dict:
    return next((g for g in entries if str(g.get("bdf", "")).lower() == bdf), {})
