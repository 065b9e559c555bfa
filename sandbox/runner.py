"""Runners: execute one untrusted job (a command plus its input files) and hand back what it left.

Every candidate Arbor measures is code written by a model, so a job is treated as hostile: it runs in
a throw-away working directory, in its own session (so one ``killpg`` reaches everything it spawned,
which is how OpenEvolve-style "the timeout could not kill the worker" failures are avoided), under
rlimits, with an environment that carries no secrets, and with its output captured to files whose
*tail* only is read back (a candidate printing gigabytes must not exhaust the harness's memory).

``LocalRunner`` is the development runner. A Docker runner (``network_mode="none"``, read-only root,
tmpfs workdir) implements the same ``Runner.run(Job) -> JobResult`` contract, which is why a job is
self-contained: argv plus files, never paths into the host's checkout.
"""

from __future__ import annotations

import os
import resource
import shutil
import signal as _signal
import stat
import subprocess
import tempfile
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from types import TracebackType

__all__ = ["Job", "JobResult", "Runner", "LocalRunner", "make_runner", "RUNNERS"]

# Variables copied from the parent when present. Thread counts keep timings comparable; device
# visibility keeps a job on the GPU it was given; LD_LIBRARY_PATH is needed by some CUDA installs.
# Nothing here can carry a credential.
_PASSTHROUGH_ENV = (
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
)
_TRUNCATION_MARK = "[... {n} earlier bytes discarded ...]\n"


@dataclass
class Job:
    """One self-contained unit of work: what to run, the files it needs, and its limits."""

    argv: list[str]
    files: dict[str, bytes | str]
    timeout_s: float
    collect: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    memory_bytes: int | None = None
    max_output_bytes: int = 1 << 20
    max_file_bytes: int | None = 1 << 30
    cpu_seconds: int | None = None


@dataclass
class JobResult:
    """What a job left behind. ``returncode`` is Popen's (negative when killed by a signal)."""

    returncode: int | None
    timed_out: bool
    duration_s: float
    stdout_tail: str
    stderr_tail: str
    outputs: dict[str, bytes]
    signal: int | None = None


class Runner(ABC):
    """Executes jobs. Implementations must always clean up, even when ``run`` raises."""

    name: str = "abstract"

    @abstractmethod
    def run(self, job: Job) -> JobResult:
        """Run ``job`` to completion or to its time limit and return what it produced."""

    def close(self) -> None:
        """Release long-lived resources (warm containers, pools). Default: nothing to release."""

    def __enter__(self) -> Runner:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _safe_relpath(name: str) -> PurePosixPath:
    """Reject absolute names and ``..`` so a job can never write or read outside its workdir."""
    p = PurePosixPath(name)
    if not name or p.is_absolute() or ".." in p.parts:
        raise ValueError(f"job file name {name!r} must be a relative path inside the workdir")
    return p


def _rmtree(path: str) -> None:
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


def _read_tail(path: Path, limit: int) -> str:
    """Read at most ``limit`` trailing bytes; the head of a flood is rarely the useful part."""
    try:
        size = path.stat().st_size
        with path.open("rb") as f:
            if size > limit:
                f.seek(size - limit)
            data = f.read(max(limit, 0))
    except OSError:
        return ""
    text = data.decode("utf-8", errors="replace")
    if size > limit:
        text = _TRUNCATION_MARK.format(n=size - limit) + text
    return text


def _scrubbed_env(workdir: str, extra: dict[str, str]) -> dict[str, str]:
    env = {k: os.environ[k] for k in _PASSTHROUGH_ENV if k in os.environ}
    env.setdefault("PATH", os.defpath)
    env.update({"HOME": workdir, "TMPDIR": workdir, "PYTHONHASHSEED": "0"})
    env.update(extra)
    return env


