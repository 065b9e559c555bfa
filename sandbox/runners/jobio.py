"""Job plumbing shared by every runner: safe file names, bounded output capture, clean-up.

A candidate that prints a gigabyte must neither fill the disk nor the harness's memory, so a
runner never stores a stream: it drains it and keeps only the tail (``TailBuffer``). The total
volume is still counted, so the result can say how much was thrown away.
"""

from __future__ import annotations

import os
import sys
import shutil
import stat
import threading
from pathlib import PurePosixPath

__all__ = ["safe_relpath", "rmtree", "TailBuffer", "Drain", "TRUNCATION_MARK", "scrubbed_env",
           "PASSTHROUGH_ENV"]

TRUNCATION_MARK = "[... {n} earlier bytes discarded ...]\n"
_CHUNK = 1 << 20

# Variables copied from the parent when present. Thread counts keep timings comparable; device
# visibility keeps a job on the GPU it was given; LD_LIBRARY_PATH is needed by some CUDA installs.
# Nothing here can carry a credential.
PASSTHROUGH_ENV = (
    "PATH",
    "LANG",
    "LC_ALL",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "CUDA_VISIBLE_DEVICES",
    "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "LD_LIBRARY_PATH",
    "TRITON_INTERPRET",
)
# Only ever inherited from Arbor's own environment (a test setting: Triton's CPU interpreter);
# a job's own variables may not set them.
PARENT_ONLY_ENV = ("TRITON_INTERPRET",)


def scrubbed_env(workdir: str, extra: dict[str, str], source: dict[str, str] | None = None) -> dict[str, str]:
    """An allow-list environment: no API keys, tokens or the user's HOME reach a candidate."""
    src = os.environ if source is None else source
    env = {k: src[k] for k in PASSTHROUGH_ENV if k in src}
    env.setdefault("PATH", os.defpath)
    # the interpreter's own bin folder first: tools installed beside it (ninja, which load_inline
    # builds with) are found when Arbor runs without its environment activated
    bindir = os.path.dirname(sys.executable)
    if bindir and bindir not in env["PATH"].split(os.pathsep):
        env["PATH"] = bindir + os.pathsep + env["PATH"]
    # PCI order makes CUDA's device N the N that NVML (clock control, fingerprints) talks about.
    env.update({"HOME": workdir, "TMPDIR": workdir, "PYTHONHASHSEED": "0", "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
                # Triton compiles into its cache: inside the job's own (writable, discarded) directory
                "TRITON_CACHE_DIR": os.path.join(workdir, ".triton", "cache")})
    env.update({k: v for k, v in extra.items() if k not in PARENT_ONLY_ENV})
    return env


def safe_relpath(name: str) -> PurePosixPath:
    """Reject absolute names and ``..`` so a job can never write or read outside its workdir."""
    p = PurePosixPath(name)
    if not name or p.is_absolute() or ".." in p.parts:
        raise ValueError(f"job file name {name!r} must be a relative path inside the workdir")
    return p


def rmtree(path: str) -> None:
    """Remove a tree even if the job chmod-ed parts of it read-only."""

    def onerror(func, p, _exc):  # type: ignore[no-untyped-def]
        try:
            os.chmod(p, stat.S_IRWXU)
            parent = os.path.dirname(p)
            os.chmod(parent, stat.S_IRWXU)
            func(p)
        except OSError:
            pass

    shutil.rmtree(path, onerror=onerror)
    if os.path.exists(path):  # last resort; a leftover temp dir is a leak, never an error
        shutil.rmtree(path, ignore_errors=True)


class TailBuffer:
    """Keeps the last ``limit`` bytes written to it and counts all of them."""

    def __init__(self, limit: int) -> None:
        self.limit = max(int(limit), 0)
        self.total = 0
        self._buf = bytearray()

    def write(self, data: bytes) -> None:
        self.total += len(data)
        if len(data) >= self.limit:
            self._buf = bytearray(data[len(data) - self.limit:]) if self.limit else bytearray()
            return
        self._buf += data
        if len(self._buf) > 2 * self.limit:  # amortised trimming
            del self._buf[: len(self._buf) - self.limit]

    def text(self) -> str:
        data = bytes(self._buf[-self.limit:]) if self.limit else b""
        out = data.decode("utf-8", errors="replace")
        dropped = self.total - len(data)
        return TRUNCATION_MARK.format(n=dropped) + out if dropped > 0 else out


class Drain:
    """A daemon thread that empties one pipe into a TailBuffer until EOF (or until closed)."""

    def __init__(self, fd: int, limit: int) -> None:
        self.fd = fd
        self.tail = TailBuffer(limit)
        self._thread = threading.Thread(target=self._run, daemon=True, name=f"arbor-drain-{fd}")
        self._thread.start()

    def _run(self) -> None:
        while True:
            try:
                data = os.read(self.fd, _CHUNK)
            except OSError:
                return
            if not data:
                return
            self.tail.write(data)

    def finish(self, timeout: float = 5.0) -> TailBuffer:
        """Wait for EOF; a writer we could not kill cannot keep us waiting past ``timeout``."""
        self._thread.join(timeout)
        if not self._thread.is_alive():  # never close under a blocked reader: the fd number
            os.close(self.fd)            # could be reused and the thread would read a stranger
        return self.tail
