"""Isolation as layers: the plan the settings ask for, the seccomp network filter, and the
replacement plans the device probe may choose — each still refusing what it promises, for real."""

from __future__ import annotations

import ctypes
import errno
import os
import signal
import socket
import sys
import textwrap

import pytest

from arbor.sandbox.runners import isolation, seccomp
from arbor.sandbox.runners.isolation import FS_ISOLATE, FS_WRITES, IsolationPlan, KernelSupport, plan_for, plan_notices
from arbor.sandbox.runners.local import LocalRunner
from arbor.sandbox.runner import Job

PY = sys.executable
ROOT = KernelSupport(landlock_abi=7, netns=True, seccomp=True, private_ns=True)
USER = KernelSupport(landlock_abi=7, netns=False, seccomp=True, private_ns=True)  # user namespaces allowed

needs_abi6 = pytest.mark.skipif(isolation.landlock_abi() < 6, reason="needs Landlock ABI >= 6 (Linux >= 6.12)")
needs_seccomp = pytest.mark.skipif(not isolation.seccomp_available(), reason="no seccomp filters here")


# ----------------------------------------------------------------------------- the plan
def test_plan_follows_the_settings_and_the_kernel():
    full = plan_for("none", "isolate", ROOT)
    assert full.layers == ("netns", "landlock_fs", "landlock_tcp", "scope_signal", "scope_abstract_unix",
                           "private_ns")
    assert full.landlock_fs == FS_ISOLATE
    # without root the seccomp filter is the network layer
    assert plan_for("none", "isolate", USER).layers[0] == "seccomp_net"
    # network: host takes every network layer away, TCP rules included
    assert plan_for("host", "isolate", ROOT).layers == ("landlock_fs", "scope_signal", "scope_abstract_unix",
                                                        "private_ns")
    assert plan_for("none", "host", ROOT).landlock_fs == FS_WRITES  # writes stay in the workdir
    assert plan_for("host", "host", ROOT) == IsolationPlan()
    assert plan_for("none", "isolate", KernelSupport(3, False, False)).layers == ("landlock_fs",)


def test_plan_values_compose():
    full = plan_for("none", "isolate", ROOT)
    assert full.without("scope_abstract_unix").layers == full.layers[:-2] + ("private_ns",)
    assert full.only("landlock_fs") == IsolationPlan(landlock_fs=FS_ISOLATE)
    assert IsolationPlan.from_dict(full.to_dict()) == full
    assert "abstract-unix scope" in full.describe() and "private network namespace" in full.describe()
    assert "abstract-unix" not in full.without("scope_abstract_unix").describe()
    assert "private /proc" in full.describe() and "private /proc" not in full.without("private_ns").describe()


def test_notices_say_what_the_kernel_lacks():
    assert plan_notices("none", "isolate", ROOT) == []
    (net,) = plan_notices("none", "isolate", USER)
    assert "seccomp filter" in net and "Landlock scope" in net
    net, forks, signals = plan_notices("none", "isolate", KernelSupport(4, False, False))
    assert "UDP still open" in net and "cannot start CUDA" in forks and "ABI 4 < 6" in signals
    text = " ".join(plan_notices("none", "isolate", KernelSupport(0, False, False)))
    assert "Landlock unavailable" in text and "reach the network" in text


# ----------------------------------------------------------------------------- the BPF program
def _run_bpf(prog, nr: int, arch: int, arg0: int = 0) -> int:
    """A classic-BPF interpreter for the four instructions the filter uses, over seccomp_data."""
    data = {0: nr & 0xFFFFFFFF, 4: arch, 16: arg0 & 0xFFFFFFFF}
    acc, pc = 0, 0
    while True:
        code, jt, jf, k = prog[pc]
        if code == 0x20:
            acc = data[k]
        elif code == 0x15:
            pc += jt if acc == k else jf
        elif code == 0x35:
            pc += jt if acc >= k else jf
        elif code == 0x06:
            return k
        else:
            raise AssertionError(f"unexpected BPF code {code:#x}")
        pc += 1


