"""The host's side of the compile-artifact cache: one archive per candidate, keyed by everything
that changes its compiled code.

A compiled candidate's first measurement leaves its Inductor/Triton artifacts behind as a zip
(``harness/compile_cache.py`` packs it inside the job); the host keeps it under the candidate's
*key* and ships it into that candidate's next measurement job (its confirmation, tie-break and
final measurements), which then loads instead of compiling. Jobs carry files, never host paths,
so this works the same for the local runner, Docker and Ray workers (each node keeps its own).

The key is a digest of the candidate's source, the problem's source, sizes, scale, dtype, device,
thread count, the runner (and its image), and the host's torch/Triton/Python versions and CPU; the
job checks the versions it really runs (a container's) against the archive's manifest too. Two
different candidates never share a key, so never an archive: whatever a candidate plants in its
cache is read only by its own later measurements (docs/integrity.md#compile-cache). The cache is
used only where it cannot touch the reference: not for the A/A baseline, and not when the problem's
own Model compiles anything (``torch.compile``, Triton, extensions), because the reference runs in
the same process and would read the candidate's cache.

``ARBOR_COMPILE_CACHE=off`` turns it off; the folder is ``$ARBOR_CACHE_DIR/compile`` (default
``~/.cache/arbor/compile``), least recently used archives are dropped beyond
``ARBOR_COMPILE_CACHE_MB`` (4096). It is not a campaign setting on purpose: reusing compiled code
does not change what a measurement means, and campaign settings are fingerprinted
(``arbor/campaign/changes.py``), so a new one would make every stored campaign look changed.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import platform
import re
import sys
import threading
from pathlib import Path
from ..cache_dir import arbor_cache_dir

__all__ = ["CompileCache", "cache_key", "uses_compiler", "uses_dynamo", "uses_extension", "default_cache", "ARCHIVE_IN", "ARCHIVE_OUT"]

ARCHIVE_IN, ARCHIVE_OUT = "compile-cache-in.zip", "compile-cache-out.zip"
MAX_ENTRY_BYTES = 128 << 20  # the harness never packs more (harness/compile_cache.py)
_DEFAULT_MB = 4096
# What makes a source compile at run time. A candidate that compiles in a way this misses only
# goes without the cache (slower, never wrong).
_COMPILES = re.compile(r"torch\s*\.\s*compile|_dynamo|_inductor|\btriton\b|load_inline|cpp_extension"
                       r"|aot_compile|torch\s*\.\s*export")


_EXTENSION = re.compile(r"load_inline|cpp_extension")
_DYNAMO = re.compile(r"torch\s*\.\s*compile|_dynamo|_inductor|aot_compile|torch\s*\.\s*export")


def uses_compiler(source: str) -> bool:
    return bool(_COMPILES.search(source or ""))


def uses_extension(source: str) -> bool:
    """Whether the source builds a C++ extension when imported (``load_inline``)."""
    return bool(_EXTENSION.search(source or ""))


def uses_dynamo(source: str) -> bool:
    """Whether the source goes through Dynamo and Inductor (not only Triton or a C++ extension):
    its job asks a warm worker for the ``compiler`` warm-up (``kernel_harness.warm_compiler``)."""
    return bool(_DYNAMO.search(source or ""))


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


_HOST: dict | None = None


def host_environment() -> dict:
    global _HOST
    if _HOST is None:
        _HOST = {"torch": _version("torch"), "triton": _version("triton") or _version("pytorch-triton"),
                 "python": sys.version.split()[0], "machine": platform.machine(), "cpu": _cpu_model()}
    return dict(_HOST)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def cache_key(req, runner_identity: str, environment: dict | None = None) -> str | None:  # type: ignore[no-untyped-def]
    """The candidate's key (hex digest), or None where the cache must not be used: an A/A run
    (no candidate), a candidate that compiles nothing, or a reference that compiles itself."""
    if req.mode != "ab" or not uses_compiler(req.candidate_source) or uses_compiler(req.problem_source):
        return None
    parts = {
        "candidate": _sha(req.candidate_source), "problem": _sha(req.problem_source),
        "sizes": dict(sorted((req.sizes or {}).items())), "size_scale": req.size_scale, "dtype": req.dtype,
        "device": req.device, "num_threads": req.num_threads, "runner": runner_identity,
        "environment": environment if environment is not None else host_environment(),
    }
    return _sha(json.dumps(parts, sort_keys=True, default=str))


def runner_identity(runner) -> str:  # type: ignore[no-untyped-def]
    """The runner kind and, for containers, the image: the environment the job really runs in."""
    inner = getattr(runner, "inner", runner)  # an executor slot's wrapper
    image = getattr(inner, "image", None)
    return f"{getattr(inner, 'name', type(inner).__name__)}:{getattr(image, 'id', image) or ''}"


def lookup(store: "CompileCache | None", req, runner) -> tuple[str | None, bytes | None]:  # type: ignore[no-untyped-def]
    """The candidate's key and the archive kept under it, for a job of ``req`` on ``runner``:
    (None, None) without a cache, with ``req.reuse_compiled`` off, or for a candidate that
    compiles nothing."""
    key = cache_key(req, runner_identity(runner)) if store is not None and req.reuse_compiled else None
    return key, (store.get(key) if key else None)


class CompileCache:
    """Archives on disk, one per key; safe for several worker threads of one process and for
    several processes (atomic renames; a lost race only costs a compile)."""

    def __init__(self, root: str | Path, max_bytes: int = _DEFAULT_MB << 20):
        self.root = Path(root)
        self.max_bytes = max_bytes
        self._lock = threading.Lock()

    def _path(self, key: str) -> Path:
        if not re.fullmatch(r"[0-9a-f]{64}", key):
            raise ValueError(f"not a cache key: {key[:80]!r}")
        return self.root / key[:2] / f"{key}.zip"

    def get(self, key: str) -> bytes | None:
        path = self._path(key)
        try:
            data = path.read_bytes()
            os.utime(path)  # recently used: evicted last
            return data
        except OSError:
            return None

    def put(self, key: str, data: bytes) -> bool:
        """Keep ``data`` as ``key``'s archive (replacing an older one); False when it is too large."""
        if not data or len(data) > MAX_ENTRY_BYTES:
            return False
        path = self._path(key)
        with self._lock:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
            tmp.write_bytes(data)
            os.replace(tmp, path)
            self._evict()
        return True

    def entries(self) -> list[Path]:
        return sorted(self.root.glob("*/*.zip")) if self.root.is_dir() else []

    def _evict(self) -> None:
        files = []
        for p in self.entries():
            try:
                st = p.stat()
            except OSError:
                continue
            files.append((st.st_mtime, st.st_size, p))
        total = sum(size for _, size, _ in files)
        for _, size, p in sorted(files):
            if total <= self.max_bytes:
                break
            try:
                p.unlink()
                total -= size
            except OSError:
                pass


def default_cache() -> CompileCache | None:
    """The user's cache, or None when ``ARBOR_COMPILE_CACHE`` is off (or names no folder to use)."""
    setting = os.environ.get("ARBOR_COMPILE_CACHE", "").strip()
    if setting.lower() in ("0", "off", "false", "no"):
        return None
    if setting and setting.lower() not in ("1", "on", "true", "yes"):
        root = Path(setting)
    else:
        root = arbor_cache_dir() / "compile"
    try:
        mb = int(os.environ.get("ARBOR_COMPILE_CACHE_MB", _DEFAULT_MB))
    except ValueError:
        mb = _DEFAULT_MB
    return CompileCache(root, max(1, mb) << 20)
