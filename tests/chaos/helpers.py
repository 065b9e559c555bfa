"""Shared pieces of the chaos suite: a fast campaign, a CLI run that can be killed, and the
invariants every fault must leave intact (0 lost, 0 duplicated, 0 stuck, 0 orphaned, 0 tracebacks)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from sqlalchemy import create_engine, text

REPO = Path(__file__).resolve().parents[2]
PENDING = "('proposed','queued','running','measured')"


def env(**extra: str) -> dict:
    """The suite's environment for an ``arbor`` child, with Python's fault handler on: a run that
    dies of a signal (SIGSEGV once in a full suite after a SIGTERM, not reproduced in 16 reruns)
    then leaves the stacks of its threads in the stderr the failing assertion prints."""
    e = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    e["PYTHONFAULTHANDLER"] = "1"
    e.update(extra)
    return e


def replay_campaign(tmp: Path, name: str = "chaos", evaluations: int = 24, pace: float = 0.0) -> Path:
    """A replayed campaign: the real loop, store and Critic, measurements from a landscape, so a
    whole campaign takes seconds and can be killed at many points. ``pace`` sleeps that many seconds
    per measurement (the synthetic points record 1 s each): a test that must signal a run *while*
    it measures needs a campaign longer than its polling and a loaded CI machine's latency."""
    sys.path.insert(0, str(REPO))
    from benchmarks.synthetic import make_landscape

    make_landscape().dump(tmp / "land.json")
    spec = tmp / f"{name}.yaml"
    spec.write_text(f"name: {name}\ntarget: {{kind: replay, landscape: land.json, pace: {pace}}}\n"
                    f"budget: {{max_evaluations: {evaluations}, max_wall_s: 600}}\n"
                    "critic: {min_speedup: 1.02}\n")
    return spec


def _hangup(disposition):  # type: ignore[no-untyped-def]
    return lambda: signal.signal(signal.SIGHUP, disposition)


def start(*args: str, hup=signal.SIG_DFL, **env_extra: str) -> subprocess.Popen:  # type: ignore[no-untyped-def]
    """``arbor`` as a terminal would start it: SIGHUP at its default even when the suite itself runs
    under ``nohup`` (an ignored signal is inherited, and Arbor leaves an ignored SIGHUP ignored);
    ``hup=signal.SIG_IGN`` starts it as ``nohup`` would."""
    return subprocess.Popen([sys.executable, "-m", "arbor", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env(**env_extra), preexec_fn=_hangup(hup))


def run(*args: str, timeout: float = 300, **env_extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "arbor", *args], capture_output=True, text=True,
                          timeout=timeout, env=env(**env_extra))


def finish(proc: subprocess.Popen, sig: int | None = None, timeout: float = 60) -> tuple[int, str, str]:
    if sig is not None and proc.poll() is None:
        proc.send_signal(sig)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"arbor run did not stop within {timeout} s of signal {sig}")
    return proc.returncode, out, err


def one_line_error(err: str) -> None:
    """What a fault may print: at most one `error:` line (plus the reporter's own lines)."""
    assert "Traceback" not in err, err
    assert sum(1 for ln in err.splitlines() if ln.startswith("error:")) <= 1, err


def query(url: str, sql: str) -> list[tuple]:
    eng = create_engine(url)
    try:
        with eng.connect() as c:
            return [tuple(r) for r in c.execute(text(sql))]
    finally:
        eng.dispose()


def assert_consistent(url: str, evaluations: int | None = None, finished: bool = True) -> None:
    """0 duplicated, 0 lost, 0 stuck: the store after any fault and a final resume."""
    dup_series = query(url, "select node_id, attempt from measurements group by 1, 2 having count(*) > 1")
    assert dup_series == [], f"duplicated measurement series {dup_series}"
    dup_nodes = query(url, "select campaign_id, artifact_sha from nodes group by 1, 2 having count(*) > 1")
    assert dup_nodes == [], f"an artifact got two nodes {dup_nodes}"
    final = query(url, "select node_id, count(*) from verdicts where decision in ('accept','reject') "
                       "group by 1 having count(*) > 1")
    assert final == [], f"a node was judged twice {final}"
    created = query(url, "select count(*) from events where kind='campaign_created'")
    assert created == [(1,)], created
    # every measured verdict points at a stored measurement, every judged node has one
    lost = query(url, "select v.id from verdicts v left join measurements m on m.id = v.measurement_id "
                      "where v.measurement_id is not null and m.id is null")
    assert lost == [], f"verdicts whose measurement is gone {lost}"
    unmeasured = query(url, "select n.id from nodes n where n.state = 'accepted' and not exists "
                            "(select 1 from measurements m where m.node_id = n.id and m.status = 'ok')")
    assert unmeasured == [], f"accepted nodes without a measurement {unmeasured}"
    if finished:
        assert query(url, f"select count(*) from nodes where state in {PENDING}") == [(0,)]
        assert query(url, "select count(*) from leases") == [(0,)]
        assert query(url, "select count(*) from campaign_leases") == [(0,)]
        assert query(url, "select status from campaigns") == [("finished",)]
    if evaluations is not None:  # the budget counts every candidate once: none lost, none extra
        n = query(url, "select count(distinct m.node_id) from measurements m join nodes n on "
                       "n.id = m.node_id where n.parent_id is not null")
        assert n == [(evaluations,)], n


def job_processes_of(pid: int, workers: bool = True) -> list[int]:
    """Live processes carrying the job token of the Arbor process ``pid`` (its jobs' trees), or
    the token of one of its warm workers (a worker and the jobs forked from it); ``workers=False``
    leaves the workers themselves (``pid``'s own children) out: only jobs."""
    needles = f"ARBOR_JOB={pid}-".encode(), f"ARBOR_WORKER={pid}-".encode()
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            env = Path(f"/proc/{d}/environ").read_bytes()
            if any(n in env for n in needles):
                stat = Path(f"/proc/{d}/stat").read_text().rsplit(")", 1)[1].split()
                if stat[0] in ("Z", "X"):
                    continue
                if not workers and needles[0] not in env and int(stat[1]) == pid:
                    continue
                found.append(int(d))
        except OSError:
            pass
    return found


def wait_gone(pid: int, within_s: float) -> list[int]:
    t0 = time.time()
    while time.time() - t0 < within_s:
        left = job_processes_of(pid)
        if not left:
            return []
        time.sleep(0.1)
    left = job_processes_of(pid)
    for p in left:  # never leave them behind, even when failing
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass
    return left
