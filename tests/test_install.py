"""Arbor installed the way a user installs it, and run from a folder that is not the checkout.

Every other test imports the editable install, which serves any module straight from the
checkout: a wheel that lacked ``arbor/redteam`` and ``agents/transforms/{cpp,triton}`` (20 modules)
passed them all while an installed ``arbor run`` died on its first import. Here the wheel is built
from the working tree's files, installed into a fresh virtual environment, and used from an empty
folder: its files must be the source tree's, file for file; ``arbor run`` must reach a generated
C++ kernel and a Triton-interpreter kernel and measure both; ``arbor redteam`` and ``arbor doctor``
must run; ``arbor --version`` must be the package's. Then ``pip install .`` from a fresh ``git
clone`` must install the same files.

The dependencies (torch: gigabytes) are not installed again, and nothing is downloaded: the venv
is made without system site-packages and gets a ``.pth`` file naming this interpreter's
site-packages folders. A path line adds a folder to ``sys.path`` but does not run the ``.pth``
files inside it, so the editable install's meta-path finder (``__editable__*.pth``) never loads:
the test checks that every ``arbor`` module it imports comes from the venv.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
# installed package -> folder in the repository (setup.py's ROOTS)
ROOTS = {"arbor": "arbor", "arbor/agents": "agents", "arbor/sandbox": "sandbox", "arbor/search_tree": "search_tree",
         "arbor/skills": "skills", "arbor/campaigns": "campaigns"}
BUILD_FILES = ("pyproject.toml", "setup.py", "README.md")
# the moves the installed run must reach and measure (skills/hard/cpp-codegen.md, triton-codegen.md)
KEEP_SKILLS = ("cpp-codegen", "triton-codegen")
# a campaign of the user's own over the packaged quickstart problem, at toy sizes and short timings
# (this test checks that the moves run from the installed package, not how fast they are)
CAMPAIGN = """name: installed
target:
  problem: {problem}
  sizes: {{batch_size: 16, dim: 256}}
  num_threads: 1
budget: {{max_evaluations: 3, max_wall_s: 3600}}  # the moves, not the clock, end it
measurement: {{seeds: [0, 1, 2], warmup_s: 0.01, time_budget_s: 0.1, min_repeats: 5, max_repeats: 60,
              min_sample_s: 0.0005}}
critic: {{max_cv: 0.5, min_speedup: 1.02, final_measurements: 1}}
sandbox: {{timeout_s: 900}}  # a C++ extension builds in ~25 s on a quiet 2-core machine, minutes on a loaded one
skills: {{exclude: [{exclude}]}}
"""
PROBE = """import importlib, importlib.metadata, json, sys
import arbor
mods = ["arbor", "arbor.cli", "arbor.agents", "arbor.agents.transforms.cpp", "arbor.agents.transforms.triton",
        "arbor.redteam", "arbor.sandbox", "arbor.sandbox.harness", "arbor.search_tree", "arbor.campaigns"]
print(json.dumps({"files": {m: importlib.import_module(m).__file__ for m in mods},
                  "finders": [repr(f) for f in sys.meta_path],
                  "metadata": importlib.metadata.version("arbor-opt"), "version": arbor.__version__}))