ALLOW, EPERM, KILL = 0x7FFF0000, 0x00050001, 0x80000000


@pytest.mark.parametrize("machine", sorted(seccomp.ARCHES))
def test_filter_decides_by_family_syscall_and_arch(machine):
    arch = seccomp.ARCHES[machine]
    prog = seccomp.NetworkFilter(machine).instructions
    for family in (socket.AF_INET, socket.AF_INET6, 17):  # 17: AF_PACKET
        assert _run_bpf(prog, arch.socket, arch.audit_arch, family) == EPERM
    assert _run_bpf(prog, arch.socket, arch.audit_arch, socket.AF_UNIX) == ALLOW
    assert _run_bpf(prog, arch.socket, arch.audit_arch, socket.AF_NETLINK) == ALLOW
    assert _run_bpf(prog, arch.io_uring_setup, arch.audit_arch) == EPERM
    assert _run_bpf(prog, 0, arch.audit_arch) == ALLOW  # read / io_setup: untouched
    assert _run_bpf(prog, arch.socket, 0x40000003, socket.AF_INET) == KILL  # i386 int 0x80: another table
    if arch.x32:
        assert _run_bpf(prog, arch.socket | 0x40000000, arch.audit_arch, socket.AF_UNIX) == EPERM


# ----------------------------------------------------------------------------- real layers
@pytest.fixture
def bait(tmp_path):
    """A TCP listener, a UDP receiver and a secret file outside any workdir, all on this host."""
    tcp = socket.socket()
    tcp.bind(("127.0.0.1", 0))
    tcp.listen(4)
    tcp.settimeout(0.3)
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    udp.settimeout(0.3)
    abstract = f"\0arbor-test-{os.getpid()}-{id(tcp)}"
    unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    unix.bind(abstract)
    unix.listen(4)
    secret = tmp_path / "secret.txt"
    secret.write_text("TOPSECRET")
    yield {"tcp": tcp, "udp": udp, "tcp_port": tcp.getsockname()[1], "udp_port": udp.getsockname()[1],
           "abstract": abstract, "secret": str(secret)}
    for s in (tcp, udp, unix):
        s.close()


_CANDIDATE = textwrap.dedent("""
    import os, socket
    def attempt(name, fn):
        try:
            fn()
            print(name, "ok")
        except OSError as e:
            print(name, type(e).__name__)
    attempt("tcp", lambda: socket.create_connection(("127.0.0.1", {tcp_port}), timeout=2))
    attempt("udp", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", ("127.0.0.1", {udp_port})))
    attempt("read", lambda: open({secret!r}).read())
    attempt("signal", lambda: os.kill(os.getppid(), 0))
    attempt("abstract", lambda: socket.socket(socket.AF_UNIX).connect({abstract!r}))
""")


def _candidate(runner: LocalRunner, bait: dict, plan: IsolationPlan | None = None) -> dict[str, str]:
    code = _CANDIDATE.format(**{k: v for k, v in bait.items() if k not in ("tcp", "udp")})
    job = Job([PY, "-c", code], {}, timeout_s=30)
    res = runner.run(job) if plan is None else runner.run_under(plan, job)
    assert res.returncode == 0, res.stderr_tail
    out = dict(line.split(" ", 1) for line in res.stdout_tail.splitlines())
    with pytest.raises(socket.timeout):
        bait["tcp"].accept()
    return out


def no_datagram(bait: dict) -> None:
    with pytest.raises(socket.timeout):
        bait["udp"].recvfrom(16)


