"""``pid_alive``: the one "is this process running" check the store, the runners and the server
leases all rely on."""

import os
import subprocess
import sys
import time

from arbor.sandbox.runners.proctree import pid_alive


def test_running_process_is_alive():
    assert pid_alive(os.getpid())


def test_reaped_and_impossible_pids_are_gone():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    assert not pid_alive(proc.pid)
    assert not pid_alive(2**40)  # no process can have that id (kill() would overflow)


def test_zombie_counts_as_gone():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        deadline = time.monotonic() + 10
        while pid_alive(proc.pid) and time.monotonic() < deadline:  # exited, not yet reaped
            time.sleep(0.01)
        assert not pid_alive(proc.pid)
        assert proc.poll() == 0  # it was a zombie until now
    finally:
        proc.wait()
