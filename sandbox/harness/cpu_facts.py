"""What a process can read about the CPU it runs on, standard library only: shared by the harness's
fingerprint (inside the job, loaded by path beside it) and the host's (``runners/host_facts.py``,
outside it), which report the same facts from two sides of the sandbox.
"""

from __future__ import annotations

import platform

GOVERNOR = "/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"
MAX_KHZ = "/sys/devices/system/cpu/cpu0/cpufreq/scaling_max_freq"


def read(path: str) -> str | None:
    """A small text file, stripped; None when it cannot be read (a container hides most of /sys)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read().strip()
    except OSError:
        return None


def cpu_model() -> str | None:
    """The first ``model name`` of /proc/cpuinfo, else what ``platform`` says (None: nothing)."""
    cpuinfo = read("/proc/cpuinfo") or ""
    models = [ln.split(":", 1)[1].strip() for ln in cpuinfo.splitlines() if ln.lower().startswith("model name")]
    return models[0] if models else platform.processor() or None
