"""The warm-worker path of the local runner: a job with a ``PythonEntry`` runs in a child forked
from a worker that ran the script's ``warm()`` once — with every guarantee a fresh process has.

The jobs here run a tiny entry script (no torch: seconds, not minutes); the kernel harness itself
goes through the same path in test_kernel_protocol.py, the hostile suite and the corpus."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from arbor.sandbox.runners import isolation
from arbor.sandbox.runners.forkserver import ForkServer, WorkerRefused
from arbor.sandbox.runners.local import LocalRunner
from arbor.sandbox.runner import Job, PythonEntry, SandboxError

from tests.hostile.helpers import job_processes, leftovers

PY = sys.executable


@pytest.fixture(scope="module", autouse=True)
def _host_pids(host_pids):  # these tests follow a job's processes by the pids it reports
    yield
SECRET = "warm-secret-71c2"
ENTRY = textwrap.dedent('''
    import json, os, signal, socket, subprocess, sys, threading, time

    WARMED = None
    EXTRA = None  # set by the 'ok' extra, in the worker
    AFTER = None  # set in each child by after_fork, from the job's environment


    def warm():
        global WARMED
        WARMED = os.getpid()  # the worker's pid, seen by every child forked from it


    def warm_ok():
        global EXTRA
        EXTRA = os.getpid()


    def warm_fail():
        raise ImportError("half imported")


    def warm_thread():
        threading.Thread(target=time.sleep, args=(60,), daemon=True).start()


    def after_fork():
        global AFTER
        AFTER = os.environ.get("TMPDIR")


    def attempt(fn):
        try:
            return {"ok": True, "value": fn()}
        except Exception as exc:
            return {"ok": False, "error": type(exc).__name__ + ": " + str(exc)}


    def write(out):
        with open("out.json", "w") as f:
            json.dump(out, f)


    def main(argv):
        mode, args = argv[1], argv[2:]
        if mode == "probe":
            proc_env = open("/proc/self/environ", "rb").read().decode(errors="replace")
            write({"pid": os.getpid(), "ppid": os.getppid(), "warmed": WARMED, "cwd": os.getcwd(),
                   "extra": EXTRA, "after": AFTER,
                   "env": dict(os.environ), "proc_env": proc_env, "argv": sys.argv, "file": __file__,
                   "fds": sorted(int(f) for f in os.listdir("/proc/self/fd")),
                   "pgid": os.getpgid(0), "sid": os.getsid(0), "affinity": sorted(os.sched_getaffinity(0))})
        elif mode == "attack":
            path, port, runner, udp_port = args[0], int(args[1]), int(args[2]), int(args[3])
            def udp():
                s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                return s.sendto(b"x", ("127.0.0.1", udp_port))
            write({"read": attempt(lambda: open(path).read()),
                   "tcp": attempt(lambda: socket.create_connection(("127.0.0.1", port), timeout=3).close()),
                   "udp": attempt(udp),
                   "kill_worker": attempt(lambda: os.kill(os.getppid(), 0)),  # 0: the permission check only
                   "kill_runner": attempt(lambda: os.kill(runner, 0)),
                   "write_outside": attempt(lambda: open(os.path.join(os.path.dirname(path), "x"), "w").write("x")),
                   # a GPU driver writes its own /proc/<pid> as it starts: granted to the child, not beyond
                   "own_proc": attempt(lambda: open("/proc/self/comm", "w").write(open("/proc/self/comm").read())),
                   "worker_proc": attempt(lambda: open(f"/proc/{os.getppid()}/comm", "w").write("x"))})
        elif mode in ("linger", "hang"):
            threading.Thread(target=time.sleep, args=(300,)).start()  # non-daemon: os._exit ends it
            daemon = subprocess.Popen([sys.executable, "-c", "import os, time; os.setsid(); time.sleep(300)"])
            forked = os.fork()  # a plain fork: its /proc environ is the worker's
            if forked == 0:
                time.sleep(300)
                os._exit(0)
            write({"daemon": daemon.pid, "forked": forked})
            if mode == "hang":
                time.sleep(300)
        elif mode == "escape":  # a double-forked daemon in its own session, never exec'd: only the
            r, w = os.pipe()    # worker's token in /proc/<pid>/environ says whose it is
            if os.fork() == 0:
                os.setsid()
                if os.fork() == 0:
                    os.write(w, str(os.getpid()).encode())
                    os.close(w)
                    time.sleep(300)
                os._exit(0)
            os.close(w)
            write({"daemon": int(os.read(r, 32))})
        elif mode == "exit":
            sys.exit(int(args[0]))
        elif mode == "raise":
            raise RuntimeError("boom from main")
        return 0


    if __name__ == "__main__":  # a fresh process (the runner without a worker)
        sys.exit(main(sys.argv))
''')


def job(*args: str, timeout_s: float = 30, entry: str = ENTRY, env: dict | None = None,
        extras: tuple[str, ...] = ()) -> Job:
    return Job(argv=[PY, "-I", "-B", "entry.py", *args], files={"entry.py": entry}, timeout_s=timeout_s,
               collect=["out.json"], env=env or {}, entry=PythonEntry("entry.py", extras=extras))


def out(res) -> dict:  # type: ignore[no-untyped-def]
    assert "out.json" in res.outputs, (res.returncode, res.stderr_tail)
    return json.loads(res.outputs["out.json"])


def _dead(pid: int, wait_s: float = 5.0) -> bool:
    """True once ``pid`` is gone or a zombie, within ``wait_s``."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            if "\nState:\tZ" in Path(f"/proc/{pid}/status").read_text():
                return True
        except FileNotFoundError:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


