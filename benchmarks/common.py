"""Shared plumbing of the benchmark scripts: machine description, tables, result files."""

from __future__ import annotations

import json
import os
import platform
import socket
import subprocess
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
LANDSCAPES = ROOT / "benchmarks" / "landscapes"


def machine() -> dict:
    """What a number was measured on; benchmarks on a shared box say so."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                text=True, timeout=5).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        commit = None
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    try:
        import torch

        torch_version = torch.__version__
    except ImportError:  # pragma: no cover
        torch_version = None
    return {"host": socket.gethostname(), "cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(),
            "torch": torch_version, "platform": platform.platform(), "commit": commit,
            "load_avg_at_start": [round(x, 2) for x in load] if load else None}


def quartiles(xs) -> dict:
    """median and IQR of finite values; ``censored`` counts runs that never got there (inf)."""
    a = np.asarray([x for x in xs if x is not None], dtype=float)
    fin = a[np.isfinite(a)]
    out = {"n": int(len(xs)), "censored": int(len(xs) - len(fin))}
    if len(a) == 0:
        return {**out, "median": None, "q1": None, "q3": None}
    # censored runs sort last (inf), so the median is still defined while fewer than half are censored
    q1, med, q3 = (float(v) for v in np.percentile(np.sort(a), [25, 50, 75], method="lower"))
    return {**out, "median": med, "q1": q1, "q3": q3}


def fmt(x, digits: int = 1) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        if x == float("inf"):
            return "inf"
        return f"{x:.{digits}f}"
    return str(x)


def table(rows: list[dict], cols: list[tuple[str, str]]) -> str:
    """Fixed-width text table; ``cols`` are (key, header)."""
    cells = [[h for _, h in cols]] + [[r.get(k, "") if isinstance(r.get(k), str) else fmt(r.get(k)) for k, _ in cols]
                                      for r in rows]
    widths = [max(len(str(row[i])) for row in cells) for i in range(len(cols))]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def write_result(name: str, data: dict, started: float) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    payload = {"benchmark": name, "finished": datetime.now(timezone.utc).isoformat(timespec="seconds"),
               "duration_s": round(time.monotonic() - started, 1), "machine": machine(), **data}
    path.write_text(json.dumps(payload, indent=1, default=str) + "\n")
    return path


def landscape_paths(names: list[str] | None = None) -> list[Path]:
    """Recorded landscapes in benchmarks/landscapes/ (all, or those named by stem), or files given by path."""
    if names and all(Path(n).is_file() for n in names):
        return [Path(n) for n in names]
    paths = sorted(LANDSCAPES.glob("*.json"))
    if names:
        wanted = set(names)
        paths = [p for p in paths if p.stem in wanted]
    return paths
