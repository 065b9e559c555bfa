import contextlib
import fcntl
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from tests.docker_engine import docker_engine, engine_possible  # noqa: F401  (session fixture)
from tests.pg_server import pg_server, pg_url  # noqa: F401  (PostgreSQL fixtures)

REPO = Path(__file__).resolve().parents[1]
TIMING_GROUP = "timing-alone"  # the xdist group of every test marked timing (_xdist_group)


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's, which turns -n auto into a worker count
def pytest_cmdline_main(config):
    """The whole suite runs on workers by default: where pytest-xdist is installed (the ``test``
    extra) and the command names neither paths nor ``-n`` (the README's ``python3 -m pytest -q``),
    the run is ``-n auto --dist loadgroup``: a test file whole on one worker, the slowest groups
    first (``_slow_groups_first``), a test marked ``timing`` alone (``_RunLock``). A command that
    names files runs serially (two workers' start-up costs more than most files take) unless it
    says ``-n``; ``-n 0`` or ``-p no:xdist`` runs the suite serially. Measured on 2 cores in
    docs/performance.md#test-suite."""
    if not config.pluginmanager.hasplugin("xdist") or os.environ.get("PYTEST_XDIST_WORKER"):
        return
    opt = config.option
    whole_suite = config.args_source == pytest.Config.ArgsSource.TESTPATHS
    if whole_suite and opt.numprocesses is None and not opt.usepdb and not opt.collectonly:
        opt.numprocesses = "auto"
    if opt.numprocesses is not None and opt.dist == "no":
        opt.dist = "loadgroup"
    if opt.dist == "loadgroup":
        opt.loadscopereorder = False  # the order of _slow_groups_first, not the number of tests in a group


_RUN_UID = pytest.StashKey[str]()  # the controller's: pytest-xdist's id of this run


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook: absent under -p no:xdist
def pytest_configure_node(node):
    """A worker parses the command line, not the options set above: tell it the mode, so that it
    names its items by group (``--dist loadgroup``) as the scheduler expects. Keep the run's id, for
    ``pytest_unconfigure``."""
    node.workerinput["arbor_dist"] = node.config.option.dist
    node.config.stash[_RUN_UID] = node.workerinput["testrunuid"]


def pytest_unconfigure(config):
    """The controller of a pytest-xdist run removes what its workers shared in the temporary folder:
    the run lock's files (``_RunLock``) and the one shared campaign (tests/arbor/dashboard/shared_campaign.py)."""
    uid = config.stash.get(_RUN_UID, None)
    if uid is None:
        return
    from tests.arbor.dashboard.shared_campaign import shared_root

    base = Path(tempfile.gettempdir()) / f"arbor-pytest-{uid}"
    for suffix in (".lock", ".turnstile"):
        Path(f"{base}{suffix}").unlink(missing_ok=True)
    shutil.rmtree(shared_root(uid), ignore_errors=True)


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook: absent under -p no:xdist
def pytest_xdist_auto_num_workers(config):
    """``-n auto``: a worker a core, at most four. More workers than cores only adds contention,
    and past four the session fixtures (a dockerd, a PostgreSQL, a Ray cluster, each started once
    per worker that needs one) cost more than they save."""
    return max(1, min(os.cpu_count() or 1, 4))


def _xdist_group(item) -> str:
    """The unit a worker takes whole: a test file, so a module-scoped fixture (a C++ extension
    built once for the file, a served model) is built once; every test that needs a private
    Docker engine, PostgreSQL server or Ray cluster goes to one worker, so each starts once, and so
    does every test of the session's one C++ extension (``cpp_build``: tests/agents/conftest.py).
    Every test marked ``timing`` goes to one group, run last (``_slow_groups_first``): its tests run
    back to back with the lock held across them (``_RunLock``), so the other worker is made to
    finish its current test once for them all, not once for each."""
    if item.get_closest_marker("docker") is not None:
        return "docker-engine"
    if item.get_closest_marker("ray") is not None:
        return "ray-cluster"
    if {"pg_server", "pg_url"} & set(getattr(item, "fixturenames", ())):
        return "postgres-server"
    if "cpp_build" in getattr(item, "fixturenames", ()):
        return "cpp-extension"
    if item.get_closest_marker("timing") is not None:
        return TIMING_GROUP
    return item.nodeid.split("::", 1)[0]


def _group_of(item) -> str:
    mark = item.get_closest_marker("xdist_group")
    if mark is None:
        return ""
    return mark.args[0] if mark.args else mark.kwargs.get("name", "default")


def _slow_groups_first(items: list) -> None:
    """Workers take groups in collection order: a group holding a ``slow`` test (a whole campaign,
    a C++ build, an install) goes first, so the run does not end on one worker still in a long
    file while the other waits; the ``timing`` tests go last, where the other worker is in short
    tests (the lock waits for its current one) or has none left. Stable, and the same in every
    worker (they must agree)."""
    slow = {_group_of(i) for i in items if i.get_closest_marker("slow") is not None}
    items.sort(key=lambda i: 2 if _group_of(i) == TIMING_GROUP else int(_group_of(i) not in slow))


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's, which reads the groups to name the items
def pytest_collection_modifyitems(config, items):
    """gpu/docker tests skip with a reason where the resource is missing; they run where it exists.
    Under pytest-xdist, every test gets its scheduling group (``--dist loadgroup``)."""
    if getattr(config, "workerinput", {}).get("arbor_dist") == "loadgroup":
        config.option.loadgroup = True  # read by pytest-xdist's hook, after this one
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(_xdist_group(item)))
    if os.environ.get("PYTEST_XDIST_WORKER"):
        _slow_groups_first(items)
    have_gpu = False
    try:
        import torch

        have_gpu = torch.cuda.is_available()
    except Exception:
        pass
    # docker tests start a private dockerd through the docker_engine fixture where one can run
    have_docker = engine_possible()
    for item in items:  # markers, not keywords: every test under tests/sandbox/gpu/ has the keyword "gpu"
        if item.get_closest_marker("gpu") is not None and not have_gpu:
            item.add_marker(pytest.mark.skip(reason="needs a CUDA GPU (torch.cuda.is_available() is False)"))
        if item.get_closest_marker("docker") is not None and not have_docker:
            item.add_marker(pytest.mark.skip(reason="needs a Docker engine (or root + dockerd to start one)"))


