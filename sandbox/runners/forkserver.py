"""The runner's side of a warm worker (``warm_worker.py``): start it, hand it jobs, watch it, replace it.

One ``ForkServer`` is one worker process for one interpreter (with its flags) and one job
environment (the job's own variables and what the runner passes through: what torch reads at
import time must be what the job would have had). It holds the job scripts it has loaded
(``runner.PythonEntry``, by the content of their files — the measurement harness, the profile
harness), so a child forked from it is exactly the process a fresh start of that job would have
been, minus the imports. A runner keeps its workers in a ``WarmPool`` (``warm_pool.py``).

What can go wrong, and what the runner then does:

* a script cannot be warmed (its warm() failed, or left the worker unsafe to fork: a thread, a
  GPU driver) — ``WorkerError``: its jobs run as fresh processes from then on, and the runner says
  so once (a notice); a worker left unsafe is killed;
* an extra of its warm-up (``PythonEntry.extras``) fails — the job runs in the worker without it
  (it imports what it needs itself) and that extra is not asked for again; one that left the
  worker unsafe kills the worker, the job runs fresh, and the next worker is never asked for it;
* the worker dies or stops answering before the child started — ``WorkerError``: the job has not
  run; the worker is killed and the job runs as a fresh process;
* the worker refuses the job (its isolation could not be prepared, or the child could not be set
  up) — ``WorkerRefused``: like a failed ``preexec_fn``, never a job run with less isolation;
* the worker dies while the child runs — ``WorkerLost``: the child died with it (PDEATHSIG); the
  runner kills the job's tree and runs the job again as a fresh process;
* the child outlives its time limit — the runner kills the job's tree (cgroup, process group,
  tokens) as for any job, then collects the exit status from the worker; a worker that does not
  report it is hung and is killed.

docs/architecture.md#sandboxes
"""

from __future__ import annotations

import hashlib
import os
import secrets
import select
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from . import warm_worker as wire
from .jobio import rmtree, safe_relpath, scrubbed_env
from .proctree import WORKER_VAR
from ..runner import Job

__all__ = ["ForkServer", "WorkerError", "WorkerRefused", "WorkerLost", "ExtraFailed",
           "WORKER_PREFIX", "warm_argv"]

WORKER_PREFIX = "arbor-warm-"  # its directory: <base tmp>/arbor-warm-<owner pid>-<random>
_WORKER_SCRIPT = Path(__file__).with_name("warm_worker.py")
# Interpreter flags a warm worker can share with the job (single letters that take no argument).
_FLAGS = {"-I", "-B", "-E", "-s", "-u", "-O", "-OO"}


class WorkerError(RuntimeError):
    """The worker could not take the job; the job has not started (run it as a fresh process)."""


class WorkerRefused(RuntimeError):
    """The worker would not start the job: its isolation or its child's set-up failed."""


class WorkerLost(RuntimeError):
    """The worker died while its child ran the job."""


class ExtraFailed(RuntimeError):
    """An extra of a script's warm-up failed; ``unsafe``: it left the worker unfit (now killed)."""

    def __init__(self, why: str, unsafe: bool) -> None:
        super().__init__(why)
        self.unsafe = unsafe

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (type(self), (str(self), self.unsafe))


def warm_argv(job: Job) -> tuple[list[str], list[str]] | None:
    """(interpreter + flags, argv from the script on) when ``job`` can be started warm, else None."""
    entry = job.entry
    if entry is None or entry.script not in job.argv[1:]:
        return None
    i = job.argv.index(entry.script, 1)
    prefix = job.argv[:i]
    if not all(flag in _FLAGS for flag in prefix[1:]):
        return None
    if any(name not in job.files for name in (entry.script, *entry.modules)):
        return None
    return prefix, job.argv[i:]


def _bytes(data: str | bytes) -> bytes:
    return data.encode("utf-8") if isinstance(data, str) else data


def entry_files(job: Job) -> dict[str, bytes]:
    assert job.entry is not None
    return {name: _bytes(job.files[name]) for name in (job.entry.script, *job.entry.modules)}


def entry_id(job: Job) -> str:
    """The script and its modules by content: two jobs with this id can share a warm-up."""
    h = hashlib.sha256()
    for name, data in entry_files(job).items():
        h.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
    return h.hexdigest()[:24]


def worker_key(job: Job) -> tuple | None:
    """Jobs with the same key can share a worker process: interpreter and flags, environment."""
    split = warm_argv(job)
    if split is None:
        return None
    env = scrubbed_env("", job.env)  # the workdir-dependent values are the same placeholder for all
    return tuple(split[0]), tuple(sorted(env.items()))