def _worker_pids(runner: LocalRunner) -> list[int]:
    assert runner.warm is not None
    return [w.pid for w in runner.warm.servers if w.pid is not None]


@pytest.fixture(scope="module")
def runner():
    with LocalRunner() as r:
        yield r


@pytest.mark.timing
def test_a_job_runs_in_a_child_of_the_warm_worker_set_up_like_a_fresh_process(runner, monkeypatch):
    monkeypatch.setenv("ARBOR_WARM_TEST_SECRET", SECRET)
    first = runner.run(job("probe"))
    res = runner.run(job("probe"))
    assert res.returncode == 0 and first.returncode == 0, res.stderr_tail
    a, b = out(first), out(res)
    assert "worker_setup" in res.phase_times and res.phase_times["worker_start"] < 1.0  # already warm
    assert a["warmed"] == b["warmed"] == a["ppid"] == b["ppid"] != b["pid"]  # one worker, a child each
    assert b["pgid"] == b["sid"] == b["pid"]  # own session, as Popen(start_new_session=True)
    assert b["cwd"] == b["env"]["HOME"] == b["env"]["TMPDIR"] and Path(b["cwd"]).name.startswith("arbor-job-")
    assert b["argv"] == ["entry.py", "probe"] and b["file"] == os.path.join(b["cwd"], "entry.py")
    assert b["env"]["ARBOR_JOB"].startswith(f"{os.getpid()}-") and a["env"]["ARBOR_JOB"] != b["env"]["ARBOR_JOB"]
    assert SECRET not in json.dumps(b["env"]) and SECRET not in b["proc_env"]  # scrubbed both ways
    assert b["fds"][:3] == [0, 1, 2] and len(b["fds"]) <= 4  # + the listing's own: the worker's socket is closed
    assert b["affinity"] == sorted(os.sched_getaffinity(0))
    assert not Path(b["cwd"]).exists()  # the workdir went with the job


def test_results_have_the_shape_of_a_fresh_process(runner):
    with LocalRunner(warm_worker=False) as fresh:
        for args in (("exit", "3"), ("raise",), ("probe",)):
            warm, cold = runner.run(job(*args)), fresh.run(job(*args))
            assert (warm.returncode, warm.timed_out, warm.signal) == (cold.returncode, cold.timed_out, cold.signal)
            assert sorted(warm.outputs) == sorted(cold.outputs)
            assert ("boom from main" in warm.stderr_tail) == ("boom from main" in cold.stderr_tail)
            assert "worker_setup" in warm.phase_times and "worker_setup" not in cold.phase_times