@needs_seccomp
@needs_abi6
def test_replacement_for_a_broken_netns_still_refuses_tcp_and_udp(bait):
    """The device probe's replacement when the private network namespace breaks the device:
    the seccomp network filter plus Landlock TCP rules — ``network: none`` holds without netns."""
    with LocalRunner() as r:
        plan = r.full_plan.without("netns").with_layer("seccomp_net")
        assert not plan.netns and plan.seccomp_net and plan.landlock_tcp
        r.adopt_plan(plan, "netns replaced")
        out = _candidate(r, bait)  # through run(): the adopted plan is what jobs get
    no_datagram(bait)
    assert out["tcp"] == "PermissionError" and out["udp"] == "PermissionError"
    assert out["read"] == "PermissionError" and out["signal"] == "PermissionError"


@needs_abi6
def test_landlock_without_the_abstract_scope_keeps_its_other_protections(bait):
    with LocalRunner(network="host") as r:  # no netns: the host's abstract socket is in reach
        scoped = _candidate(r, bait, r.full_plan.with_layer("landlock_tcp"))
        unscoped = _candidate(r, bait, r.full_plan.with_layer("landlock_tcp").without("scope_abstract_unix"))
    assert scoped["abstract"] == "PermissionError"  # the scope is what refuses it...
    assert unscoped["abstract"] == "ok"  # ...and it is really off
    for out in (scoped, unscoped):
        assert out["read"] == "PermissionError", out  # filesystem rules kept
        assert out["signal"] == "PermissionError", out  # signal scope kept
        assert out["tcp"] == "PermissionError", out  # TCP rules kept


@needs_abi6
def test_netns_confines_abstract_sockets_without_the_scope(bait):
    """Why dropping the abstract-unix scope under a private network namespace loses nothing: the
    host's abstract sockets are not in the candidate's namespace at all."""
    if not isolation.netns_available():
        pytest.skip("needs root for a network namespace")
    with LocalRunner() as r:
        out = _candidate(r, bait, r.full_plan.without("scope_abstract_unix"))
    no_datagram(bait)
    assert out["abstract"] == "ConnectionRefusedError" and out["tcp"] != "ok" and out["udp"] != "ok"


@needs_seccomp
def test_filter_refuses_io_uring_which_could_make_sockets():
    code = ("import ctypes, os; libc = ctypes.CDLL(None, use_errno=True); p = ctypes.create_string_buffer(120);"
            "r = libc.syscall(425, 4, p); print(r, ctypes.get_errno())")
    with LocalRunner(network="host", filesystem="host") as r:
        res = r.run_under(IsolationPlan(seccomp_net=True), Job([PY, "-c", code], {}, timeout_s=30))
    assert res.stdout_tail.split() == ["-1", str(errno.EPERM)], res.stdout_tail + res.stderr_tail


@needs_seccomp
def test_child_side_applies_after_a_plain_fork():
    """The fork-server path: a running Python process forks and the child takes its isolation
    then (no exec), from a plan prepared in the parent."""
    child = isolation.prepare(IsolationPlan(seccomp_net=True), "/tmp")
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        os.close(r)
        try:
            child.apply()
            try:
                socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                os.write(w, b"open")
            except PermissionError:
                os.write(w, b"refused")
        finally:
            os._exit(0)
    os.close(w)
    try:
        got = os.read(r, 16)
    finally:
        os.close(r)
        os.waitpid(pid, 0)
        child.close()
    assert got == b"refused"
    socket.socket(socket.AF_INET, socket.SOCK_DGRAM).close()  # the parent is untouched


def test_a_layer_that_cannot_be_applied_fails_the_job_instead_of_running_without_it(monkeypatch):
    """Never less than the plan says: a child whose netns unshare fails does not run."""
    with LocalRunner(network="host", filesystem="host") as r:
        monkeypatch.setattr(isolation, "libc", lambda: _FailingUnshare())
        with pytest.raises(Exception):  # noqa: B017 - Popen reports the preexec failure
            r.run_under(IsolationPlan(netns=True), Job([PY, "-c", "print('ran')"], {}, timeout_s=30))


class _FailingUnshare:
    def __getattr__(self, name):
        real = getattr(ctypes.CDLL(None, use_errno=True), name)
        return (lambda *a: -1) if name == "unshare" else real