class ForkServer:
    """One warm worker. ``launch`` starts it (returns at once), ``ready`` waits for it, ``load``
    warms a job's script in it; ``spawn`` / ``wait_exit`` run one job's child; ``close`` ends it.
    Not thread-safe: the pool lends it to one job at a time."""

    start_timeout_s = 60.0  # the worker itself (stdlib + the isolation modules)
    load_timeout_s = 300.0  # a script's warm-up: torch's import on a swamped machine
    reply_timeout_s = 30.0  # from a job's request to its child running (isolation set-up, fork)

    def __init__(self, job: Job, base_tmp: str | None = None) -> None:
        split = warm_argv(job)
        if split is None:
            raise ValueError("job cannot be started warm (no PythonEntry, or argv does not run it)")
        self.prefix = split[0]
        self.dir = tempfile.mkdtemp(prefix=f"{WORKER_PREFIX}{os.getpid()}-", dir=base_tmp)
        self.token = f"{os.getpid()}-{secrets.token_hex(8)}"
        # the job's environment with the worker's own directory and token: what torch sees at import
        self.env = scrubbed_env(self.dir, {**job.env, WORKER_VAR: self.token})
        self.files: dict[str, bytes] = {}  # every loaded script's files: a name means one content
        self.loaded: dict[str, float] = {}  # entry id -> its warm-up seconds
        self.pending: dict[str, float] = {}  # entry id -> when its load was sent (not answered yet)
        self.extras: dict[tuple[str, str], float] = {}  # (entry id, extra) -> its warm-up seconds
        self.proc: subprocess.Popen | None = None
        self.sock: socket.socket | None = None
        self.pid: int | None = None
        self.launched_at = 0.0

    # ------------------------------------------------------------------ life cycle
    def launch(self) -> None:
        if self.proc is not None:
            return
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        log = open(os.path.join(self.dir, "worker.log"), "wb")  # a crash's traceback, for the error
        try:
            self.launched_at = time.monotonic()
            self.proc = subprocess.Popen(
                [*self.prefix, str(_WORKER_SCRIPT), str(_WORKER_SCRIPT.parent), str(theirs.fileno())],
                cwd=self.dir, env=self.env, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                pass_fds=(theirs.fileno(),), start_new_session=True, close_fds=True)
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
            log.close()
        self.sock = ours

    def ready(self) -> None:
        """Wait for the worker to answer; raises ``WorkerError`` (and kills it) if it does not."""
        if self.pid is not None:
            return
        self.launch()
        msg = self._recv(self.start_timeout_s - (time.monotonic() - self.launched_at))
        if msg is None or not msg.get("ready"):
            why = (msg or {}).get("error") or self._log_tail() or "it exited or did not answer"
            self.kill()
            raise WorkerError(f"the warm worker did not start: {why}")
        self.pid = int(msg["pid"])

    def fits(self, job: Job) -> bool:
        """Whether ``job``'s script can live in this worker: every file it shares with scripts
        already loaded here has the same content (a module loaded by name is loaded once)."""
        return all(self.files.get(name, data) == data for name, data in entry_files(job).items())

    def begin_load(self, job: Job) -> None:
        """Ask the worker to warm ``job``'s script, without waiting (it works while we go on)."""
        eid = entry_id(job)
        if eid in self.loaded or eid in self.pending:
            return
        self.launch()
        assert self.sock is not None and job.entry is not None
        where = Path(self.dir) / eid
        for name, data in entry_files(job).items():
            target = where / safe_relpath(name)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        try:  # queued behind the worker's own start: it reads messages once it is ready
            wire.send(self.sock, {"op": "load", "entry": eid, "dir": str(where), "script": job.entry.script})
        except OSError as exc:
            self.kill()
            raise WorkerError(f"the warm worker is gone ({exc})") from None
        self.pending[eid] = time.monotonic()
        self.files.update(entry_files(job))

    def load(self, job: Job) -> float:
        """Warm ``job``'s script here (once); returns the seconds it took (0.0 when loaded)."""
        eid = entry_id(job)
        if eid in self.loaded:
            return 0.0
        self.begin_load(job)
        self.ready()
        # the worker answers loads in the order they were sent: a load begun earlier without
        # waiting (``WarmPool.launch``: the measurement harness while the campaign starts) answers
        # first. Read as this job's answer, it left every later reply one behind — a profile job
        # read "loaded" where "started" was due, and each job after it the previous job's answer
        # (seen on every profile of a two-worker campaign)
        while eid in self.pending:
            first, t0 = next(iter(self.pending.items()))
            msg = self._recv(self.load_timeout_s - (time.monotonic() - t0))
            if msg is None or "loaded" not in msg:
                self.pending.pop(first)
                why = (msg or {}).get("load_failed") or self._log_tail() or "the warm worker died or did not answer"
                fatal = msg is None or bool(msg.get("unsafe"))
                if fatal:
                    self.kill()
                if fatal or first == eid:
                    raise WorkerError(str(why))
                continue  # an earlier script's warm-up failed: it runs fresh when asked for
            self.pending.pop(first)
            self.loaded[str(msg["loaded"])] = time.monotonic() - t0
        return self.loaded[eid]

    def warm_extra(self, job: Job, name: str) -> float:
        """Run the extra ``name`` of ``job``'s (loaded) script here, once; returns its seconds
        (0.0 when done before). Raises ``ExtraFailed`` (the worker still usable unless ``unsafe``,
        when it has been killed) or ``WorkerError``."""
        eid = entry_id(job)
        if (eid, name) in self.extras:
            return 0.0
        if self.sock is None:
            raise WorkerError("the warm worker is gone")
        t0 = time.monotonic()
        try:
            wire.send(self.sock, {"op": "extra", "entry": eid, "name": name})
        except OSError as exc:
            self.kill()
            raise WorkerError(f"the warm worker is gone ({exc})") from None
        msg = self._recv(self.load_timeout_s)
        if msg is None or "extra_done" not in msg:
            why = (msg or {}).get("extra_failed") or self._log_tail() or "the warm worker died or did not answer"
            unsafe = msg is None or bool(msg.get("unsafe"))
            if unsafe:
                self.kill()
            raise ExtraFailed(str(why), unsafe)
        self.extras[(eid, name)] = time.monotonic() - t0
        return self.extras[(eid, name)]

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """End the worker now (its own session); its children die by PDEATHSIG and the job tree."""
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            self.proc.wait()
            self.proc = None
        self.pid = None

    def close(self) -> None:
        """Hang up (an idle worker exits at EOF); kill it if it lingers; remove its directory."""
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        if self.proc is not None:
            try:
                self.proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                pass
        self.kill()
        rmtree(self.dir)

    # ------------------------------------------------------------------ one job
    def spawn(self, job: Job, request: dict, stdout_w: int, stderr_w: int) -> tuple[int, float]:
        """Hand the worker one job (its script loaded); returns (the child's pid, its set-up
        seconds in the worker)."""
        if self.sock is None:
            raise WorkerError("the warm worker is gone")
        try:
            wire.send(self.sock, {"op": "run", "entry": entry_id(job), **request}, [stdout_w, stderr_w])
        except OSError as exc:
            self.kill()
            raise WorkerError(f"the warm worker is gone ({exc})") from None
        msg = self._recv(self.reply_timeout_s)
        if msg is None:
            self.kill()
            raise WorkerError("the warm worker did not start the job (hung or died)")
        if "refused" in msg:
            raise WorkerRefused(str(msg["refused"]))
        if "started" not in msg:  # out of turn: nothing it says about this job can be trusted
            self.kill()
            raise WorkerError(f"the warm worker answered out of turn ({sorted(msg)} for a job's start)")
        return int(msg["started"]), float(msg.get("setup_s") or 0.0)

    def wait_exit(self, timeout: float) -> tuple[bool, int | None]:
        """(True, returncode) once the worker reports the child's end; (False, None) at the time
        limit. Raises ``WorkerLost`` if the worker dies meanwhile."""
        try:
            msg = self._recv(timeout, eof_raises=True)
        except EOFError:
            self.kill()
            raise WorkerLost("the warm worker died while its child ran the job") from None
        if msg is None:
            return False, None
        return True, msg.get("returncode")

    def _recv(self, timeout: float, eof_raises: bool = False) -> dict | None:
        if self.sock is None:
            if eof_raises:
                raise EOFError
            return None
        poller = select.poll()
        poller.register(self.sock, select.POLLIN | select.POLLHUP)
        deadline = time.monotonic() + max(timeout, 0.0)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            if poller.poll(min(left, 3600) * 1000):
                break
        try:
            msg, _fds = wire.recv(self.sock)
        except (OSError, ValueError):
            msg = None
        if msg is None and eof_raises:
            raise EOFError
        return msg

    def _log_tail(self) -> str:
        try:
            lines = Path(self.dir, "worker.log").read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return lines[-1][:300] if lines else ""
