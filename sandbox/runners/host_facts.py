"""Host facts for every measurement's fingerprint, read by Arbor (outside the sandbox).

The harness records what it sees from *inside* the sandbox (torch, device properties); a
container hides the host's CPU governor and hostname, and a candidate could lie about them, so the
runner adds its own view: host, kernel, CPU model, governor and max frequency, load average.
Static facts are read once per process; governor and load every time (they change).
"""

from __future__ import annotations

import os
import platform
import socket
from functools import lru_cache

__all__ = ["host_fingerprint"]


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read().strip()
    except OSError:
        return None


@lru_cache(maxsize=1)
def _static() -> dict:
    cpuinfo = _read("/proc/cpuinfo") or ""
    models = [ln.split(":", 1)[1].strip() for ln in cpuinfo.splitlines()
              if ln.lower().startswith("model name")]
    return {"host": socket.gethostname(), "kernel": platform.release(),
            "cpu_model": models[0] if models else (platform.processor() or platform.machine()),
            "cpu_count": os.cpu_count()}


def host_fingerprint() -> dict:
    fp = dict(_static())
    fp["governor"] = _read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")
    fp["cpu_max_khz"] = _read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_max_freq")
    try:
        fp["loadavg_1m"] = round(os.getloadavg()[0], 2)
    except OSError:
        fp["loadavg_1m"] = None
    return fp
