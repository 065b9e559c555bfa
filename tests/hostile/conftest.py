import os
import socket

import pytest

SECRET = "hostile-secret-3f9a"


@pytest.fixture(scope="package")
def bait(tmp_path_factory):
    """A secret file outside any workdir, a secret in the parent's environment, and a loopback
    listener: a contained candidate reads none of them and connects to nothing."""
    d = tmp_path_factory.mktemp("bait")
    path = d / "secret.txt"
    path.write_text(SECRET)
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    srv.setblocking(False)
    old = os.environ.get("ARBOR_HOSTILE_SECRET")
    os.environ["ARBOR_HOSTILE_SECRET"] = SECRET
    try:
        yield {"path": str(path), "port": srv.getsockname()[1], "server": srv}
    finally:
        srv.close()
        if old is None:
            os.environ.pop("ARBOR_HOSTILE_SECRET", None)
        else:
            os.environ["ARBOR_HOSTILE_SECRET"] = old


