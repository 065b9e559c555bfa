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

from ..harness import cpu_facts

__all__ = ["host_fingerprint"]


@lru_cache(maxsize=1)
def _static() -> dict:
    return {"host": socket.gethostname(), "kernel": platform.release(),
            "cpu_model": cpu_facts.cpu_model() or platform.machine(),
            "cpu_count": os.cpu_count()}


def host_fingerprint() -> dict:
    fp = dict(_static())
    fp["governor"] = cpu_facts.read(cpu_facts.GOVERNOR)
    fp["cpu_max_khz"] = cpu_facts.read(cpu_facts.MAX_KHZ)
    try:
        fp["loadavg_1m"] = round(os.getloadavg()[0], 2)
    except OSError:
        fp["loadavg_1m"] = None
    return fp