def test_signal_scope_alone_protects_the_parent():
    if isolation.landlock_abi() < 6:
        pytest.skip("needs Landlock ABI >= 6")
    with LocalRunner(network="host", filesystem="host") as r:
        res = r.run_under(IsolationPlan(scope_signal=True),
                          Job([PY, "-c", f"import os; os.kill(os.getppid(), {int(signal.SIGKILL)})"], {}, timeout_s=30))
    assert res.returncode == 1 and "PermissionError" in res.stderr_tail  # and we are alive


@needs_seccomp
def test_without_a_network_namespace_the_default_plan_still_refuses_udp(bait, monkeypatch):
    """A non-root user gets no namespace; ``network: none`` then means the seccomp filter (UDP
    refused too, not just TCP as Landlock alone would), and the notice says how."""
    monkeypatch.setattr(isolation, "netns_available", lambda: False)
    with LocalRunner() as r:
        assert r.plan.seccomp_net and not r.plan.netns
        assert any("seccomp filter" in n for n in r.notices)
        out = _candidate(r, bait)
    no_datagram(bait)
    assert out["tcp"] == "PermissionError" and out["udp"] == "PermissionError"


@pytest.mark.skipif(isolation.landlock_abi() < 3, reason="needs Landlock ABI >= 3 (truncation is a right)")
@pytest.mark.parametrize("fs", [FS_ISOLATE, FS_WRITES])
def test_a_job_may_write_its_own_proc_entries_and_no_other_process(fs, tmp_path):
    """NVIDIA's driver opens a file of its own /proc/<pid> for writing during cuInit (CUDA error
    304 without it, found on an H100 host); the rule that allows it is the child's own entry only:
    its parent's stay read-only, and so does the rest of /proc."""
    code = textwrap.dedent("""
        import errno, os
        def attempt(path):
            try:
                old = open(path).read()
                with open(path, "w") as f:  # O_WRONLY|O_CREAT|O_TRUNC, as the driver opens it
                    f.write(old)
                return "ok"
            except OSError as e:
                return errno.errorcode[e.errno]
        def create(path):  # through the grant's magic links: the file's real place decides
            try:
                open(path, "w").close()
                return "ok"
            except OSError as e:
                return errno.errorcode[e.errno]
        print(attempt("/proc/self/comm"), attempt(f"/proc/self/task/{os.getpid()}/comm"),
              attempt(f"/proc/{os.getppid()}/comm"), attempt("/proc/sys/kernel/hostname"),
              create("/proc/self/root" + OUTSIDE), create("/proc/self/cwd/../" + os.path.basename(OUTSIDE)))
    """)
    outside = tmp_path / "escaped.txt"
    with LocalRunner(network="host", filesystem="host") as r:
        res = r.run_under(IsolationPlan(landlock_fs=fs), Job([PY, "-c", f"OUTSIDE = {str(outside)!r}\n" + code], {},
                                                           timeout_s=30))
    own, own_task, parent, sysctl, via_root, via_cwd = res.stdout_tail.split()
    assert (own, own_task) == ("ok", "ok"), res.stdout_tail + res.stderr_tail
    assert parent == "EACCES" and sysctl in ("EACCES", "EPERM"), res.stdout_tail
    assert (via_root, via_cwd) == ("EACCES", "EACCES") and not outside.exists(), res.stdout_tail


def test_read_paths_cover_every_site_directory_on_sys_path_but_never_the_checkout(tmp_path, monkeypatch):
    """A user's `pip install --user` packages, or a site directory a .pth line layered in, must be
    readable in the sandbox (a candidate importing torch from there failed with PermissionError);
    a plain folder on sys.path (the checkout, the cwd) must not be."""
    layered = tmp_path / "outer" / "lib" / "python3" / "site-packages"
    layered.mkdir(parents=True)
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    monkeypatch.setattr(sys, "path", [str(checkout), *sys.path, str(layered)])
    paths = isolation.default_read_paths()
    assert str(layered) in paths and str(checkout) not in paths
