"""The warm worker: an interpreter that ran job scripts' ``warm()`` once and forks a child per job.

A measurement job is a fresh Python that spends seconds importing torch before it measures
anything (3-5 s on a loaded 2-core machine, the whole of a small kernel's timing). This process
pays that once: it loads job scripts (``runner.PythonEntry``: the kernel harness, the profile
harness) from copies of their files, runs each one's ``warm()`` (allocator pinned, torch and the
helper modules imported — no tensor op, so no OpenMP pool or CUDA context exists to be broken by
``fork``), and then, per job the runner sends, forks a child that becomes what a fresh ``Popen``
job would have been:

    own session and process group, the job's pids cgroup, its CPU affinity and rlimits,
    PR_SET_PDEATHSIG (the worker's death kills it), stdin /dev/null and the job's stdout/stderr
    pipes, its workdir as cwd, the job's ``IsolationPlan`` through ``isolation.ChildIsolation``
    (network namespace or seccomp filter, capabilities dropped, no_new_privs, Landlock with the
    job's own workdir), every other descriptor closed (the worker's socket above all), the job's
    scrubbed environment, and then the script's ``main(argv)``.

Only the runner talks to it, over a unix socket (SOCK_SEQPACKET, one JSON message each; the job's
stdout/stderr pipes travel with the run message as SCM_RIGHTS). Messages:

    worker -> runner  {"ready": true, "pid"}
    runner -> worker  {"op": "load", "entry", "dir", "script"}
    worker -> runner  {"loaded": entry, "warm_s"} | {"load_failed": "one line", "unsafe": bool}
    runner -> worker  {"op": "extra", "entry", "name"}
    worker -> runner  {"extra_done": name, "warm_s"} | {"extra_failed": "one line", "unsafe": bool}
    runner -> worker  {"op": "run", "entry", "workdir", "argv", "env", "plan", "read_paths", "abi",
                       "rlimits", "cgroup_procs", "affinity"}  + 2 fds
    worker -> runner  {"started": pid, "setup_s"} | {"refused": "one line"}
                      then {"exited": pid, "returncode"}  (Popen's convention: -N for signal N)

An *extra* is an optional part of a script's warm-up (``warm_<name>()``, e.g. the kernel harness's
``warm_compiler``: Dynamo's and Inductor's modules, 2-3 s a compiled job) that only some of its
jobs use: the runner asks for it once, before the first job that names it (``PythonEntry.extras``).

A script whose ``warm()`` (or an extra) leaves a thread running or loads a GPU driver makes the worker unsafe to
fork (``unsafe``): the runner kills it and runs that script's jobs as fresh processes.

EOF on the socket (the runner closed it, or died however it died) makes the worker kill the
child it is running and exit; the runner's watchdog sweeps what carries the worker's token.

Run as ``python -I -B warm_worker.py SANDBOX_DIR FD``: stdlib only at module level;
the isolation layers (``isolation.py`` and its siblings, stdlib + ctypes) are loaded by path as a
private package, so the worker never imports Arbor. docs/architecture.md#sandboxes
"""

from __future__ import annotations

import ctypes
import importlib
import importlib.util
import json
import os
import resource
import select
import signal
import socket
import sys
import time
import traceback
import types

_MAX_MSG = 1 << 20
_SETUP_FAILED = 71  # the child's exit status when it could not become the job (the reason is sent)
_PR_SET_PDEATHSIG = 1
ENTRY_MODULE = "arbor_warm_entry_"  # + the entry's id


def send(sock: socket.socket, msg: dict, fds: list[int] | None = None) -> None:
    data = json.dumps(msg).encode()
    if fds:
        socket.send_fds(sock, [data], fds)
    else:
        sock.send(data)


def recv(sock: socket.socket, maxfds: int = 0) -> tuple[dict | None, list[int]]:
    """One message (None at EOF) and the descriptors that came with it."""
    if maxfds:
        data, fds, _flags, _addr = socket.recv_fds(sock, _MAX_MSG, maxfds)
    else:
        data, fds = sock.recv(_MAX_MSG), []
    if not data:
        for fd in fds:
            os.close(fd)
        return None, []
    return json.loads(data), list(fds)


def _load_isolation(sandbox_dir: str):  # type: ignore[no-untyped-def]
    """``isolation.py`` with its relative imports (landlock, seccomp) as a private package."""
    pkg = types.ModuleType("arbor_warm_sandbox")
    pkg.__path__ = [sandbox_dir]  # type: ignore[attr-defined]
    sys.modules[pkg.__name__] = pkg
    return importlib.import_module(f"{pkg.__name__}.isolation")


