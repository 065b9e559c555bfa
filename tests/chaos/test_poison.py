"""A node whose measurement keeps dying is failed as ``crashed_runner`` after
``budget.max_node_crashes`` (3) tries instead of being re-queued forever, and the wall-clock
budget counts the time those crashed runs spent."""

from __future__ import annotations

import signal
import time

import pytest

from .helpers import finish, one_line_error, query, run, start

pytestmark = [pytest.mark.chaos, pytest.mark.slow]


def test_node_killed_three_times_is_failed_and_its_time_counted(campaign_dir):
    from tests.arbor.helpers import write_campaign

    slow = (campaign_dir / "problems" / "gelu_gate.py").read_text().replace(
        "    def forward(self, x, gate):\n", "    def forward(self, x, gate):\n        import time; time.sleep(60)\n")
    (campaign_dir / "problems" / "slow_gate.py").write_text(slow)
    spec = write_campaign(campaign_dir, "poison", max_evaluations=2, problem="problems/slow_gate.py")
    url = f"sqlite:///{campaign_dir / 'arbor.db'}"
    spent = 0.0
    for _ in range(3):
        proc = start("run", str(spec), "--quiet")
        try:
            deadline = time.time() + 120
            while time.time() < deadline:
                try:
                    if query(url, f"select count(*) from leases where pid = {proc.pid}")[0][0]:
                        break  # this run's measurement, not the node the last kill left running
                except Exception:  # noqa: BLE001  no schema yet
                    pass
                time.sleep(0.1)
            t0 = time.time()
            time.sleep(8)  # inside the (endless) reference forward
        finally:
            finish(proc, signal.SIGKILL)
        spent += time.time() - t0
    elapsed = query(url, "select elapsed_s from campaigns")[0][0]
    assert elapsed >= spent - 3 * 5.5, (elapsed, spent)  # the heartbeat flushes every 5 s
    r = run("run", str(spec), "--quiet")
    one_line_error(r.stderr)
    assert query(url, "select state, diagnosis from nodes where id = 1") == [("failed", "crashed_runner")]
    assert query(url, "select count(*) from nodes where state in ('queued','running')") == [(0,)]
    assert query(url, "select count(*) from events where kind='requeued'") == [(2,)]
