import fcntl
import os
import shutil
from pathlib import Path

import pytest

from tests.docker_engine import docker_engine, engine_possible  # noqa: F401  (session fixture)
from tests.pg_server import pg_server, pg_url  # noqa: F401  (PostgreSQL fixtures)

REPO = Path(__file__).resolve().parents[1]


def pytest_xdist_auto_num_workers(config):
    """`-n auto --dist loadgroup` (opt-in: pyproject's addopts run serially): a worker a core, at most four. The suite was
    measured on 2 cores (docs/performance.md#test-suite); more workers than cores only adds
    contention, and past four the session fixtures (a dockerd, a PostgreSQL, a Ray cluster, each
    started once per worker that needs one) cost more than they save."""
    return max(1, min(os.cpu_count() or 1, 4))


def _xdist_group(item) -> str:
    """The unit a worker takes whole: a test file, so a module-scoped fixture (a C++ extension
    built once for the file, a served model) is built once; every test that needs a private
    Docker engine, PostgreSQL server or Ray cluster goes to one worker, so each starts once."""
    if item.get_closest_marker("docker") is not None:
        return "docker-engine"
    if item.get_closest_marker("ray") is not None:
        return "ray-cluster"
    if {"pg_server", "pg_url"} & set(getattr(item, "fixturenames", ())):
        return "postgres-server"
    return item.nodeid.split("::", 1)[0]


def pytest_collection_modifyitems(config, items):
    """gpu/docker tests skip with a reason where the resource is missing; they run where it exists.
    Under pytest-xdist, every test gets its scheduling group (``--dist loadgroup``)."""
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(_xdist_group(item)))
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


@pytest.fixture(autouse=True)
def _timing_alone(request):
    """A test marked ``timing`` asserts on how fast something ran (a noise floor, a measured
    ratio, a budget that must hold): under pytest-xdist it runs with no other test beside it.

    A readers-writer lock on a file of this test run: every other test holds it shared, a timing
    test exclusively. The turnstile (a second lock taken briefly by readers, held by a waiting
    writer) keeps a stream of short tests on the other worker from starving the timing test."""
    uid = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if not uid:
        yield
        return
    base = Path("/tmp") / f"arbor-pytest-{uid}"
    exclusive = request.node.get_closest_marker("timing") is not None
    with open(f"{base}.turnstile", "a+") as turnstile, open(f"{base}.lock", "a+") as lock:
        fcntl.flock(turnstile, fcntl.LOCK_EX)
        if exclusive:
            fcntl.flock(lock, fcntl.LOCK_EX)
            fcntl.flock(turnstile, fcntl.LOCK_UN)
        else:
            fcntl.flock(turnstile, fcntl.LOCK_UN)
            fcntl.flock(lock, fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
