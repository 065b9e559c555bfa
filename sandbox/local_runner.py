"""The local runner: a job as a local subprocess under rlimits, its whole process tree killed at
the end, under the isolation layers of an ``IsolationPlan`` (``isolation.py``: a private network
namespace or a seccomp network filter, Landlock rules and scopes) where the OS allows them (and a
notice where not). For a GPU device it first checks that the device starts under those layers
(``sandbox/gpu/probe.py``).

It is the development runner; ``make_runner("local")`` (``runner.py``) builds it, and it
implements the same ``Runner.run(Job) -> JobResult`` contract as ``DockerRunner``.
"""

from __future__ import annotations

import os
import re
import resource
import select
import signal as _signal
import subprocess
import tempfile
import time
from pathlib import Path

from . import isolation
from .jobio import Drain, rmtree, safe_relpath, scrubbed_env
from .proctree import TOKEN_VAR, ProcessTree, cgroup_available, cleanup_stale, pid_alive
from .watchdog import Watchdog
from .runner import Job, JobResult, Runner, SandboxError


def _wait(proc: subprocess.Popen, timeout: float) -> None:
    """``proc.wait(timeout)`` without its 50 ms polling: a pidfd wakes us the moment it exits."""
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        proc.wait(timeout=timeout)
        return
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        ready = poller.poll(timeout * 1000)
    finally:
        os.close(fd)
    if not ready:
        raise subprocess.TimeoutExpired(proc.args, timeout)
    proc.wait()


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
_STALE_WORKDIR = re.compile(r"^arbor-job-(\d+)-")


def _remove_stale_workdirs(base_tmp: str | None) -> None:
    """Workdirs whose owning Arbor died (kill -9) are removed by the next runner that starts."""
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

    The isolation itself is ``self.plan`` (``isolation.IsolationPlan``): ``full_plan`` is what the
    settings ask for on this kernel, ``plan`` what jobs get (the same unless the device probe
    replaced a layer, which ``notices`` then says).
    """

    name = "local"

    def __init__(self, base_tmp: str | None = None, *, network: str = "none",
                 filesystem: str = "isolate", max_processes: int | None = 512,
                 max_open_files: int | None = 1024, max_file_bytes: int | None = None,
                 extra_read_paths: list[str] | tuple[str, ...] = (), device: str = "cpu",
                 device_check: bool = True) -> None:
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
        self.kernel = isolation.kernel_support()
        self.full_plan = isolation.plan_for(network, filesystem, self.kernel)
        self.plan = self.full_plan
        self.notices += isolation.plan_notices(network, filesystem, self.kernel)
        if os.geteuid() == 0 and not cgroup_available():
            self.notices.append("local sandbox: running as root without a pids cgroup: RLIMIT_NPROC "
                                "does not bind root, a fork bomb is only stopped by the time limit")
        self.device_probe = None  # the probe's findings (sandbox.gpu.DeviceProbe) for a GPU device
        if device_check and device.startswith("cuda"):  # ROCm torch calls its GPUs cuda too
            self._check_device()

    def _check_device(self) -> None:
        from .gpu import check_device

        try:
            probe = check_device(self, self.device)
        except BaseException:
            self.close()
            raise
        self.device_probe = probe
        if probe.stop:
            self.close()
            raise SandboxError(probe.stop)

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
    def _preexec(self, job: Job, tree: ProcessTree, child: isolation.ChildIsolation):  # type: ignore[no-untyped-def]
        """The function run in the child between fork and exec (every lookup done up front)."""
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
    def _release(self) -> None:  # the watchdog exits, finding us alive
        self.watchdog.close()

    def _execute(self, job: Job, plan: isolation.IsolationPlan | None = None) -> JobResult:
        plan = self.plan if plan is None else plan
        self.watchdog.start()
        workdir = tempfile.mkdtemp(prefix=f"{_WORKDIR_PREFIX}{os.getpid()}-", dir=self.base_tmp)
        tree: ProcessTree | None = None
        child = None
        try:
            tree = ProcessTree(max_processes=self.max_processes,
                               cgroup_is_sealed=plan.landlock_fs == isolation.FS_ISOLATE)
            try:
                child = isolation.prepare(plan, workdir, self.read_paths, abi=self.kernel.landlock_abi)
            except OSError as exc:  # never run a job with less isolation than its plan
                raise SandboxError(f"local sandbox: cannot prepare the job's isolation ({plan.describe()}): {exc} "
                                   "— check open-file limits, or use sandbox.kind: docker") from None
            return self._run_in(job, workdir, tree, child)
        finally:
            if child is not None:
                child.close()
            if tree is not None:
                tree.kill_all(None)
                tree.close()
            rmtree(workdir)

    def _run_in(self, job: Job, workdir: str, tree: ProcessTree, child: isolation.ChildIsolation) -> JobResult:
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
        start = time.monotonic()
        try:
            proc = subprocess.Popen(
                job.argv, cwd=workdir, env=env, stdin=subprocess.DEVNULL, stdout=out_w, stderr=err_w,
                start_new_session=True,  # pgid == pid: one group for everything that does not setsid
                preexec_fn=self._preexec(job, tree, child), close_fds=True,
            )
        except BaseException:
            for fd in (out_r, out_w, err_r, err_w):
                os.close(fd)
            raise
        os.close(out_w)
        os.close(err_w)
        drains = Drain(out_r, job.max_output_bytes), Drain(err_r, job.max_output_bytes)
        try:
            try:
                _wait(proc, max(job.timeout_s, 0.0))
            except subprocess.TimeoutExpired:
                timed_out = True
                tree.kill_all(proc.pid)
                proc.wait()
        except BaseException:
            # KeyboardInterrupt or any other interruption: never leave the tree running.
            tree.kill_all(proc.pid)
            proc.wait()
            raise
        finally:
            # The direct child is gone; whatever it left (daemons, setsid escapees) dies now.
            strays = tree.kill_all(proc.pid)
            out, err = drains[0].finish(), drains[1].finish()
        duration = time.monotonic() - start
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
        return JobResult(
            returncode=rc, timed_out=timed_out, duration_s=duration, stdout_tail=out.text(),
            stderr_tail=err.text(), outputs=outputs, signal=-rc if rc is not None and rc < 0 else None,
            notes=notes, stdout_bytes=out.total, stderr_bytes=err.total,
        )