def _load_entry(entry_id: str, entry_dir: str, script: str):  # type: ignore[no-untyped-def]
    path = os.path.join(entry_dir, script)
    spec = importlib.util.spec_from_file_location(ENTRY_MODULE + entry_id, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _unsafe() -> str | None:
    """Why forking this process would break a child, or None: a Python thread the fork would
    lose mid-work, or a GPU driver already initialised (CUDA refuses a forked context)."""
    import threading  # noqa: PLC0415

    if threading.active_count() != 1:
        return f"{threading.active_count() - 1} Python thread(s) left running"
    driver = _driver_loaded()
    return f"{driver} loaded (a device was initialised)" if driver else None


def _driver_loaded() -> str | None:
    """A GPU driver library mapped in this process means a device was initialised: a child forked
    from here could not start its own context (CUDA refuses a forked initialised driver)."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
            maps = f.read()
    except OSError:
        return None
    return "libcuda.so" if "libcuda.so" in maps else None


def _exitcode(status: int) -> int:
    return os.waitstatus_to_exitcode(status)


class Worker:
    def __init__(self, sock: socket.socket, iso) -> None:  # type: ignore[no-untyped-def]
        self.sock, self.iso = sock, iso
        self.entries: dict[str, tuple] = {}  # id -> (module, its directory)
        self.entry, self.entry_dir = None, ""  # the one a child runs
        self.prctl = iso.libc().prctl
        self.pid = os.getpid()

    # ---------------------------------------------------------------- the loop (worker side)
    def serve(self) -> int:
        while True:
            msg, fds = recv(self.sock, maxfds=2)
            if msg is None:
                return 0
            try:
                if msg.get("op") == "load" and not fds:
                    self.load(msg)
                elif msg.get("op") == "extra" and not fds and msg.get("entry") in self.entries:
                    self.extra(msg)
                elif msg.get("op") == "run" and len(fds) == 2 and msg.get("entry") in self.entries:
                    self.run(msg, fds)
                else:
                    send(self.sock, {"refused": f"warm worker: bad request {sorted(msg)}"})
            finally:
                for fd in fds:
                    os.close(fd)

    def load(self, msg: dict) -> None:
        """Load one job script and run its warm(): once per script (by content) and worker."""
        t0 = time.perf_counter()
        entry_id = str(msg["entry"])
        try:
            module = _load_entry(entry_id, msg["dir"], msg["script"])
            module.warm()
        except BaseException as exc:  # noqa: BLE001  told to the runner: that script runs fresh
            traceback.print_exc()
            send(self.sock, {"load_failed": f"{msg['script']}: warm() failed: {type(exc).__name__}: {exc}"[:2000],
                             "unsafe": _unsafe() is not None})
            return
        why = _unsafe()
        if why:
            send(self.sock, {"load_failed": f"{msg['script']}'s warm() left the worker unsafe to fork: {why}",
                             "unsafe": True})
            return
        self.entries[entry_id] = (module, msg["dir"])
        send(self.sock, {"loaded": entry_id, "warm_s": time.perf_counter() - t0})

    def extra(self, msg: dict) -> None:
        """Run one named extra of a loaded script's warm-up (``warm_<name>()``), as ``load`` runs
        ``warm()``: a failure or an unsafe state is told to the runner, which decides."""
        t0 = time.perf_counter()
        name = str(msg.get("name") or "")
        module, _dir = self.entries[str(msg["entry"])]
        fn = getattr(module, f"warm_{name}", None) if name.isidentifier() else None
        if not callable(fn):
            send(self.sock, {"extra_failed": f"no warm-up named {name[:60]!r} in this script", "unsafe": False})
            return
        try:
            fn()
        except BaseException as exc:  # noqa: BLE001  told to the runner: the job imports it itself
            # it may have imported part of what it meant to, with the worker's folders: unfit
            traceback.print_exc()
            send(self.sock, {"extra_failed": f"warm_{name}() failed: {type(exc).__name__}: {exc}"[:2000],
                             "unsafe": True})
            return
        why = _unsafe()
        if why:
            send(self.sock, {"extra_failed": f"warm_{name}() left the worker unsafe to fork: {why}", "unsafe": True})
            return
        send(self.sock, {"extra_done": name, "warm_s": time.perf_counter() - t0})

    def run(self, job: dict, stdio: list[int]) -> None:
        t0 = time.perf_counter()
        self.entry, self.entry_dir = self.entries[job["entry"]]
        try:
            child_iso = self.iso.prepare(self.iso.IsolationPlan.from_dict(job["plan"]), job["workdir"],
                                         job.get("read_paths") or [], abi=job.get("abi"))
        except OSError as exc:
            send(self.sock, {"refused": f"cannot prepare the job's isolation: {exc}"})
            return
        status_r, status_w = os.pipe2(os.O_CLOEXEC)
        try:
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:  # never returns
                os.close(status_r)
                self.child(job, stdio, status_w, child_iso)
        except OSError as exc:
            os.close(status_r)
            send(self.sock, {"refused": f"fork failed: {exc}"})
            return
        finally:
            child_iso.close()
            os.close(status_w)
        why = b""
        while chunk := os.read(status_r, 4096):  # EOF: the child closed it and runs the script
            why += chunk
        os.close(status_r)
        if why:
            _, status = os.waitpid(pid, 0)
            send(self.sock, {"refused": why.decode("utf-8", "replace")[:2000]})
            return
        send(self.sock, {"started": pid, "setup_s": time.perf_counter() - t0})
        send(self.sock, {"exited": pid, "returncode": self.wait(pid)})

    def wait(self, pid: int) -> int | None:
        """The child's exit status; the runner hanging up first kills the child's session."""
        try:
            pidfd = os.pidfd_open(pid)
        except (AttributeError, OSError):
            pidfd = -1
        poller = select.poll()
        poller.register(self.sock, select.POLLIN | select.POLLHUP)
        if pidfd >= 0:
            poller.register(pidfd, select.POLLIN)
        try:
            while True:
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    return _exitcode(status)
                for fd, _ev in poller.poll(None if pidfd >= 0 else 5):
                    if fd == self.sock.fileno() and not self.sock.recv(_MAX_MSG):  # nothing else comes mid-job
                        self.kill_child(pid)  # the runner is gone: so is its job
                        os.waitpid(pid, 0)
                        os._exit(0)
        finally:
            if pidfd >= 0:
                os.close(pidfd)

    @staticmethod
    def kill_child(pid: int) -> None:
        for kill in (os.killpg, os.kill):
            try:
                kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    # ---------------------------------------------------------------- the child
    def child(self, job: dict, stdio: list[int], status_w: int, iso_child) -> None:  # type: ignore[no-untyped-def]
        """Become the job, then run the script's main; never returns. Every step that fails
        before main reports its reason on ``status_w`` and exits: a job never runs with less."""
        try:
            os.setsid()  # pgid == sid == pid, as Popen(start_new_session=True)
            if job.get("cgroup_procs"):  # before anything can fork: not even the first child escapes
                with open(job["cgroup_procs"], "w", encoding="ascii") as f:
                    f.write(str(os.getpid()))
            if job.get("affinity"):
                os.sched_setaffinity(0, job["affinity"])
            for which, value in job.get("rlimits") or []:
                _soft, hard = resource.getrlimit(which)
                if hard != resource.RLIM_INFINITY and value > hard:
                    value = hard
                resource.setrlimit(which, (value, value))
            self.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # the worker's death is ours
            if os.getppid() != self.pid:
                os._exit(1)
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.dup2(stdio[0], 1)
            os.dup2(stdio[1], 2)
            os.chdir(job["workdir"])
            iso_child.apply()
            self.sock.detach()  # its descriptor is closed next; the object must not close a reused one
            os.closerange(3, status_w)
            os.closerange(status_w + 1, 1 << 20)
            self.become(job)
        except BaseException as exc:  # noqa: BLE001  said to the worker, which refuses the job
            try:
                os.write(status_w, f"the job's child could not be set up: {type(exc).__name__}: {exc}".encode())
            finally:
                os._exit(_SETUP_FAILED)
        os.close(status_w)
        code = 1
        try:
            code = self.entry.main(list(job["argv"])) or 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except BaseException:  # noqa: BLE001  as an uncaught exception ends a fresh interpreter
            traceback.print_exc()
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(code if isinstance(code, int) else 1)

    def become(self, job: dict) -> None:
        """What a fresh interpreter started in the workdir would see: its environment, argv,
        the script's own path, sys.path, temp dir and random state."""
        os.environ.clear()
        os.environ.update(job["env"])
        workdir = job["workdir"]
        sys.argv = list(job["argv"])
        self.entry.__file__ = os.path.join(workdir, job["argv"][0])
        others = {d for _m, d in self.entries.values()} - {self.entry_dir}  # other scripts' copies
        sys.path[:] = [workdir if p == self.entry_dir else p for p in sys.path if p not in others]
        tempfile = sys.modules.get("tempfile")
        if tempfile is not None:
            tempfile.tempdir = None  # recomputed from the job's TMPDIR
        for module, _dir in self.entries.values():  # what a script's warm-up computed from the
            hook = getattr(module, "after_fork", None)  # worker's folders, made the job's
            if callable(hook):
                hook()
        np = sys.modules.get("numpy")
        if np is not None:  # Python's random reseeds itself after fork; numpy's global state does not
            np.random.seed()


def main(argv: list[str]) -> int:
    sandbox_dir, fd = argv[1], int(argv[2])
    sock = socket.socket(fileno=fd)
    try:
        iso = _load_isolation(sandbox_dir)
    except BaseException as exc:  # noqa: BLE001  told to the runner, which falls back to fresh processes
        send(sock, {"ready": False, "error": f"{type(exc).__name__}: {exc}"[:2000]})
        traceback.print_exc()
        return 1
    send(sock, {"ready": True, "pid": os.getpid()})
    return Worker(sock, iso).serve()


if __name__ == "__main__":
    code = main(sys.argv)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
