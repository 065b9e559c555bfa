"""Two ``arbor run`` of one campaign: exactly one runs, the other refuses in one line (exit 1)
without touching the campaign; a dead owner's campaign is taken over cleanly."""

from __future__ import annotations

import signal
import time

import pytest

from .helpers import assert_consistent, finish, query, replay_campaign, run, start

pytestmark = [pytest.mark.chaos, pytest.mark.slow]


def _refusal(err: str) -> None:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith("error: campaign 'chaos' is already being run by pid ")
    assert " on host " in lines[0]


@pytest.mark.parametrize("storage", ["sqlite", "pg"])
def test_started_together_exactly_one_runs(tmp_path, storage, request):
    spec = replay_campaign(tmp_path, evaluations=20)
    url = f"sqlite:///{tmp_path / 'arbor.db'}" if storage == "sqlite" else request.getfixturevalue("pg_url")
    procs = [start("run", str(spec), "--quiet", "--store", url) for _ in range(2)]
    results = [finish(p, timeout=240) for p in procs]
    codes = sorted(rc for rc, _o, _e in results)
    assert codes == [0, 1], [(rc, e) for rc, _o, e in results]
    _refusal(next(e for rc, _o, e in results if rc == 1))
    assert_consistent(url, evaluations=20)


def test_second_run_refuses_at_once_and_takes_over_after_kill_9(tmp_path):
    spec = replay_campaign(tmp_path, evaluations=20)
    url = f"sqlite:///{tmp_path / 'arbor.db'}"
    first = start("run", str(spec), "--quiet")
    try:
        deadline = time.time() + 120
        while time.time() < deadline:
            try:
                if query(url, "select count(*) from measurements")[0][0]:
                    break
            except Exception:  # noqa: BLE001  no store/schema yet
                pass
            time.sleep(0.05)
        first.send_signal(signal.SIGSTOP)  # alive and holding the campaign, however long we take
        t0 = time.time()
        second = run("run", str(spec), "--quiet", timeout=60)
        assert second.returncode == 1, second.stderr
        _refusal(second.stderr)
        assert time.time() - t0 < 30  # refused up front: no busy loop, no waiting for the first
        assert first.poll() is None, "the first run was disturbed by the second"
    finally:
        finish(first, signal.SIGKILL)
    # the owner is dead: the next run takes the campaign over and finishes it
    r = run("run", str(spec), "--quiet")
    assert r.returncode == 0, r.stderr
    assert query(url, "select count(*) from events where kind='lease_taken_over'") == [(1,)]
    assert_consistent(url, evaluations=20)
