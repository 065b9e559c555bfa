"""A real terminal: ``arbor dashboard`` attached (before it even starts) to a live ``arbor run``.

Driven through tmux on a private server socket, so nothing here touches a user's tmux.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.arbor.dashboard.shared_campaign import copy_campaigns, write_quick_campaign

# timing: each step waits for a screen within a deadline; beside another worker's C++ build under
# load the campaign it follows missed them (2026-12-02), alone it passes in under a minute
pytestmark = [pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (apt-get install -y tmux)"),
              pytest.mark.timing]


class Tmux:
    def __init__(self, cwd: Path):
        self.sock = f"arbor-test-{os.getpid()}"
        self.cwd = cwd
        # COLUMNS and LINES go too: rich sizes the dashboard by them before it asks the terminal,
        # and a pytest-xdist worker's environment holds COLUMNS=80 LINES=24 (a serial run's does
        # not), so under workers the dashboard drew 80x24 in a 150x45 pane and never reflowed
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith(("PYTEST", "TMUX")) and k not in ("COLUMNS", "LINES")}

    def __call__(self, *args: str) -> str:
        r = subprocess.run(["tmux", "-L", self.sock, "-f", "/dev/null", *args], cwd=self.cwd, env=self.env,
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r.stderr
        return r.stdout

    def screen(self, target: str) -> str:
        return self("capture-pane", "-p", "-t", target)

    def wait_for(self, target: str, check, timeout: float = 90.0) -> str:
        deadline = time.monotonic() + timeout
        text = ""
        while time.monotonic() < deadline:
            text = self.screen(target)
            if check(text):
                return text
            time.sleep(0.2)
        raise AssertionError(f"timed out waiting on {target}; last screen:\n{text}")

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.sock, "kill-server"], capture_output=True, timeout=30)


def _cmd(*args: str) -> str:
    return " ".join(shlex.quote(a) for a in (sys.executable, "-m", "arbor", *args))


def test_dashboard_follows_a_live_run_and_reflows_on_resize(tmp_path):
    campaigns = copy_campaigns(tmp_path)
    yaml = write_quick_campaign(campaigns, "live", evals=1)
    tmux = Tmux(tmp_path)
    try:
        tmux("new-session", "-d", "-s", "t", "-x", "150", "-y", "45",
             _cmd("dashboard", str(yaml), "--interval", "0.3") + "; echo DASH_EXIT=$?; sleep 60")
        tmux.wait_for("t:0", lambda s: "Waiting for the campaign to start" in s)
        assert not (campaigns / "arbor.db").exists()  # watching did not create the store

        tmux("new-window", "-d", "-t", "t", "-n", "run", _cmd("run", str(yaml)) + "; echo RUN_EXIT=$?; sleep 60")
        first = tmux.wait_for("t:0", lambda s: "progress vs budget" in s and "live" in s.splitlines()[0])
        final = tmux.wait_for("t:0", lambda s: "finished" in s.splitlines()[0] and "run_finished" in s)
        assert first != final  # the screen followed the run
        assert "stopped" in final and "[1] baseline" in final and "latest verdicts" in final, final
        tmux.wait_for("t:run", lambda s: "RUN_EXIT=0" in s)

        tmux("resize-window", "-t", "t:0", "-x", "90", "-y", "70")
        narrow = tmux.wait_for("t:0", lambda s: max(len(line) for line in s.splitlines()) <= 90
                               and "environment" in s and "progress vs budget" in s)
        stacked = [line for line in narrow.splitlines() if "progress vs budget" in line]
        assert stacked and "environment" not in stacked[0]  # one column below 110 columns

        tmux("send-keys", "-t", "t:0", "C-c")
        tmux.wait_for("t:0", lambda s: "DASH_EXIT=0" in s)
    finally:
        tmux.close()


PAGE_TITLES = {"1": "environment", "2": "best speedup over time", "3": "tree",
               "4": "reasons in full", "5": "agent activity"}


def test_every_panel_reachable_at_80x24_and_all_at_once_at_200x50(shared, tmp_path):
    """At 80x24 the progress stays on top and keys 1-5 bring each other panel up; a verdict's
    reason is shown whole. At 200x50 every panel is on one screen."""
    store = open_store_ro(shared.db)
    reasons = [v.reason for v in store.recent_verdicts(store.get_campaign("dash").id, limit=3)]
    store.close()
    tmux = Tmux(tmp_path)
    try:
        tmux("new-session", "-d", "-s", "s", "-x", "80", "-y", "24",
             _cmd("dashboard", str(shared.yaml), "--interval", "0.3") + "; echo DASH_EXIT=$?; sleep 60")
        tmux.wait_for("s:0", lambda s: "progress vs budget" in s and "[1]" in s)
        for key, title in PAGE_TITLES.items():
            tmux("send-keys", "-t", "s:0", key)
            screen = tmux.wait_for("s:0", lambda s, t=title: t in s, timeout=20)
            assert max(len(line) for line in screen.splitlines()) <= 80 and len(screen.splitlines()) <= 24
            assert "progress vs budget" in screen
            if key == "4":  # the newest reason, every word of it, across wrapped lines
                flat = " ".join(" ".join(line.strip("│ ").split()) for line in screen.splitlines())
                assert " ".join(reasons[0].split()) in flat, (reasons[0], screen)
        tmux("resize-window", "-t", "s:0", "-x", "200", "-y", "50")
        wide = tmux.wait_for("s:0", lambda s: all(t in s for t in ("progress vs budget", "environment", "tree",
                                                                   "latest verdicts", "agent activity",
                                                                   "best speedup over time")))
        assert max(len(line) for line in wide.splitlines()) <= 200
        tmux("send-keys", "-t", "s:0", "C-c")
        tmux.wait_for("s:0", lambda s: "DASH_EXIT=0" in s)
    finally:
        tmux.close()


def open_store_ro(db: Path):
    from arbor.search_tree import open_store

    return open_store(f"sqlite:///{db}", read_only=True)