"""


def _run(cmd: list[str], cwd: Path, env: dict | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"{' '.join(map(str, cmd))} exited {r.returncode}:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r


def _tree_files(repo: Path) -> list[str]:
    """The working tree's files as git sees them (tracked and new, never ignored: no stores, runs or
    caches), or every file when this is not a git checkout."""
    if (repo / ".git").exists() and shutil.which("git"):
        out = _run(["git", "ls-files", "-co", "--exclude-standard", "-z"], repo).stdout
        return sorted(f for f in set(out.split("\0")) if f and (repo / f).is_file())
    return sorted(str(p.relative_to(repo)) for p in repo.rglob("*") if p.is_file())


def _expected(files: list[str]) -> set[str]:
    """Where each source file of the packages lands in site-packages."""
    out = set()
    for f in files:
        if "__pycache__" in f or f.endswith(".pyc"):
            continue
        for installed, folder in ROOTS.items():
            if f.startswith(folder + "/"):
                out.add(installed + f[len(folder):])
    return out


def _installed(site: Path) -> set[str]:
    return {str(p.relative_to(site)) for p in (site / "arbor").rglob("*")
            if p.is_file() and "__pycache__" not in p.parts}


def _venv(path: Path) -> tuple[Path, Path]:
    """A fresh venv without pip or system site-packages that sees this interpreter's dependencies
    through a plain path ``.pth`` (not run: the editable finder stays out)."""
    _run([sys.executable, "-m", "venv", "--without-pip", str(path)], path.parent)
    python = path / "bin" / "python"
    site = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                     path.parent).stdout.strip())
    deps = [p for p in sys.path if p.rstrip("/").endswith(("site-packages", "dist-packages")) and Path(p).is_dir()
            and not Path(p).resolve().is_relative_to(path.resolve())]
    # The interpreter's own site-packages first, as for a user whose dependencies are installed in
    # that environment: a dependency a candidate imports (torch; setuptools for a C++ extension's
    # build) resolves there rather than from a test runner's outer venv. (The sandbox reads every
    # site directory on sys.path: sandbox/runners/isolation.py default_read_paths.)
    deps.sort(key=lambda p: not Path(p).resolve().is_relative_to(Path(sys.base_prefix).resolve()))
    (site / "arbor_test_deps.pth").write_text("".join(f"{p}\n" for p in deps))
    return python, site


def _install(python: Path, what: Path, cwd: Path) -> None:
    _run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", "--no-index",
          "--no-build-isolation", str(what)], cwd)


def _env(venv: Path, **extra: str) -> dict:
    """The user's shell with the venv first on PATH and nothing of the checkout's or pytest's."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTEST", "PYTHON")) and k not in ("VIRTUAL_ENV", "COV_CORE_SOURCE")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', os.defpath)}"
    return {**env, **extra}


