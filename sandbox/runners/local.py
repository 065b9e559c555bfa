"""The local runner: a job as a local subprocess under rlimits, its whole process tree killed at
the end, under the isolation layers of an ``IsolationPlan`` (``isolation.py``: a private network
namespace or a seccomp network filter, Landlock rules and scopes) where the OS allows them (and a
notice where not). For a GPU device it first checks that the device starts under those layers
(``sandbox/gpu/probe.py``). A job that is a Python script with a ``PythonEntry`` (the measurement
and profile harnesses) runs in a child forked from a warm worker (``forkserver.py``,
``warm_worker.py``) that imported torch once, under exactly the set-up a fresh process gets.

It is the development runner; ``make_runner("local")`` (``runner.py``) builds it, and it
implements the same ``Runner.run(Job) -> JobResult`` contract as ``DockerRunner``.
"""

from __future__ import annotations

import os
import re
import resource
import signal as _signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from . import isolation
from .forkserver import WORKER_PREFIX, ForkServer, WorkerError, WorkerLost, WorkerRefused, warm_argv
from .jobio import Drain, rmtree, safe_relpath, scrubbed_env
from .proctree import TOKEN_VAR, ProcessTree, cgroup_available, cleanup_stale, pid_alive
from .started import Fresh, Started, Warm
from .warm_pool import WarmPool
from .watchdog import Watchdog
from ..runner import Job, JobResult, Runner, SandboxError


def _uid_process_count() -> int:
    uid = os.getuid()
    n = 0
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                n += os.stat(f"/proc/{d}").st_uid == uid
            except OSError:
                pass
    return n


_WORKDIR_PREFIX = "arbor-job-"
_STALE_WORKDIR = re.compile(rf"^(?:{_WORKDIR_PREFIX}|{WORKER_PREFIX})(\d+)-")


def _remove_stale_workdirs(base_tmp: str | None) -> None:
    """Workdirs (and warm workers' directories) whose owning Arbor died (kill -9) are removed by
    the next runner that starts."""
    base = Path(base_tmp or tempfile.gettempdir())
    try:
        entries = list(base.iterdir())
    except OSError:
        return
    for entry in entries:
        m = _STALE_WORKDIR.match(entry.name)
        if m is None or not entry.is_dir():
            continue
        if not pid_alive(int(m.group(1))):
            rmtree(str(entry))


