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


def llamacpp_argv(*extra: str) -> list[str]:
    """llama-server serving SmolLM2 on Arbor's port; skips the test with the reason when the
    install step (scripts/setup.sh test) could not build it here."""
    from arbor.sandbox.serving.llamacpp_install import missing_reason, model_path, server_binary

    why = missing_reason()
    if why is not None:
        pytest.skip(why)
    return [str(server_binary()), "-m", str(model_path()), "-a", "smollm2", "--host", "{host}", "--port", "{port}",
            "--metrics", "--no-webui", *extra]


@pytest.fixture(scope="session")
def llamacpp(tmp_path_factory):
    """One llama-server for the whole session (loading the model costs a second or two, and the
    suite must stay short); stopped by its pid and lease token at the end. One thread: two
    synchronise at every op, and on a machine loaded past its cores each sync waits for a time
    slice (a 48-token reply missed its 60 s at a load average of 16 with two)."""
    argv = llamacpp_argv("-np", "2", "-c", "4096", "-t", "1", "-tb", "1")
    cfg = ServerConfig(argv=argv, lease_dir=tmp_path_factory.mktemp("llamacpp-leases"), startup_timeout_s=60,
                       stop_grace_s=2, label="llamacpp", memory_bytes=4 << 30)
    started: list = []
    try:
        (server,) = start_servers([cfg], started)
        yield server
    finally:
        for s in started:
            s.stop()
