"""Which packages and data files the wheel holds, found on disk rather than listed by hand.

Why a setup.py: the design keeps ``agents/``, ``sandbox/``, ``search_tree/``, ``skills/`` and
``campaigns/`` at the top of the repository but installs them as ``arbor.*`` (pyproject.toml's
``package-dir`` maps the roots). setuptools' ``find`` config discovers packages under one folder
but cannot rename each root, so a hand list grew in pyproject.toml and silently missed new
subpackages (``arbor/redteam``, ``agents/transforms/cpp`` and ``triton``: an installed ``arbor
run`` died on an ImportError). Here every package under each root is discovered, and every other
file in a package's folder tree ships as its package data (skills, campaign YAML and problems, the
tiny LM server, migrations' templates, Dockerfiles), so neither a new subpackage nor a new data
folder can be forgotten. tests/test_install.py checks the built wheel against the source tree.
Everything else (metadata, dependencies) is in pyproject.toml.
"""
from __future__ import annotations

import os

from setuptools import find_packages, setup

HERE = os.path.dirname(os.path.abspath(__file__))
# what a run leaves beside a campaign file (its store, its runs folder) is never package data
_SKIP_DIRS = {"__pycache__", "arbor_runs", "build", "dist"}
_SKIP_SUFFIXES = (".pyc", ".pyo", ".db", ".db-wal", ".db-shm", ".sqlite", ".sqlite-wal", ".sqlite-shm")


def roots() -> dict[str, str]:
    """pyproject's ``package-dir``: each installed top package -> its folder (the design's layout,
    read by tests/test_architecture.py too)."""
    path = os.path.join(HERE, "pyproject.toml")
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        from setuptools.config.pyprojecttoml import read_configuration

        return dict(read_configuration(path, expand=False)["tool"]["setuptools"]["package-dir"])
    with open(path, "rb") as f:
        return dict(tomllib.load(f)["tool"]["setuptools"]["package-dir"])


def discover(top: dict[str, str]) -> dict[str, str]:
    """Every package under every root, with the folder it is read from."""
    found: dict[str, str] = {}
    for name, folder in top.items():
        found[name] = folder
        for sub in find_packages(os.path.join(HERE, folder)):
            found[f"{name}.{sub}"] = os.path.join(folder, *sub.split("."))
    return found


def data_files_of(package_dir: dict[str, str]) -> dict[str, list[str]]:
    """Each package's non-module files: everything in its folder tree that no subpackage owns.

    A package's own ``.py`` files are its modules; ``.py`` files in a plain subfolder (campaign
    problems, the tiny LM server) are data read by path, so they ship as data.
    """
    owned = {os.path.normpath(d) for d in package_dir.values()}
    data: dict[str, list[str]] = {}
    for name, folder in package_dir.items():
        top = os.path.normpath(folder)
        files: list[str] = []
        for dirpath, dirnames, filenames in os.walk(os.path.join(HERE, top)):
            rel_dir = os.path.relpath(dirpath, HERE)
            dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS and not d.startswith(".")
                                 and os.path.normpath(os.path.join(rel_dir, d)) not in owned)
            for f in sorted(filenames):
                if f.startswith(".") or f.endswith(_SKIP_SUFFIXES):
                    continue
                if os.path.normpath(rel_dir) == top and f.endswith(".py"):
                    continue  # a module of this package, installed as such
                files.append(os.path.relpath(os.path.join(rel_dir, f), top).replace(os.sep, "/"))
        if files:
            data[name] = files
    return data


PACKAGES = discover(roots())

# package-dir itself comes from pyproject.toml (a subpackage's folder follows from its root's)
setup(packages=sorted(PACKAGES), package_data=data_files_of(PACKAGES))