class LocalRunner(Runner):
    """Runs a job as a local subprocess: rlimits, a killed-whole tree, Landlock, no network.

    Not a security boundary against a determined attacker with a kernel exploit; it *is* a
    containment boundary against runaway, leaky, snooping or careless candidates. Options:

    * ``network``: ``"none"`` (default) isolates the child (a private netns as root, a seccomp
      filter plus Landlock TCP rules otherwise; a notice says which); ``"host"`` leaves it alone.
    * ``filesystem``: ``"isolate"`` (default) confines reads to system paths + the interpreter and
      writes to the workdir via Landlock; ``"host"`` leaves reads alone.
    * ``device``: ``"cuda"`` (or ``"cuda:N"``) makes the runner find out, before its first job,
      whether the device starts under its isolation layers, and replace a layer that breaks it
      (``sandbox/gpu/probe.py``; cached per machine); a device that cannot start inside a safe
      plan raises ``SandboxError`` naming the fix. ``device_check=False`` skips that.
    * ``max_processes`` / ``max_open_files`` / ``max_file_bytes``: caps on top of the job's own.
    * ``warm_worker``: run jobs that carry a ``PythonEntry`` in children forked from a warm worker
      (default; ``ARBOR_WARM_WORKER=0`` in the environment turns it off); False: a fresh process
      for every job. A worker that cannot start makes that kind of job run fresh, with a notice.

    The isolation itself is ``self.plan`` (``isolation.IsolationPlan``): ``full_plan`` is what the
    settings ask for on this kernel, ``plan`` what jobs get (the same unless the device probe
    replaced a layer, which ``notices`` then says).
    """

    name = "local"

    def __init__(self, base_tmp: str | None = None, *, network: str = "none",
                 filesystem: str = "isolate", max_processes: int | None = 512,
                 max_open_files: int | None = 1024, max_file_bytes: int | None = None,
                 extra_read_paths: list[str] | tuple[str, ...] = (), device: str = "cpu",
                 device_check: bool = True, warm_worker: bool | None = None) -> None:
        super().__init__()
        if network not in ("none", "host"):
            raise ValueError(f"network must be 'none' or 'host', not {network!r}")
        if filesystem not in ("isolate", "host"):
            raise ValueError(f"filesystem must be 'isolate' or 'host', not {filesystem!r}")
        self.base_tmp = base_tmp
        self.network, self.filesystem, self.device = network, filesystem, device
        self.max_processes, self.max_open_files = max_processes, max_open_files
        self.max_file_bytes = max_file_bytes
        self.read_paths = isolation.default_read_paths() + [str(p) for p in extra_read_paths]
        self.strays_killed_at_start = cleanup_stale()
        _remove_stale_workdirs(base_tmp)
        self.watchdog = Watchdog()  # kills a job's whole tree if we die by kill -9
        if warm_worker is None:
            warm_worker = os.environ.get("ARBOR_WARM_WORKER", "1").strip().lower() not in ("0", "false", "no", "off")
        self.warm = WarmPool(base_tmp) if warm_worker else None
        self._warm_lock = threading.Lock()
        self.kernel = isolation.kernel_support()
        self.full_plan = isolation.plan_for(network, filesystem, self.kernel)
        self.plan = self.full_plan
        self.notices += isolation.plan_notices(network, filesystem, self.kernel)
        if os.geteuid() == 0 and not cgroup_available():
            self.notices.append("local sandbox: running as root without a pids cgroup: RLIMIT_NPROC "
                                "does not bind root, a fork bomb is only stopped by the time limit")
        self.device_probe = None  # the probe's findings (sandbox.gpu.DeviceProbe) for a GPU device
        if device_check and device.startswith("cuda"):  # ROCm torch calls its GPUs cuda too
            from ..gpu import require_device  # here only: the device probe builds a LocalRunner

            self.device_probe = require_device(self, self.device)

    def adopt_plan(self, plan: isolation.IsolationPlan, notice: str | None = None) -> None:
        """Run every later job under ``plan`` (the device probe's choice), saying so in ``notice``."""
        self.plan = plan
        if notice:
            self.notices.append(notice)

    def run_under(self, plan: isolation.IsolationPlan, job: Job) -> JobResult:
        """Run ``job`` under ``plan`` instead of ``self.plan``, without hooks: the device probe's
        way of trying one layer at a time through the real child set-up."""
        if not job.argv:
            raise ValueError("job.argv is empty: nothing to run")
        return self._execute(job, plan)

    # ------------------------------------------------------------------ child setup
    def _limits(self, job: Job) -> list[tuple[int, int]]:
        """The rlimits a job's first process gets (before it execs, or in the warm worker's child)."""
        limits: list[tuple[int, int]] = [(resource.RLIMIT_CORE, 0)]
        if job.memory_bytes is not None:
            limits.append((resource.RLIMIT_AS, int(job.memory_bytes)))
        fsize = [v for v in (job.max_file_bytes, self.max_file_bytes) if v is not None]
        if fsize:
            limits.append((resource.RLIMIT_FSIZE, int(min(fsize))))
        cpu = job.cpu_seconds if job.cpu_seconds is not None else int(job.timeout_s * (os.cpu_count() or 1)) + 10
        limits.append((resource.RLIMIT_CPU, int(cpu)))
        if self.max_open_files is not None:
            limits.append((resource.RLIMIT_NOFILE, int(self.max_open_files)))
        if self.max_processes is not None and os.geteuid() != 0:  # root ignores NPROC: cgroup does it
            limits.append((resource.RLIMIT_NPROC, _uid_process_count() + int(self.max_processes)))
        return limits

    def _preexec(self, job: Job, tree: ProcessTree, child: isolation.ChildIsolation):  # type: ignore[no-untyped-def]
        """The function run in the child between fork and exec (every lookup done up front)."""
        limits = self._limits(job)
        prctl = isolation.libc().prctl
        parent = os.getpid()

        def preexec() -> None:
            tree.preexec()
            for which, value in limits:
                _soft, hard = resource.getrlimit(which)
                if hard != resource.RLIM_INFINITY and value > hard:
                    value = hard
                resource.setrlimit(which, (value, value))
            prctl(isolation.PR_SET_PDEATHSIG, _signal.SIGKILL, 0, 0, 0)  # `kill -9 arbor` kills us
            if os.getppid() != parent:  # the parent died before prctl took effect
                os._exit(1)
            child.apply()

        return preexec

    # ------------------------------------------------------------------ run
    def _release(self) -> None:  # warm workers end; the watchdog exits, finding us alive
        if self.warm is not None:
            self.warm.close()
        self.watchdog.close()

    def prewarm(self, job: Job) -> bool:
        """Start the warm worker ``job``'s kind would use, without waiting for its warm-up (a
        campaign does this before its first measurement). True if one was started."""
        if self.warm is None or warm_argv(job) is None:
            return False
        self.watchdog.start()
        with self._warm_lock:
            return self.warm.launch(job)

    def _execute(self, job: Job, plan: isolation.IsolationPlan | None = None) -> JobResult:
        plan = self.plan if plan is None else plan
        self.watchdog.start()
        # a worker serves one job at a time: a job run beside another (two threads sharing this
        # runner) starts fresh instead of waiting
        if self.warm is None or warm_argv(job) is None or not self._warm_lock.acquire(blocking=False):
            return self._attempt(job, plan, None)
        try:
            server = self._server(job)
            if server is None:
                return self._attempt(job, plan, None)
            waited = self.warm.last_warm_s  # a worker's start or a script's warm-up, paid once
            extras = dict(self.warm.last_extras)  # of which: warm-up extras this job asked for first
            try:
                res = self._attempt(job, plan, server)
            except (WorkerError, WorkerLost) as exc:  # the job did not run, or died with the worker
                res = self._attempt(job, plan, None)
                res.notes.append(f"warm worker: {exc}; the job ran as a fresh process")
                return res
            res.phase_times["worker_start"] = waited
            res.phase_times.update({f"worker_warm_{name}": s for name, s in extras.items()})
            return res
        finally:
            self._warm_lock.release()

    def _server(self, job: Job) -> ForkServer | None:
        """A ready warm worker for ``job``, or None (a fresh process). A kind of job whose worker
        could not start says so once, as a notice, and runs fresh from then on."""
        assert self.warm is not None
        refused, refused_extras = len(self.warm.refused), len(self.warm.refused_extras)
        server = self.warm.get(job)
        if len(self.warm.refused) > refused:
            why = list(self.warm.refused.values())[-1]
            self.notices.append(f"local sandbox: {why} — such jobs start as fresh processes (slower: "
                                "each imports torch)")
        if len(self.warm.refused_extras) > refused_extras:
            (_key, _eid, name), why = list(self.warm.refused_extras.items())[-1]
            self.notices.append(f"local sandbox: the warm worker's '{name}' warm-up failed ({why}) — jobs that "
                                "need it import it themselves (slower, same results)")
        return server

    def _attempt(self, job: Job, plan: isolation.IsolationPlan, server: ForkServer | None) -> JobResult:
        t0 = time.monotonic()
        workdir = tempfile.mkdtemp(prefix=f"{_WORKDIR_PREFIX}{os.getpid()}-", dir=self.base_tmp)
        tree: ProcessTree | None = None
        child = None
        res: JobResult | None = None
        try:
            tree = ProcessTree(max_processes=self.max_processes,
                               cgroup_is_sealed=plan.landlock_fs == isolation.FS_ISOLATE)
            if server is None:
                try:
                    child = isolation.prepare(plan, workdir, self.read_paths, abi=self.kernel.landlock_abi)
                except OSError as exc:  # never run a job with less isolation than its plan
                    raise SandboxError(self._unprepared(plan, exc)) from None
                start = self._fresh(job, tree, child)
            else:
                tree.worker = (server.token, server.pid)  # type: ignore[assignment]
                start = self._forked(job, tree, plan, server)
            res = self._run_in(job, workdir, tree, start, t0)
            return res
        finally:
            t_clean = time.monotonic()
            if child is not None:
                child.close()
            if tree is not None:
                tree.kill_all(None)
                tree.close()
            rmtree(workdir)
            if res is not None:
                res.phase_times["runner_cleanup"] = time.monotonic() - t_clean

    @staticmethod
    def _unprepared(plan: isolation.IsolationPlan, exc: object) -> str:
        return (f"local sandbox: cannot prepare the job's isolation ({plan.describe()}): {exc} "
                "— check open-file limits, or use sandbox.kind: docker")

    def _fresh(self, job: Job, tree: ProcessTree, child: isolation.ChildIsolation):  # type: ignore[no-untyped-def]
        """Start ``job`` as a fresh process (fork + exec, the set-up in preexec)."""
        def start(workdir: str, env: dict, out_w: int, err_w: int) -> Started:
            return Fresh(subprocess.Popen(
                job.argv, cwd=workdir, env=env, stdin=subprocess.DEVNULL, stdout=out_w, stderr=err_w,
                start_new_session=True,  # pgid == pid: one group for everything that does not setsid
                preexec_fn=self._preexec(job, tree, child), close_fds=True,
            ))
        return start

    def _forked(self, job: Job, tree: ProcessTree, plan: isolation.IsolationPlan, server: ForkServer):  # type: ignore[no-untyped-def]
        """Start ``job`` in a child of the warm worker, set up as ``_preexec`` sets up a fresh one:
        own session, the job's cgroup, the calling thread's CPU affinity (a slot's cores), the
        rlimits, PDEATHSIG, the plan's isolation (prepared in the worker for this workdir)."""
        split = warm_argv(job)
        assert split is not None

        def start(workdir: str, env: dict, out_w: int, err_w: int) -> Started:
            request = {
                "workdir": workdir, "argv": split[1], "env": env, "plan": plan.to_dict(),
                "read_paths": self.read_paths, "abi": self.kernel.landlock_abi, "rlimits": self._limits(job),
                "cgroup_procs": str(tree.cgroup / "cgroup.procs") if tree.cgroup is not None else None,
                "affinity": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
            }
            try:
                pid, setup_s = server.spawn(job, request, out_w, err_w)
            except WorkerRefused as exc:  # as a failed preexec: never a job with less isolation
                raise SandboxError(self._unprepared(plan, exc)) from None
            return Warm(server, pid, setup_s)
        return start

    def _run_in(self, job: Job, workdir: str, tree: ProcessTree, start, t0: float) -> JobResult:  # type: ignore[no-untyped-def]
        root = Path(workdir)
        for name, content in job.files.items():
            target = root / safe_relpath(name)
            target.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, str):
                target.write_text(content, encoding="utf-8")
            else:
                target.write_bytes(content)
        env = scrubbed_env(workdir, {**job.env, TOKEN_VAR: tree.token})
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        timed_out = False
        t_start = time.monotonic()
        try:
            proc = start(workdir, env, out_w, err_w)
        except BaseException:
            for fd in (out_r, out_w, err_r, err_w):
                os.close(fd)
            raise
        os.close(out_w)
        os.close(err_w)
        t_running = time.monotonic()
        drains = Drain(out_r, job.max_output_bytes), Drain(err_r, job.max_output_bytes)
        try:
            try:
                if not proc.wait(max(job.timeout_s - (t_running - t_start), 0.0)):
                    timed_out = True
                    tree.kill_all(proc.pid)
                    proc.reap()
            except BaseException:
                # KeyboardInterrupt or any other interruption: never leave the tree running.
                tree.kill_all(proc.pid)
                proc.reap()
                raise
        finally:
            # The direct child is gone; whatever it left (daemons, setsid escapees) dies now.
            t_exit = time.monotonic()
            strays = tree.kill_all(proc.pid)
            out, err = drains[0].finish(), drains[1].finish()
        t_end = time.monotonic()
        duration = t_end - t_start
        notes = []
        if strays and not timed_out:
            notes.append(f"killed {strays} process(es) the job left running")
        for label, buf in (("stdout", out), ("stderr", err)):
            if buf.total > job.max_output_bytes:
                notes.append(f"{label}: {buf.total} bytes written, last {job.max_output_bytes} kept")
        outputs: dict[str, bytes] = {}
        for name in job.collect:
            path = root / safe_relpath(name)
            if path.is_file() and not path.is_symlink():
                try:
                    outputs[name] = path.read_bytes()
                except OSError:
                    pass
        rc = proc.returncode
        phases = {"runner_setup": t_start - t0, "runner_start": t_running - t_start,
                  "runner_collect": time.monotonic() - t_exit, **proc.phases}
        return JobResult(
            returncode=rc, timed_out=timed_out, duration_s=duration, stdout_tail=out.text(),
            stderr_tail=err.text(), outputs=outputs, signal=-rc if rc is not None and rc < 0 else None,
            notes=notes, stdout_bytes=out.total, stderr_bytes=err.total, phase_times=phases,
        )
