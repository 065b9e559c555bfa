"""Runners: execute one untrusted job (a command plus its input files) and hand back what it left.

Every candidate Arbor measures is code written by a model, so a job is treated as hostile: it runs in
a throw-away working directory, under rlimits, with an environment that carries no secrets, with
its output drained to a bounded tail, and every process it started — including ones that called
``setsid`` — is found and killed when it ends or times out (OpenEvolve's "the timeout could not
kill the worker" failure). The local runner adds kernel isolation where the OS allows it
(``isolation.py``: a private network namespace or a seccomp network filter, Landlock) and says so,
as a notice, where not.

This module holds the contract (``Job``, ``JobResult``, ``Runner``, ``JobHook``) and the factory
only; the implementations live in their own modules — ``LocalRunner`` (``runners/local.py``), the
development runner, and ``DockerRunner`` (``runners/docker.py``) — and import this one, never the
other way round (the factory loads them by name). Every runner implements the same
``Runner.run(Job) -> JobResult`` contract, which is why a job is self-contained: argv plus files,
never paths into the host's checkout.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from types import TracebackType
from typing import Protocol

__all__ = ["Job", "JobResult", "PythonEntry", "Runner", "JobHook", "SandboxError", "make_runner", "RUNNERS",
           "runner_kinds"]


class SandboxError(RuntimeError):
    """The sandbox itself cannot work (engine down, image missing, clocks refused).

    ``str()`` is one line per problem naming what failed and the fix; the CLI prints it and exits 2.
    """


@dataclass(frozen=True)
class PythonEntry:
    """A job whose argv runs one Python script of its files, which a runner may start warm.

    The script defines ``warm()`` — everything it does before it reads its input (imports, for the
    kernel harness torch), idempotent and leaving no thread running — and ``main(argv) -> int``,
    which ``argv`` reaches from the script's name on. A runner may then run the job in a child
    forked from an interpreter that already executed the script and its ``warm()`` from files of
    the same content (the script and ``modules``, the other job files it loads at start-up),
    instead of executing ``argv`` afresh; the job's workdir, files, environment, limits and
    isolation stay exactly what they would have been. Runners that cannot (Docker) ignore it.

    ``extras`` names optional parts of the warm-up this job would use (the script's
    ``warm_<name>()``, e.g. ``compiler`` for a candidate that calls ``torch.compile``): a warm
    runner runs each once per worker before forking this job, so only the first job that needs
    one pays for it. They never change what the job computes, only what it finds imported.
    docs/architecture.md#sandboxes
    """

    script: str
    modules: tuple[str, ...] = ()
    extras: tuple[str, ...] = ()


@dataclass
class Job:
    """One self-contained unit of work: what to run, the files it needs, and its limits.
    ``entry``: set when argv is a Python script a runner may start warm (``PythonEntry``)."""

    argv: list[str]
    files: dict[str, bytes | str]
    timeout_s: float
    collect: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    memory_bytes: int | None = None
    max_output_bytes: int = 1 << 20
    max_file_bytes: int | None = 1 << 30
    cpu_seconds: int | None = None
    entry: PythonEntry | None = None


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
    fingerprint: dict = field(default_factory=dict)  # the machine as it was (hooks fill it)
    notes: list[str] = field(default_factory=list)  # containment events: strays killed, floods
    stdout_bytes: int = 0
    stderr_bytes: int = 0
    oom_killed: bool | None = None  # the kernel OOM killer ended it (None: the runner cannot tell)
    # where the runner's own time went (seconds): set-up, start (a warm worker's included), clean-up
    phase_times: dict = field(default_factory=dict)


class JobHook(Protocol):
    """Runs around every job: clock verification before, the environment fingerprint after.

    ``before`` may raise ``SandboxError`` to refuse to measure (e.g. clocks did not lock).
    """

    def before(self, job: Job) -> None: ...

    def after(self, job: Job, result: JobResult) -> None: ...

    def close(self) -> None: ...


class Runner(ABC):
    """Executes jobs. Implementations must always clean up, even when ``run`` raises."""

    name: str = "abstract"

    def __init__(self) -> None:
        self.hooks: list[JobHook] = []
        self.notices: list[str] = []  # isolation that could not be had here, shown as warnings

    def run(self, job: Job) -> JobResult:
        """Run ``job`` to completion or to its time limit and return what it produced."""
        if not job.argv:
            raise ValueError("job.argv is empty: nothing to run")
        for hook in self.hooks:
            hook.before(job)
        result = self._execute(job)
        for hook in self.hooks:
            hook.after(job, result)
        return result

    @abstractmethod
    def _execute(self, job: Job) -> JobResult:
        """The runner-specific part of ``run``."""

    def prewarm(self, job: Job) -> bool:
        """Get ready for jobs like ``job`` without running it and without waiting (a campaign
        calls this before its first measurement; the local runner starts warming its worker).
        True if something was started. Default: nothing to do."""
        return False

    def close(self) -> None:
        """Release long-lived resources (warm containers), then let hooks undo what they did
        (restore GPU clocks). Idempotent; the campaign calls it on every way out."""
        try:
            self._release()
        finally:
            for hook in self.hooks:
                closer = getattr(hook, "close", None)
                if closer is not None:
                    closer()

    def _release(self) -> None:
        """Runner-specific clean-up. Default: nothing to release."""

    def __enter__(self) -> Runner:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


RUNNERS: dict[str, str] = {
    "local": "arbor.sandbox.runners.local:LocalRunner",
    "docker": "arbor.sandbox.runners.docker:DockerRunner",
}


def runner_kinds() -> list[str]:
    return sorted(RUNNERS)


def make_runner(kind: str, **options: object) -> Runner:
    """Build a runner by the name a campaign uses (``sandbox.kind: local | docker``).

    Runners are imported lazily so the docker SDK is only needed by campaigns that use Docker.
    """
    target = RUNNERS.get(kind)
    if target is None:
        raise ValueError(f"unknown sandbox {kind!r}: use one of {', '.join(runner_kinds())}")
    module, _, attr = target.partition(":")
    try:
        cls = getattr(importlib.import_module(module), attr)
    except ImportError as exc:
        raise SandboxError(f"sandbox {kind!r} needs {exc.name or 'a missing module'}: "
                           f"pip install 'arbor-opt[{kind}]'") from None
    return cls(**options)  # type: ignore[no-any-return]
