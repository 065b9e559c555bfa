"""Where the device probe's findings are kept, and what makes them stale.

The probe costs several device jobs (seconds each), and its answer depends only on the machine
and the settings, so it is kept per *key*: host, kernel, GPU driver, device vendor, what the
kernel offers (Landlock ABI, network namespace, seccomp, private namespaces), the runner settings (network,
filesystem), the interpreter and torch, root or not, and the probe itself (its version and the
device job's source). Any change there — a driver upgrade, a new kernel, another setting — is a
cache miss and the probe runs again.

One JSON file, ``device_probe.json`` in Arbor's cache folder (``sandbox/cache_dir.py``: ``~/.cache/arbor``), written
atomically; an unreadable file counts as empty.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import socket
import sys
import tempfile
from importlib import metadata
from pathlib import Path

from ..cache_dir import arbor_cache_dir

__all__ = ["ProbeCache", "probe_key", "driver_version", "default_cache_path", "PROBE_VERSION"]

PROBE_VERSION = 3  # bump when the probe's decisions change meaning (2: a job may write its own /proc/<pid>;
                   # 3: the private_ns layer — a plan cached before it would leave it out)
NVIDIA_VERSION_FILES = ("/sys/module/nvidia/version", "/proc/driver/nvidia/version")
AMD_MODULE = "/sys/module/amdgpu"


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def driver_version() -> tuple[str, str]:
    """(vendor, driver version) of the GPU kernel driver, read from its module; ('none', '')."""
    for path in NVIDIA_VERSION_FILES:
        text = _read(path).strip()
        if text:
            m = re.search(r"Kernel Module(?: for \S+)?\s+(\d[\w.-]*)", text)
            return "nvidia", m.group(1) if m else text.splitlines()[0].strip()
    if os.path.isdir(AMD_MODULE):  # the in-tree amdgpu has no version file: the kernel is its version
        return "amd", _read(os.path.join(AMD_MODULE, "version")).strip() or f"in-tree {platform.release()}"
    return "none", ""


def _torch_version() -> str:
    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return "none"


def probe_key(*, network: str, filesystem: str, landlock_abi: int, netns: bool, seccomp: bool,
              job_source: str, runner: str = "local", private_ns: bool = False) -> dict:
    """Everything the probe's answer depends on (see the module docstring)."""
    vendor, driver = driver_version()
    return {"probe": PROBE_VERSION, "runner": runner, "host": socket.gethostname(), "kernel": platform.release(),
            "vendor": vendor, "driver": driver, "landlock_abi": landlock_abi, "netns": netns, "seccomp": seccomp,
            "private_ns": private_ns, "network": network, "filesystem": filesystem, "root": os.geteuid() == 0,
            "python": f"{sys.executable} {platform.python_version()}", "torch": _torch_version(),
            "job": hashlib.sha256(job_source.encode()).hexdigest()[:16]}


def default_cache_path() -> Path:
    return arbor_cache_dir() / "device_probe.json"


def _digest(key: dict) -> str:
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:24]


class ProbeCache:
    """Probe records by key in one JSON file (``{digest: {"key": ..., "probe": ...}}``)."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path is not None else default_cache_path()

    def _load(self) -> dict:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def get(self, key: dict) -> dict | None:
        entry = self._load().get(_digest(key))
        if isinstance(entry, dict) and entry.get("key") == key and isinstance(entry.get("probe"), dict):
            return entry["probe"]
        return None

    def put(self, key: dict, probe: dict) -> None:
        """Best effort: a cache that cannot be written only costs the next run a probe."""
        data = self._load()
        data[_digest(key)] = {"key": key, "probe": probe}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".device_probe-", suffix=".json")
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(data, f, indent=1, sort_keys=True)
            os.replace(tmp, self.path)
        except OSError:
            try:
                os.unlink(tmp)  # type: ignore[possibly-undefined]
            except (OSError, NameError):
                pass