def _can_build() -> str | None:
    """Why a wheel cannot be built offline here, or None."""
    r = subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True, text=True)
    if r.returncode != 0:
        return "pip is not installed"
    version = tuple(int(x) for x in r.stdout.split()[1].split(".")[:2] if x.isdigit())
    if version < (22, 3):  # `pip --python` installs into the fresh venv, which has no pip of its own
        return f"pip {r.stdout.split()[1]} has no --python option (22.3 and later)"
    import setuptools

    major, minor = (int(x) for x in setuptools.__version__.split(".")[:2])
    if importlib.util.find_spec("wheel") is None and (major, minor) < (70, 1):
        return f"setuptools {setuptools.__version__} builds wheels only with the `wheel` package (in the test extra)"
    return None


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(venv python, its site-packages, expected files, empty working folder) for the wheel."""
    why = _can_build()
    if why:
        pytest.skip(f"cannot build the wheel offline: {why} — `bash scripts/setup.sh test` installs it")
    tmp = tmp_path_factory.mktemp("install")
    files = _tree_files(REPO)
    src = tmp / "src"  # only the working tree's files: a stale build/ or a local store never reaches the wheel
    for f in files:
        if f in BUILD_FILES or any(f.startswith(folder + "/") for folder in ROOTS.values()):
            (src / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / f, src / f)
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-index", "--no-build-isolation",
          "-w", str(tmp / "dist"), str(src)], tmp, timeout=300)
    wheel = next((tmp / "dist").glob("arbor_opt-*.whl"))
    python, site = _venv(tmp / "venv")
    _install(python, wheel, tmp)
    work = tmp / "empty"
    work.mkdir()
    return python, site, _expected(files), work


def test_the_wheel_holds_every_file_of_the_source_tree(installed):
    python, site, expected, _ = installed
    got = _installed(site)
    assert not expected - got, f"missing from the wheel: {sorted(expected - got)}"
    assert not got - expected, f"in the wheel but not in the source tree: {sorted(got - expected)}"


def test_the_installed_modules_come_from_the_venv_and_the_version_is_the_package_s(installed):
    python, site, _, work = installed
    probe = json.loads(_run([str(python), "-c", PROBE], work, _env(python.parent.parent)).stdout)
    outside = {m: f for m, f in probe["files"].items() if not Path(f).resolve().is_relative_to(site.resolve())}
    assert not outside, f"served from outside the venv (the checkout?): {outside}"
    assert not any("editable" in f.lower() for f in probe["finders"]), probe["finders"]
    r = _run([str(python.parent / "arbor"), "--version"], work, _env(python.parent.parent))
    assert r.stdout.strip() == f"arbor {probe['metadata']}" and probe["version"] == probe["metadata"]


def test_the_installed_arbor_runs_cpp_and_triton_moves_redteam_and_doctor(installed):
    python, site, _, work = installed
    venv = python.parent.parent
    arbor = str(venv / "bin" / "arbor")
    skills = sorted(p.stem for p in (site / "arbor" / "skills" / "hard").glob("*.md"))
    assert set(KEEP_SKILLS) <= set(skills)
    problem = site / "arbor" / "campaigns" / "problems" / "gelu_gate.py"
    spec = work / "installed.yaml"
    spec.write_text(CAMPAIGN.format(problem=problem, exclude=", ".join(s for s in skills if s not in KEEP_SKILLS)))
    # Triton runs on the CPU only through its interpreter (agents/specialists/applicability.py)
    env = _env(venv, TRITON_INTERPRET="1")
    r = subprocess.run([arbor, "run", str(spec), "--json-log", "events.jsonl", "-q"], cwd=work, env=env,
                       capture_output=True, text=True, timeout=1800)
    assert r.returncode in (0, 1) and "Traceback" not in r.stderr + r.stdout, r.stdout[-3000:] + r.stderr[-3000:]
    events = [json.loads(line) for line in (work / "events.jsonl").read_text().splitlines()]
    verdicts = {e["move"]: e for e in events if e["event"] == "verdict" and e.get("move")}
    for prefix in ("cpp-fused", "triton-fused"):
        move = next((m for m in verdicts if m.startswith(prefix)), None)
        assert move is not None, f"no {prefix} move measured: {sorted(verdicts)}"
        # measured: accepted or rejected on its speed, never a build, import or runtime failure
        v = verdicts[move]
        assert v["decision"] in ("accept", "reject", "remeasure") and v["diagnosis"] not in (
            "compile_error", "runtime_error", "import_error", "timeout"), f"{move}: {v['decision']} / {v['diagnosis']}: {v['reason']}"

    r = subprocess.run([arbor, "redteam", str(problem), "--spec", str(spec), "--classes", "10", "--disguises",
                        "getattr", "--per-combo", "1", "--twins", "0", "-o", "redteam"],
                       cwd=work, env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    data = json.loads((work / "redteam" / "redteam.json").read_text())
    assert data["hostile"] == 1 and data["accepted"] == 0

    r = subprocess.run([arbor, "doctor", "--skip-llm", "--json"], cwd=work, env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode in (0, 1) and "Traceback" not in r.stderr, r.stderr[-3000:]
    checks = json.loads(r.stdout)["checks"]
    assert checks and all(c["status"] in ("ok", "warn", "fail", "skip") for c in checks)
    assert not [c for c in checks if c["status"] == "fail" and "arbor" in (c.get("detail") or "").lower()
                and "import" in (c.get("detail") or "").lower()], checks


def test_pip_install_from_a_fresh_clone_installs_the_same_files(tmp_path):
    if not (REPO / ".git").exists() or shutil.which("git") is None:
        pytest.skip("not a git checkout: there is nothing to clone")
    why = _can_build()
    if why:
        pytest.skip(f"cannot build offline: {why} — `bash scripts/setup.sh test` installs it")
    clone = tmp_path / "clone"
    _run(["git", "clone", "-q", "--no-hardlinks", str(REPO), str(clone)], tmp_path)
    python, site = _venv(tmp_path / "venv")
    _install(python, clone, tmp_path)
    expected, got = _expected(_tree_files(clone)), _installed(site)
    assert expected == got, f"missing: {sorted(expected - got)}; extra: {sorted(got - expected)}"
    work = tmp_path / "empty"
    work.mkdir()
    r = _run([str(python.parent / "arbor"), "--version"], work, _env(python.parent.parent))
    assert r.stdout.strip().startswith("arbor ")
