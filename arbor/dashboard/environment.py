"""The environment panel: where the numbers on screen come from.

Reads the newest measurement fingerprint. Key names are looked up tolerantly (top level or one
level down, several spellings) because fingerprints grow with the sandbox — GPU runs add clocks,
temperature and throttle reasons — and an old store must still render.
"""

from __future__ import annotations

from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from .feed import FeedState
from .fmt import ago


# NVML throttle ("clocks event") reasons that make a run slower than its locked clocks (locked
# clocks still throttle at the power or thermal limit)
THROTTLE_BITS = {0x4: "SwPowerCap", 0x8: "HwSlowdown", 0x20: "SwThermal", 0x40: "HwThermal", 0x80: "HwPowerBrake"}
# where dynamic GPU readings live: the harness reads them before and after timing; newest first
NESTED = ("gpu_state_end", "gpu_state_start", "gpu", "clocks")


def _find(fp: dict, *keys: str):
    """First present key, at the top level or in a nested reading (the end-of-timing one first)."""
    for d in [fp] + [fp[k] for k in NESTED if isinstance(fp.get(k), dict)] + \
             [v for k, v in fp.items() if isinstance(v, dict) and k not in NESTED]:
        for k in keys:
            if d.get(k) is not None:
                return d[k]
    return None


def _is_gpu(fp: dict) -> bool:
    return str(fp.get("device", "cpu")).startswith(("cuda", "rocm", "hip")) or bool(fp.get("gpu_name"))


def clocks_line(fp: dict) -> Text:
    locked = _find(fp, "clocks_locked", "locked")
    mode = _find(fp, "clock_mode", "clocks_mode")
    gfx = _find(fp, "sm_clock_mhz", "graphics_clock_mhz", "gpu_clock_mhz", "graphics_mhz", "sm_mhz")
    mem = _find(fp, "mem_clock_mhz", "memory_clock_mhz", "memory_mhz", "mem_mhz")
    mhz = " ".join(f"{name} {v} MHz" for name, v in (("sm", gfx), ("mem", mem)) if v is not None)
    note = f" (mode {mode})" if mode else ""
    if not _is_gpu(fp):
        gov = fp.get("governor")
        return Text(f"CPU run: no GPU clocks to lock{note}; governor {gov or 'unknown'}", style="dim")
    if locked is True:
        return Text.assemble((f"locked {mhz}".strip(), "green"), (note, "dim"))
    if locked is False:
        return Text.assemble((f"NOT locked {mhz}".strip(), "bold yellow"), (note, "dim"))
    return Text.assemble((f"unknown {mhz}".strip(), "yellow"), (note, "dim"))


def throttle_text(thr) -> Text:
    if isinstance(thr, int):
        bad = [name for bit, name in THROTTLE_BITS.items() if thr & bit]
        return Text(", ".join(bad) + f" (0x{thr:x})", style="bold red") if bad else Text(f"none (0x{thr:x})", style="green")
    bad = thr not in ([], "", "none", None)
    return Text(str(thr), style="bold red" if bad else "green")


def env_panel(st: FeedState, width: int, height: int) -> Panel:
    fp = st.fingerprint or {}
    t = Table.grid(padding=(0, 1), expand=True)
    t.add_column(style="bold", no_wrap=True, min_width=11)
    t.add_column(overflow="ellipsis", no_wrap=True, ratio=1)
    if not fp:
        t.add_row("device", Text("no measurement yet", style="dim"))
    else:
        dev = fp.get("device", "?")
        name = fp.get("gpu_name") or fp.get("device_name") or fp.get("cpu_model") or ""
        cores = f" · {fp['cpu_affinity']} cores" if fp.get("cpu_affinity") else ""
        threads = f" · {fp['num_threads']} thread(s)" if fp.get("num_threads") else ""
        t.add_row("device", f"{dev} · {name}{cores}{threads}")
        host = [fp.get("host", "?")] + [f"{k} {fp[k]}" for k in ("torch", "python") if fp.get(k)]
        t.add_row("host", " · ".join(host))  # a serving measurement runs no torch of its own
        t.add_row("clocks", clocks_line(fp))
        temp = _find(fp, "temperature_c", "gpu_temperature_c", "temp_c", "gpu_temp_c")
        power = _find(fp, "power_w")
        t.add_row("temperature", Text((f"{temp} °C" if temp is not None else "not reported")
                                      + (f" · {power:.0f} W" if isinstance(power, (int, float)) else ""),
                                      style="" if temp is not None else "dim"))
        thr = _find(fp, "throttle_reasons", "clocks_throttle_reasons", "throttle")
        if thr is not None:
            t.add_row("throttle", throttle_text(thr))
        elif fp.get("loadavg_1m") is not None:
            t.add_row("host load", f"{fp['loadavg_1m']:.2f} (1 min average at measurement)")
    m = st.last_measurement
    if m is not None:
        t.add_row("last series", f"node {m.node_id} #{m.attempt} {m.purpose} {m.status} "
                                 f"{m.duration_s:.1f}s ({m.runner}) {ago(m.created_at)}")
    spec = (st.campaign.spec if st.campaign else None) or {}
    sandbox = (spec.get("sandbox") or {}).get("kind")
    if sandbox:
        t.add_row("sandbox", f"{sandbox} · {st.measurement_count} measurement series")
    return Panel(t, title="environment", border_style="white", height=height)
