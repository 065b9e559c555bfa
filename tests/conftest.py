import os
import shutil
from pathlib import Path

import pytest

from tests.docker_engine import docker_engine, engine_possible  # noqa: F401  (session fixture)
from tests.pg_server import pg_server, pg_url  # noqa: F401  (PostgreSQL fixtures)

REPO = Path(__file__).resolve().parents[1]


def pytest_collection_modifyitems(config, items):
    """gpu/docker tests skip with a reason where the resource is missing; they run where it exists."""
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
    """Compiled candidates' artifacts (sandbox/compile_cache.py) land in a folder of this test
    session, never in the user's cache: a second run of the suite starts cold like the first."""
    old = os.environ.get("ARBOR_COMPILE_CACHE")
    os.environ["ARBOR_COMPILE_CACHE"] = str(tmp_path_factory.mktemp("compile-cache"))
    yield
    if old is None:
        os.environ.pop("ARBOR_COMPILE_CACHE", None)
    else:
        os.environ["ARBOR_COMPILE_CACHE"] = old