@pytest.fixture
def campaign_dir(tmp_path: Path) -> Path:
    """A scratch copy of campaigns/ so runs never write into the checkout."""
    dst = tmp_path / "campaigns"
    shutil.copytree(REPO / "campaigns", dst, ignore=shutil.ignore_patterns("arbor.db*", "arbor_runs", "__pycache__"))
    return dst


@pytest.fixture(autouse=True, scope="session")
def _private_compile_cache(tmp_path_factory):
    """Compiled candidates' artifacts (sandbox/kernel/compile_store.py) land in a folder of this test
    session, never in the user's cache: a second run of the suite starts cold like the first."""
    old = os.environ.get("ARBOR_COMPILE_CACHE")
    os.environ["ARBOR_COMPILE_CACHE"] = str(tmp_path_factory.mktemp("compile-cache"))
    yield
    if old is None:
        os.environ.pop("ARBOR_COMPILE_CACHE", None)
    else:
        os.environ["ARBOR_COMPILE_CACHE"] = old


class _RunLock:
    """A readers-writer lock on a file of this test run (pytest-xdist's run id names it), shared by
    every worker: every other test holds it shared, a ``timing`` test exclusively.

    The turnstile (a second lock taken briefly by readers, held by a waiting writer) keeps a stream
    of short tests on the other worker from starving the timing test. A worker holds at most one
    mode at a time: a module held exclusively for its whole run (its module-scoped fixtures
    measure too) makes its tests' own requests no-ops. A ``timing`` test whose next test on this
    worker is one too (``keep``: they run back to back, ``TIMING_GROUP``) leaves the lock held for
    it, which releases it in turn: the other worker finishes its current test once for the run of
    them, not once for each."""

    def __init__(self) -> None:
        self.mode: str | None = None
        self.kept = False  # held over by the last test for the next one, which now owns it
        self._files: tuple = ()

    @contextlib.contextmanager
    def hold(self, exclusive: bool, keep=lambda: False):
        uid = os.environ.get("PYTEST_XDIST_TESTRUNUID")
        if not uid:
            yield
            return
        if self.kept:
            self.kept = False  # held over for this test: ours to release (or hold over again)
        elif self.mode == "exclusive" or (self.mode == "shared" and not exclusive):
            yield
            return
        else:
            self._acquire(f"{Path(tempfile.gettempdir()) / f'arbor-pytest-{uid}'}", exclusive)
        try:
            yield
        finally:
            if self.mode == "exclusive" and keep():  # asked when released: the test's next test is known
                self.kept = True
            else:
                self._release()

    def _acquire(self, base: str, exclusive: bool) -> None:
        turnstile, lock = open(f"{base}.turnstile", "a+"), open(f"{base}.lock", "a+")
        self._files = (turnstile, lock)
        fcntl.flock(turnstile, fcntl.LOCK_EX)
        if exclusive:
            fcntl.flock(lock, fcntl.LOCK_EX)
            fcntl.flock(turnstile, fcntl.LOCK_UN)
        else:
            fcntl.flock(turnstile, fcntl.LOCK_UN)
            fcntl.flock(lock, fcntl.LOCK_SH)
        self.mode = "exclusive" if exclusive else "shared"

    def _release(self) -> None:
        self.mode = None
        turnstile, lock = self._files
        self._files = ()
        fcntl.flock(lock, fcntl.LOCK_UN)
        lock.close()
        turnstile.close()


_RUN_LOCK = _RunLock()


@pytest.fixture(autouse=True, scope="module")
def _timing_module_alone(request):
    """A module marked ``timing`` as a whole (``pytestmark``) runs alone from its first fixture to
    its last teardown: a module-scoped fixture that measures (the reward-hack corpus's verdicts,
    a campaign the tests then read) is set up before any test's own lock is taken. Autouse
    fixtures come first within their scope, so this lock is held before the module's others."""
    alone = request.node.get_closest_marker("timing") is not None
    with _RUN_LOCK.hold(exclusive=True, keep=_next_is_timing) if alone else contextlib.nullcontext():
        yield


@pytest.fixture(autouse=True)
def _timing_alone(request):
    """A test marked ``timing`` asserts on how fast something ran (a noise floor, a measured
    ratio, a budget that must hold): under pytest-xdist it runs with no other test beside it
    (``_RunLock``); every other test runs beside at most one other."""
    with _RUN_LOCK.hold(exclusive=request.node.get_closest_marker("timing") is not None, keep=_next_is_timing):
        yield


_NEXT_TIMING = [False]  # whether the test after the one running now, on this worker, is marked timing


def _next_is_timing() -> bool:
    return _NEXT_TIMING[0]


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    """Tell ``_RunLock`` whether to hold the lock over for ``nextitem``: its fixtures' teardowns
    run inside this item's protocol (pytest-xdist names a worker's next test before it runs one)."""
    _NEXT_TIMING[0] = nextitem is not None and nextitem.get_closest_marker("timing") is not None
