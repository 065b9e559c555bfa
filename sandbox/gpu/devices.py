"""Peak rates per device, for the Critic's speed-of-light floor (reward hack #12 in
docs/integrity.md#reward-hacks).

GPUs come from a table of published dense peaks per board variant (SXM, PCIe, NVL; the superchips
GH200/GB200 have their own rows). CPUs have no useful public table, so the
harness measures them once per (host, CPU model, thread count, torch) with a micro-benchmark and
this module caches the result on disk, merging by maximum: a measurement disturbed by load can
only make the floor more lenient, never stricter.
"""

from __future__ import annotations

import json
import os
import platform
import re
import socket
import time
from dataclasses import asdict, dataclass
from pathlib import Path

__all__ = ["DevicePeak", "GPU_PEAKS", "gpu_peak", "peak_for", "cpu_key", "cached_cpu_peak",
           "store_cpu_peak", "min_time_s"]

_TB = 1e12


@dataclass(frozen=True)
class DevicePeak:
    name: str
    fp32_flops: float  # non-tensor-core FP32
    tf32_flops: float  # dense tensor-core TF32 (or the matrix-core FP32 rate on AMD)
    half_flops: float  # dense FP16/BF16 tensor-core
    fp64_flops: float
    bytes_per_s: float  # HBM bandwidth

    def flops_for(self, dtype: str | None) -> float:
        """The fastest rate an implementation could reach for outputs of ``dtype``: fp32
        problems may use TF32-class units only within tolerance, but the floor allows for it."""
        d = (dtype or "float32").lower()
        if d in ("float16", "bfloat16", "half") or d.startswith("float8"):
            return self.half_flops * (2.0 if d.startswith("float8") else 1.0)
        if d == "float64":
            return self.fp64_flops
        return max(self.fp32_flops, self.tf32_flops)


# Dense (no 2:4 sparsity) datasheet peaks, per variant: the same chip ships with different memory
# and power limits (H100: SXM 3.35 TB/s, PCIe 2.0 TB/s, NVL 3.9 TB/s), and a floor built from the
# wrong variant's bandwidth either flags honest kernels or misses impossible ones.
GPU_PEAKS: dict[str, DevicePeak] = {
    "GB200": DevicePeak("GB200", 80 * _TB, 1250 * _TB, 2500 * _TB, 40 * _TB, 8.0 * _TB),  # per GPU
    "B200": DevicePeak("B200", 80 * _TB, 1100 * _TB, 2250 * _TB, 40 * _TB, 8.0 * _TB),
    "GH200": DevicePeak("GH200", 67 * _TB, 495 * _TB, 990 * _TB, 67 * _TB, 4.9 * _TB),  # HBM3e variant (HBM3: 4.0)
    "H200": DevicePeak("H200", 67 * _TB, 495 * _TB, 990 * _TB, 67 * _TB, 4.8 * _TB),
    "H100 NVL": DevicePeak("H100 NVL", 60 * _TB, 418 * _TB, 835 * _TB, 60 * _TB, 3.9 * _TB),
    "H100 PCIe": DevicePeak("H100 PCIe", 51 * _TB, 378 * _TB, 756 * _TB, 51 * _TB, 2.0 * _TB),
    "H100 SXM": DevicePeak("H100 SXM", 67 * _TB, 495 * _TB, 990 * _TB, 67 * _TB, 3.35 * _TB),
    # H800: the export variant of H100 — same tensor throughput, NVLink and FP64 cut
    "H800 PCIe": DevicePeak("H800 PCIe", 51 * _TB, 378 * _TB, 756 * _TB, 0.8 * _TB, 2.0 * _TB),
    "H800 SXM": DevicePeak("H800 SXM", 67 * _TB, 495 * _TB, 990 * _TB, 1 * _TB, 3.35 * _TB),
    "A100": DevicePeak("A100", 19.5 * _TB, 156 * _TB, 312 * _TB, 19.5 * _TB, 2.04 * _TB),
    "MI325X": DevicePeak("MI325X", 163.4 * _TB, 653.7 * _TB, 1307.4 * _TB, 163.4 * _TB, 6.0 * _TB),
    "MI300X": DevicePeak("MI300X", 163.4 * _TB, 653.7 * _TB, 1307.4 * _TB, 163.4 * _TB, 5.3 * _TB),
}

