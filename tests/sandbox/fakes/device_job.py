"""A stand-in for the probe's CUDA job: a tiny script that "fails to start the device" exactly
when it finds itself under given isolation layers, so the real probe machinery (the local
runner's child set-up, one plan at a time) runs real jobs on a machine without a GPU.

Each layer is detected by what it does to the job, never by asking Arbor:

* ``netns`` — its network namespace inode differs from the host's (passed in);
* ``seccomp_net`` — ``socket(AF_INET)`` itself is refused (EPERM);
* ``landlock_tcp`` — a TCP connect to a listener of the test is refused with EACCES;
* ``landlock_fs`` — a file of the test outside the workdir cannot be read;
* ``scope_signal`` — signal 0 to its parent (Arbor) is refused;
* ``scope_abstract_unix`` — connecting to an abstract unix socket the test listens on is refused
  with EPERM (only visible without a private network namespace: with one, the host's abstract
  socket is simply absent).

On failure it prints a driver-like error line, as ``cudaGetDeviceCount`` does.
"""

from __future__ import annotations

import os
import socket
import tempfile
from dataclasses import dataclass, field

from arbor.sandbox.gpu.probe import DEVICE_JOB

_TEMPLATE = '''
import errno, os, socket, sys
found = []
if os.stat("/proc/self/ns/net").st_ino != {netns}:
    found.append("netns")
try:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
except PermissionError:
    found.append("seccomp_net")
else:
    s.settimeout(2)
    try:
        s.connect(("127.0.0.1", {port}))
    except PermissionError:
        found.append("landlock_tcp")
    except OSError:
        pass
    s.close()
try:
    open({secret!r}).read()
except PermissionError:
    found.append("landlock_fs")
try:
    os.kill(os.getppid(), 0)
except PermissionError:
    found.append("scope_signal")
u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    u.connect({abstract!r})
except PermissionError:
    found.append("scope_abstract_unix")
except OSError:
    pass
u.close()
print("layers:", ",".join(found))
bad = sorted(set(found) & set({fail_under!r}))
if bad:
    print("RuntimeError: Unexpected error from cudaGetDeviceCount(). Error 304: OS call failed "
          "(fake driver, under " + "+".join(bad) + ")", file=sys.stderr)
    sys.exit(1)
print({ok!r}, 1, 2.0)
'''


@dataclass
class FakeDeviceHost:
    """The host-side bait the fake job looks for; ``close()`` when done."""

    secret: str
    port: int
    abstract: str
    _socks: list = field(default_factory=list)

    def job(self, fail_under: set[str] | tuple[str, ...] = ()) -> str:
        """The fake device job's source: fails when any layer of ``fail_under`` is detected."""
        return _TEMPLATE.format(netns=os.stat("/proc/self/ns/net").st_ino, port=self.port, secret=self.secret,
                                abstract=self.abstract, fail_under=sorted(fail_under), ok="ARBOR_DEVICE_OK")

    def close(self) -> None:
        for s in self._socks:
            s.close()
        try:
            os.unlink(self.secret)
        except OSError:
            pass


def fake_device_host() -> FakeDeviceHost:
    fd, secret = tempfile.mkstemp(prefix="arbor-fake-device-", dir="/tmp")  # outside any workdir
    os.write(fd, b"x")
    os.close(fd)
    tcp = socket.socket()
    tcp.bind(("127.0.0.1", 0))
    tcp.listen(16)
    name = f"\0arbor-fake-uvm-{os.getpid()}-{id(tcp)}"
    unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    unix.bind(name)
    unix.listen(16)
    return FakeDeviceHost(secret, tcp.getsockname()[1], name, [tcp, unix])


assert "ARBOR_DEVICE_OK" in DEVICE_JOB  # the mark the probe looks for
