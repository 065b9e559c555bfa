"""Inductor's vector-ISA verdict for this machine, settled once by the host, not once per candidate.

Every compiled candidate's first measurement job ran Inductor's vector-ISA probe before the
candidate was imported (``harness/compile_cache.py``: it builds and ``dlopen``s a probe library
per ISA the CPU names): 9 s of a ~12 s job on the development machine, paid again by every new
candidate, though the answer is a fact of the CPU, the compiler and torch — not of the candidate.
The host now runs that probe once, in a child process of its own that runs no candidate code,
keeps the verdict on disk under the job environment it was found in (torch, Triton, Python, CPU
model and flags: the archive manifest's ``environment()``), and passes it as
``compile_cache.vec_isa_ok`` to the CPU compile jobs the local runner starts (the host's own
Python, torch and compiler; a container may carry the same versions beside another compiler, so a
Docker job probes as before). A job whose own environment differs (another node of a Ray cluster)
ignores it and probes too.

Only the host writes the verdict and only a ``True`` is passed on: a job cannot teach another
candidate's jobs anything (a false ``True`` would make their C++ kernels target an ISA the compiler
cannot build: a denial of service, which is why no job's word is taken for it).
``ARBOR_ISA_HINT=0`` turns it off.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from ..harness import compile_cache as job_cache
from ..cache_dir import arbor_cache_dir
from .compile_store import runner_identity

PROBE_TIMEOUT_S = 300.0  # importing torch and building a probe per ISA, on a loaded machine
_LOCK = threading.Lock()
_MEMO: dict[str, bool] = {}


def facts_dir() -> Path:
    return arbor_cache_dir() / "machine"


@functools.lru_cache(maxsize=1)
def _environment() -> dict:
    """This host's job environment, read once a process (``/proc/cpuinfo``, package metadata)."""
    return job_cache.environment()


def hint(runner, device: str) -> dict:  # type: ignore[no-untyped-def]
    """What a CPU compile job on ``runner`` gets in its request: the verdict and the environment it
    holds for, when the host's probe passed there and the runner runs the host's own torch and
    compiler (the local runner); else nothing (the job probes itself)."""
    if (not str(device or "cpu").startswith("cpu") or not runner_identity(runner).startswith("local:")
            or os.environ.get("ARBOR_ISA_HINT", "1").strip() == "0"):
        return {}
    env = _environment()
    return {"vec_isa_ok": True, "environment": env} if verdict(env) else {}


def verdict(env: dict) -> bool:
    """Whether Inductor's probe passes for every ISA the CPU names, in ``env`` (this host's job
    environment): from memory, from the file a previous process left, or probed now (once per
    process and environment, whoever asks first; the others wait for it)."""
    digest = hashlib.sha256(json.dumps(env, sort_keys=True).encode()).hexdigest()[:16]
    with _LOCK:
        if digest not in _MEMO:
            path = facts_dir() / f"vec-isa-{digest}.json"
            known = _read(path, env)
            if known is None:
                known = _probe(env)
                if known is not None:
                    _write(path, {"environment": env, "vec_isa_ok": known})
            _MEMO[digest] = bool(known)
        return _MEMO[digest]


def _read(path: Path, env: dict) -> bool | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    ok = data.get("vec_isa_ok") if isinstance(data, dict) and data.get("environment") == env else None
    return ok if isinstance(ok, bool) else None


def _write(path: Path, data: dict) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data))
        os.replace(tmp, path)
    except OSError:  # an unwritable cache: the next process probes again
        pass


def _probe(env: dict) -> bool | None:
    """Run the harness's own probe in a fresh interpreter (Inductor's scratch folder a temporary
    one); None when it could not say (a timeout, a crash, another environment)."""
    with tempfile.TemporaryDirectory(prefix="arbor-isa-") as tmp:
        script = os.path.join(os.path.dirname(os.path.abspath(job_cache.__file__)), "isa_probe.py")
        env_vars = {k: v for k, v in os.environ.items() if k != "TORCHINDUCTOR_VEC_ISA_OK"}  # a real probe
        proc = subprocess.Popen([sys.executable, script], cwd=tmp, text=True,
                                env={**env_vars, "TORCHINDUCTOR_CACHE_DIR": tmp}, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=PROBE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            out = ""
        finally:
            try:  # the compiler it started too
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            proc.wait()
    try:
        data = json.loads((out or "").strip().splitlines()[-1])
    except (ValueError, IndexError):
        return None
    ok = data.get("vec_isa_ok") if isinstance(data, dict) and data.get("environment") == env else None
    return ok if isinstance(ok, bool) else None