# (pattern on the upper-cased name, table key), most specific first. Model numbers are matched as
# whole tokens so "GH200" never reads as H200 nor "GB200" as B200.
_NAME_RULES = (
    (r"(?<![A-Z0-9])GB200(?![0-9])", "GB200"),
    (r"(?<![A-Z0-9])B200(?![0-9])", "B200"),
    (r"(?<![A-Z0-9])GH200(?![0-9])", "GH200"),
    (r"(?<![A-Z0-9])H200(?![0-9])", "H200"),
    (r"(?<![A-Z0-9])H100\b.*\bNVL\b", "H100 NVL"),
    (r"(?<![A-Z0-9])H100\b.*\bPCIE\b", "H100 PCIe"),
    (r"(?<![A-Z0-9])H100(?![0-9])", "H100 SXM"),  # "NVIDIA H100 80GB HBM3" is the SXM board
    (r"(?<![A-Z0-9])H800\b.*\bPCIE\b", "H800 PCIe"),
    (r"(?<![A-Z0-9])H800(?![0-9])", "H800 SXM"),
    (r"(?<![A-Z0-9])A100(?![0-9])", "A100"),
    (r"(?<![A-Z0-9])MI325X\b", "MI325X"),
    (r"(?<![A-Z0-9])MI300X\b", "MI300X"),
)


def gpu_peak(name: str | None) -> DevicePeak | None:
    """Match a CUDA/ROCm device name ("NVIDIA H100 80GB HBM3", "AMD Instinct MI300X") to the table."""
    upper = (name or "").upper()
    for pattern, key in _NAME_RULES:
        if re.search(pattern, upper):
            return GPU_PEAKS[key]
    return None


def peak_for(fingerprint: dict, dtype: str | None, measured: dict | None) -> dict | None:
    """{"flops_per_s", "bytes_per_s", "source"} for a measurement, or None when unknown."""
    device = str(fingerprint.get("device") or "cpu")
    if device.startswith("cuda"):
        p = gpu_peak(fingerprint.get("gpu_name") or fingerprint.get("device_name"))
        if p is None:
            return None
        return {"flops_per_s": p.flops_for(dtype), "bytes_per_s": p.bytes_per_s,
                "source": f"table:{p.name}"}
    if measured and measured.get("bytes_per_s"):
        return {"flops_per_s": float(measured.get("flops_per_s") or 0.0),
                "bytes_per_s": float(measured["bytes_per_s"]),
                "source": f"cpu-microbenchmark ({measured.get('source', 'measured')})"}
    return None


def min_time_s(flops: float | None, nbytes: float | None, peak: dict) -> float:
    """Speed-of-light time: the slower of the compute bound and the memory bound."""
    t = 0.0
    if flops and peak.get("flops_per_s"):
        t = max(t, float(flops) / float(peak["flops_per_s"]))
    if nbytes and peak.get("bytes_per_s"):
        t = max(t, float(nbytes) / float(peak["bytes_per_s"]))
    return t


# ---- CPU peaks, measured by the harness and cached here -----------------------------------
_TTL_S = 30 * 24 * 3600
# this process's copy: where the cache file cannot be written (a read-only home on a cluster node),
# the peak is still measured once per process, not once per measurement (a second or two each)
_MEMO: dict[str, dict] = {}


def _cache_path() -> Path:
    root = os.environ.get("ARBOR_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "arbor")
    return Path(root) / "device_peaks.json"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cpu_key() -> str:
    """The benchmark always uses every core the sandbox may use, so the key has no thread count."""
    try:
        import torch  # noqa: PLC0415

        tv = torch.__version__
    except ImportError:
        tv = "?"
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"{socket.gethostname()}|{_cpu_model()}|{cores}|{tv}"


def _load() -> dict:
    try:
        data = json.loads(_cache_path().read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def cached_cpu_peak(key: str | None = None) -> dict | None:
    key = key or cpu_key()
    entry = _load().get(key) or _MEMO.get(key)
    if not isinstance(entry, dict) or time.time() - float(entry.get("at", 0)) > _TTL_S:
        return None
    return {k: entry[k] for k in ("flops_per_s", "bytes_per_s", "threads") if k in entry} | {
        "source": "cached"}


def store_cpu_peak(peak: dict, key: str | None = None) -> None:
    """Merge by maximum and write atomically; a cache that cannot be written is only slower."""
    key = key or cpu_key()
    data = _load()
    old = data.get(key) if isinstance(data.get(key), dict) else {}
    entry = {"flops_per_s": max(float(peak.get("flops_per_s") or 0), float(old.get("flops_per_s") or 0)),
             "bytes_per_s": max(float(peak.get("bytes_per_s") or 0), float(old.get("bytes_per_s") or 0)),
             "threads": peak.get("threads"), "at": old.get("at") or time.time()}
    data[key] = _MEMO[key] = entry
    path = _cache_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, indent=1))
        os.replace(tmp, path)
    except OSError:
        pass


def describe(peak: DevicePeak) -> dict:
    return asdict(peak)
