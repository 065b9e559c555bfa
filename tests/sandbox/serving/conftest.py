import contextlib
import sys
from pathlib import Path

import pytest

from arbor.sandbox.serving.lifecycle import ServerConfig, start_servers

SCRIPTED = Path(__file__).with_name("scripted_server.py")


def scripted_argv(**opts) -> list[str]:
    argv = [sys.executable, str(SCRIPTED), "--port", "{port}"]
    for k, v in opts.items():
        flag = "--" + k.replace("_", "-")
        argv += [flag] if v is True else [flag, str(v)]
    return argv


@pytest.fixture
def scripted(tmp_path):
    """Start the scripted server with the given options; stopped when the test ends."""
    started = []

    @contextlib.contextmanager
    def start(**opts):
        cfg = ServerConfig(argv=scripted_argv(**opts), lease_dir=tmp_path / "leases", startup_timeout_s=20,
                           stop_grace_s=1, label="scripted")
        (server,) = start_servers([cfg], started)
        try:
            yield server
        finally:
            server.stop()

    yield start
    for s in started:
        s.stop()