def _make_preexec(job: Job):  # type: ignore[no-untyped-def]
    """Build the function that sets rlimits in the child between fork and exec.

    Only ``resource.setrlimit`` runs there (no allocation-heavy Python, no locks), which keeps the
    documented preexec_fn/threads hazard negligible.
    """
    limits: list[tuple[int, int]] = [(resource.RLIMIT_CORE, 0)]
    if job.memory_bytes is not None:
        limits.append((resource.RLIMIT_AS, int(job.memory_bytes)))
    if job.max_file_bytes is not None:
        limits.append((resource.RLIMIT_FSIZE, int(job.max_file_bytes)))
    if job.cpu_seconds is not None:
        limits.append((resource.RLIMIT_CPU, int(job.cpu_seconds)))

    def preexec() -> None:
        for which, value in limits:
            _soft, hard = resource.getrlimit(which)
            if hard != resource.RLIM_INFINITY and value > hard:
                value = hard
            resource.setrlimit(which, (value, value))

    return preexec


def _killpg(pgid: int) -> None:
    try:
        os.killpg(pgid, _signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class LocalRunner(Runner):
    """Runs a job as a local subprocess in its own session, with rlimits and a wall-clock limit.

    Not a security boundary against a determined attacker (same user, same network, same
    filesystem outside the workdir); it is a *containment* boundary against runaway, leaky or
    careless candidates. Use the Docker runner for isolation.
    """

    name = "local"

    def __init__(self, base_tmp: str | None = None) -> None:
        self.base_tmp = base_tmp

    def run(self, job: Job) -> JobResult:
        if not job.argv:
            raise ValueError("job.argv is empty: nothing to run")
        workdir = tempfile.mkdtemp(prefix="arbor-job-", dir=self.base_tmp)
        logdir = tempfile.mkdtemp(prefix="arbor-log-", dir=self.base_tmp)
        try:
            return self._run_in(job, workdir, Path(logdir))
        finally:
            _rmtree(workdir)
            _rmtree(logdir)

    def _run_in(self, job: Job, workdir: str, logdir: Path) -> JobResult:
        root = Path(workdir)
        for name, content in job.files.items():
            target = root / _safe_relpath(name)
            target.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, str):
                target.write_text(content, encoding="utf-8")
            else:
                target.write_bytes(content)
        out_path, err_path = logdir / "stdout", logdir / "stderr"
        timed_out = False
        start = time.monotonic()
        with out_path.open("wb") as out_f, err_path.open("wb") as err_f:
            proc = subprocess.Popen(
                job.argv,
                cwd=workdir,
                env=_scrubbed_env(workdir, job.env),
                stdin=subprocess.DEVNULL,
                stdout=out_f,
                stderr=err_f,
                start_new_session=True,  # pgid == pid: killpg reaches every descendant
                preexec_fn=_make_preexec(job),
                close_fds=True,
            )
            try:
                try:
                    proc.wait(timeout=max(job.timeout_s, 0.0))
                except subprocess.TimeoutExpired:
                    timed_out = True
                    _killpg(proc.pid)
                    proc.wait()
            except BaseException:
                # KeyboardInterrupt or any other interruption: never leave the tree running.
                _killpg(proc.pid)
                proc.wait()
                raise
            finally:
                # The direct child is gone; descendants that stayed in its group die now too.
                _killpg(proc.pid)
        duration = time.monotonic() - start
        outputs: dict[str, bytes] = {}
        for name in job.collect:
            path = root / _safe_relpath(name)
            if path.is_file() and not path.is_symlink():
                try:
                    outputs[name] = path.read_bytes()
                except OSError:
                    pass
        rc = proc.returncode
        return JobResult(
            returncode=rc,
            timed_out=timed_out,
            duration_s=duration,
            stdout_tail=_read_tail(out_path, job.max_output_bytes),
            stderr_tail=_read_tail(err_path, job.max_output_bytes),
            outputs=outputs,
            signal=-rc if rc is not None and rc < 0 else None,
        )


RUNNERS: dict[str, type[Runner]] = {"local": LocalRunner}


def make_runner(kind: str, **options: object) -> Runner:
    """Build a runner by the name a campaign uses (``sandbox.runner: local``)."""
    cls = RUNNERS.get(kind)
    if cls is None:
        raise ValueError(f"unknown sandbox {kind!r}: use one of {', '.join(sorted(RUNNERS))}")
    return cls(**options)  # type: ignore[arg-type]
