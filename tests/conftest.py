import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def pytest_collection_modifyitems(config, items):
    """gpu/docker tests skip with a reason where the resource is missing; they run where it exists."""
    have_gpu = False
    try:
        import torch

        have_gpu = torch.cuda.is_available()
    except Exception:
        pass
    have_docker = bool(os.environ.get("DOCKER_HOST")) or Path("/var/run/docker.sock").exists()
    for item in items:
        if "gpu" in item.keywords and not have_gpu:
            item.add_marker(pytest.mark.skip(reason="needs a CUDA GPU (torch.cuda.is_available() is False)"))
        if "docker" in item.keywords and not have_docker:
            item.add_marker(pytest.mark.skip(reason="needs a running Docker engine"))


@pytest.fixture
def campaign_dir(tmp_path: Path) -> Path:
    """A scratch copy of campaigns/ so runs never write into the checkout."""
    dst = tmp_path / "campaigns"
    shutil.copytree(REPO / "campaigns", dst, ignore=shutil.ignore_patterns("arbor.db*", "arbor_runs", "__pycache__"))
    return dst