@pytest.mark.skipif(isolation.landlock_abi() < 6, reason="needs Landlock ABI >= 6 (Linux >= 6.12)")
def test_a_forked_child_is_isolated_like_a_fresh_one(runner, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text(SECRET)
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    srv.setblocking(False)
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    udp.setblocking(False)
    try:
        res = runner.run(job("attack", str(secret), str(srv.getsockname()[1]), str(os.getpid()),
                             str(udp.getsockname()[1])))
        got = out(res)
        for what in ("read", "tcp", "udp", "kill_worker", "kill_runner", "write_outside", "worker_proc"):
            assert not got[what]["ok"], f"{what}: {got[what]}"
        assert got["own_proc"]["ok"], got["own_proc"]
        with pytest.raises(BlockingIOError):
            srv.accept()
        with pytest.raises(BlockingIOError):
            udp.recvfrom(16)
        assert not (tmp_path / "x").exists()
        assert all(w is not None and _alive(w) for w in _worker_pids(runner))  # the worker lives on
    finally:
        srv.close()
        udp.close()


def _alive(pid: int) -> bool:
    return not _dead(pid, wait_s=0.0)


def test_a_timeout_kills_the_childs_whole_tree(runner):
    t0 = time.monotonic()
    res = runner.run(job("hang", timeout_s=3))
    assert res.timed_out and res.returncode == -signal.SIGKILL
    assert time.monotonic() - t0 < 3 + 5
    got = out(res)
    assert _dead(got["daemon"]) and _dead(got["forked"]), "a process of the job survived its timeout"
    assert leftovers(os.getpid()) == {}
    assert runner.run(job("probe")).returncode == 0  # the worker serves the next job


def test_threads_and_daemons_a_job_leaves_behind_die_with_it(runner):
    res = runner.run(job("linger"))
    assert res.returncode == 0 and not res.timed_out
    got = out(res)
    assert _dead(got["daemon"]) and _dead(got["forked"])
    assert any("left running" in n for n in res.notes)
    assert leftovers(os.getpid()) == {}


def test_without_a_cgroup_a_daemon_forked_without_exec_is_found_by_the_workers_token(monkeypatch):
    from arbor.sandbox.runners import proctree

    monkeypatch.setattr(proctree, "_pids_cgroup_base", lambda: None)  # /proc scanning only
    with LocalRunner() as r:
        res = r.run(job("escape"))
        assert res.returncode == 0, res.stderr_tail
        daemon = out(res)["daemon"]
        assert _dead(daemon), "a setsid'd daemon forked from the job outlived it"
        assert any("left running" in n for n in res.notes)
        assert all(_alive(w) for w in _worker_pids(r))  # the worker carries that token too: spared


def test_a_crashed_worker_is_replaced():
    with LocalRunner() as r:
        first = out(r.run(job("probe")))
        os.kill(first["warmed"], signal.SIGKILL)
        assert _dead(first["warmed"])
        second = r.run(job("probe"))
        got = out(second)
        assert got["warmed"] != first["warmed"] and got["ppid"] == got["warmed"]  # a new worker
        assert second.phase_times["worker_start"] > 0


def test_a_worker_that_dies_mid_job_costs_the_job_a_fresh_run():
    with LocalRunner() as r:
        r.run(job("probe"))
        worker = _worker_pids(r)[0]
        threading_kill = subprocess.Popen([PY, "-c", f"import os, time; time.sleep(1.5); os.kill({worker}, 9)"])
        res = r.run(job("hang", timeout_s=6))
        threading_kill.wait()
        assert any("warm worker" in n and "fresh process" in n for n in res.notes), res.notes
        assert res.timed_out  # the fresh run hung too, and was killed at its limit
        assert "worker_setup" not in res.phase_times
        assert leftovers(os.getpid()) == {}


def test_a_hung_worker_is_killed_and_replaced(monkeypatch):
    monkeypatch.setattr(ForkServer, "reply_timeout_s", 2.0)
    with LocalRunner() as r:
        r.run(job("probe"))
        hung = _worker_pids(r)[0]
        os.kill(hung, signal.SIGSTOP)
        try:
            res = r.run(job("probe"))
            assert res.returncode == 0 and any("warm worker" in n for n in res.notes), res.notes
            assert out(res)["ppid"] == os.getpid()  # ran as a fresh process
            assert _dead(hung), "the hung worker was not killed"
            again = out(r.run(job("probe")))
            assert again["warmed"] not in (None, hung)
        finally:
            try:
                os.kill(hung, signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_a_worker_that_cannot_warm_up_leaves_its_jobs_to_fresh_processes():
    bad = ENTRY.replace("WARMED = os.getpid()", "WARMED = os.getpid()\n    raise ImportError('no torch here')")
    threaded = ENTRY.replace("WARMED = os.getpid()", "WARMED = os.getpid()\n"
                             "    threading.Thread(target=time.sleep, args=(60,), daemon=True).start()")
    for entry, why in ((bad, "no torch here"), (threaded, "thread")):
        with LocalRunner() as r:
            for _ in range(2):
                res = r.run(job("probe", entry=entry))
                assert res.returncode == 0 and out(res)["ppid"] == os.getpid()  # fresh
            assert sum(why in n for n in r.notices) == 1, r.notices  # said once


def test_a_child_that_cannot_be_set_up_is_refused_never_run():
    j = job("probe")
    server = ForkServer(j)
    try:
        server.load(j)
        r, w = os.pipe()
        try:
            with pytest.raises(WorkerRefused, match="could not be set up"):
                server.spawn(j, {"workdir": "/nonexistent-workdir", "argv": ["entry.py", "probe"], "env": {},
                                 "plan": isolation.IsolationPlan().to_dict(), "rlimits": []}, w, w)
        finally:
            os.close(r)
            os.close(w)
        assert server.alive()  # a refused job does not cost the worker
    finally:
        server.close()
    assert not Path(server.dir).exists()


def test_an_unpreparable_isolation_is_a_sandbox_error(monkeypatch):
    with LocalRunner() as r:
        r.run(job("probe"))
        server = r.warm.servers[0]
        monkeypatch.setattr(server, "spawn", lambda *a, **k: (_ for _ in ()).throw(WorkerRefused("ruleset: EMFILE")))
        with pytest.raises(SandboxError, match="cannot prepare the job's isolation"):
            r.run(job("probe"))


def test_scripts_share_a_worker_unless_their_files_or_environment_differ():
    other = Job(argv=[PY, "-I", "-B", "other.py", "probe"], files={"other.py": ENTRY}, timeout_s=30,
                collect=["out.json"], entry=PythonEntry("other.py"))
    with LocalRunner() as r:
        a = out(r.run(job("probe")))
        b = out(r.run(other))  # another script, loaded into the same worker
        assert a["warmed"] == b["warmed"] == a["ppid"] == b["ppid"]  # both warmed in, and forked from, one worker
        assert b["file"].endswith("/other.py") and b["argv"] == ["other.py", "probe"]
        c = out(r.run(job("probe", entry=ENTRY + "\n# another version\n")))  # entry.py, other content
        d = out(r.run(job("probe", env={"CUDA_VISIBLE_DEVICES": "1"})))
        assert len({a["ppid"], c["ppid"], d["ppid"]}) == 3
        assert len(r.warm.servers) <= r.warm.max_workers


def test_a_runner_that_closes_leaves_no_worker():
    r = LocalRunner()
    r.run(job("probe"))
    workers, dirs = _worker_pids(r), [w.dir for w in r.warm.servers]
    r.close()
    assert workers and all(_dead(p) for p in workers)
    assert not any(Path(d).exists() for d in dirs)


OWNER = textwrap.dedent("""
    import sys
    from arbor.sandbox.runners.local import LocalRunner
    from arbor.sandbox.runner import Job, PythonEntry
    entry = open(sys.argv[1]).read()
    r = LocalRunner(filesystem="host")
    r.run(Job([sys.executable, "-I", "-B", "entry.py", "probe"], {"entry.py": entry}, timeout_s=60,
              entry=PythonEntry("entry.py")))
    print("warm", flush=True)
    r.run(Job([sys.executable, "-I", "-B", "entry.py", "hang"], {"entry.py": entry}, timeout_s=300,
              entry=PythonEntry("entry.py")))
""")


def test_kill_9_of_the_owner_kills_the_worker_and_everything_forked_from_it(tmp_path):
    entry = tmp_path / "entry.py"
    entry.write_text(ENTRY)
    owner = subprocess.Popen([PY, "-c", OWNER, str(entry)], stdout=subprocess.PIPE, text=True)
    try:
        assert owner.stdout.readline().strip() == "warm"
        deadline = time.time() + 60
        procs: list[int] = []
        while time.time() < deadline and len(procs) < 4:  # worker, child, its daemon, its forked child
            procs = job_processes(owner.pid, workers=True)
            time.sleep(0.1)
        assert len(procs) >= 4, procs
        os.kill(owner.pid, signal.SIGKILL)
        t0 = time.time()
        while time.time() - t0 < 5 and any(_alive(p) for p in procs):
            time.sleep(0.1)
        assert [p for p in procs if _alive(p)] == [], f"alive {time.time() - t0:.1f} s after kill -9"
    finally:
        if owner.poll() is None:
            owner.kill()
        owner.wait()
        for p in job_processes(owner.pid, workers=True):
            os.kill(p, signal.SIGKILL)


@pytest.mark.timing
def test_prewarm_warms_the_script_while_the_caller_goes_on():
    slow = ENTRY.replace("WARMED = os.getpid()", "WARMED = os.getpid()\n    time.sleep(2.0)")
    with LocalRunner() as r:
        t0 = time.monotonic()
        assert r.prewarm(job("probe", entry=slow))
        assert time.monotonic() - t0 < 1.0  # it did not wait for the warm-up
        assert not r.prewarm(job("probe", entry=slow))  # already under way
        time.sleep(3.0)
        res = r.run(job("probe", entry=slow))
        assert out(res)["ppid"] == out(res)["warmed"] and res.phase_times["worker_start"] < 1.0
    with LocalRunner() as cold:
        res = cold.run(job("probe", entry=slow))
        assert res.phase_times["worker_start"] >= 2.0  # what the prewarm saved
    with LocalRunner(warm_worker=False) as fresh:
        assert not fresh.prewarm(job("probe"))


def test_a_script_run_while_another_is_still_warming_gets_its_own_answers():
    """A prewarmed script (the measurement harness) whose load is not answered yet, then another
    script in the same worker (a profile): the worker answers in order, so the second job must not
    take the first's answer for its own. It did, and every later reply came one behind ("started"
    expected, "loaded" read): no profile of a two-worker campaign ever ran."""
    other = Job(argv=[PY, "-I", "-B", "other.py", "probe"], files={"other.py": ENTRY}, timeout_s=30,
                collect=["out.json"], entry=PythonEntry("other.py"))
    with LocalRunner() as r:
        assert r.prewarm(job("probe"))
        for j in (other, job("probe"), other):
            res = r.run(j)
            assert res.returncode == 0 and not res.notes, (res.notes, res.stderr_tail)
            assert out(res)["ppid"] == out(res)["warmed"]  # forked from the warm worker
        assert len(r.warm.servers) == 1


def test_two_jobs_at_once_on_one_runner_one_warm_one_fresh(runner):
    import threading

    results: list = []
    sleepy = job("exit", "0")
    slow = ENTRY.replace("    elif mode == \"exit\":", "    elif mode == \"nap\":\n        time.sleep(2)\n"
                         "        write({\"ppid\": os.getppid()})\n    elif mode == \"exit\":")
    naps = [job("nap", entry=slow) for _ in range(2)]
    runner.run(sleepy)  # the worker is up
    threads = [threading.Thread(target=lambda j=j: results.append(runner.run(j))) for j in naps]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [r.returncode for r in results] == [0, 0]
    warm = ["worker_setup" in r.phase_times for r in results]
    assert sorted(warm) == [False, True]  # the busy worker was not shared: the other started fresh
    assert leftovers(os.getpid()) == {}


def test_an_extra_warm_up_runs_once_before_the_first_job_that_names_it():
    """``PythonEntry.extras``: the compiled candidates' Dynamo/Inductor import, paid by the first
    such job only (``worker_warm_<name>``), never by jobs that do not name it; ``after_fork``
    runs in every child with the job's environment set."""
    with LocalRunner() as r:
        plain = r.run(job("probe"))
        first = r.run(job("probe", extras=("ok",)))
        again = r.run(job("probe", extras=("ok",)))
        later = r.run(job("probe"))
        a, b, c, d = (out(x) for x in (plain, first, again, later))
        assert a["extra"] is None and b["extra"] == c["extra"] == d["extra"] == b["ppid"] == a["ppid"]
        assert "worker_warm_ok" in first.phase_times and "worker_warm_ok" not in again.phase_times
        assert all(x["after"] == x["env"]["TMPDIR"] == x["cwd"] for x in (a, b, c, d))


def test_an_extra_that_fails_leaves_the_worker_unfit_and_its_jobs_still_run():
    """An extra that failed part-way may have imported half of what it meant to, with the worker's
    folders; one that leaves a thread makes forking unsafe: either way the worker is replaced, the
    job runs (fresh), the runner says so once, and later jobs run warm without that extra."""
    for name, why in (("fail", "half imported"), ("thread", "thread")):
        with LocalRunner() as r:
            warm = r.run(job("probe"))
            runs = [r.run(job("probe", extras=(name,))) for _ in range(3)]
            assert all(x.returncode == 0 for x in (warm, *runs)), [x.stderr_tail for x in runs]
            outs = [out(x) for x in runs]
            assert outs[0]["ppid"] == os.getpid()  # the first ran fresh: its worker was killed
            assert outs[1]["ppid"] == outs[2]["ppid"] not in (os.getpid(), out(warm)["ppid"])  # a new worker
            assert all(o["extra"] is None for o in outs)
            assert sum(why in n and f"'{name}' warm-up" in n for n in r.notices) == 1, r.notices
            assert _dead(out(warm)["ppid"])  # the unfit worker is gone
