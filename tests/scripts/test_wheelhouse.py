"""scripts/wheelhouse.py: the requirement walk that builds an offline wheel folder, against a fake
index (no network), plus its command-line errors."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("wheelhouse", ROOT / "scripts" / "wheelhouse.py")
wh = importlib.util.module_from_spec(_spec)
sys.modules["wheelhouse"] = wh
_spec.loader.exec_module(wh)


def _wheel(dest: Path, name: str, version: str, requires: list[str]) -> Path:
    path = dest / f"{name.replace('-', '_')}-{version}-py3-none-any.whl"
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n" + "".join(
        f"Requires-Dist: {r}\n" for r in requires)
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(f"{name.replace('-', '_')}-{version}.dist-info/METADATA", meta)
    return path


class FakeIndex:
    """name -> {version: requires}; answers the newest version matching the requirement."""

    def __init__(self, projects: dict[str, dict[str, list[str]]]):
        self.projects, self.asked = projects, []

    def __call__(self, req, target, dest):  # type: ignore[no-untyped-def]
        self.asked.append(str(req))
        versions = self.projects.get(req.name)
        if not versions:
            raise wh.WheelhouseError(f"no wheel of {req}")
        ok = [v for v in versions if req.specifier.contains(v, prereleases=True)]
        if not ok:
            raise wh.WheelhouseError(f"no wheel of {req}")
        v = max(ok, key=wh.Version)
        return _wheel(dest, req.name, v, versions[v])


TARGET = wh.target_for("3.12", "manylinux_2_28_x86_64")
INDEX = {
    "app-dep": {"1.0": ["torch>=2.2", "small>=1", 'winonly; sys_platform == "win32"', 'old; python_version < "3.10"']},
    "small": {"1.0": [], "2.0": ["tiny"]},
    "tiny": {"0.1": []},
    "torch": {"2.13.0": ["nvidia-huge"]},
    "nvidia-huge": {"1.0": []},
    "withextra": {"1.0": ['tiny; extra == "bin"', 'never; extra == "docs"']},
    "heavy": {"1.0": []},
}


def _build(tmp_path, reqs, have=None, prefer=None, exclude=()):  # type: ignore[no-untyped-def]
    index = FakeIndex(INDEX)
    plan = wh.build([wh.Requirement(r) for r in reqs], TARGET, have or {}, tmp_path, exclude, index,
                    prefer=prefer or {})
    return plan, index


def test_what_the_target_has_is_neither_fetched_nor_followed(tmp_path):
    plan, index = _build(tmp_path, ["app-dep"], have={"torch": "2.11.0+cu130"})
    assert set(plan.fetched) == {"app-dep", "small", "tiny"}
    assert plan.present == {"torch": "2.11.0+cu130"}
    assert not any(a.startswith(("torch", "nvidia")) for a in index.asked)  # never resolved, never downloaded
    assert not any(a.startswith(("winonly", "old")) for a in index.asked)  # markers for the target


def test_an_older_version_on_the_target_is_fetched(tmp_path):
    plan, _ = _build(tmp_path, ["small>=2"], have={"small": "1.0"})
    assert plan.fetched["small"][0] == "2.0" and "small" not in plan.present


def test_extras_follow_only_their_own_requirements(tmp_path):
    plan, index = _build(tmp_path, ["withextra[bin]"])
    assert set(plan.fetched) == {"withextra", "tiny"}
    assert "never" not in " ".join(index.asked)


def test_tested_versions_are_preferred(tmp_path):
    plan, _ = _build(tmp_path, ["small", "app-dep"], prefer={"small": "1.0"})
    assert plan.fetched["small"][0] == "1.0"  # the version tested here, though 2.0 exists


def test_a_stricter_requirement_leaves_one_wheel_of_a_project(tmp_path):
    plan, _ = _build(tmp_path, ["small", "small>=2"], prefer={"small": "1.0"})
    assert plan.fetched["small"][0] == "2.0"
    assert [w.name for w in tmp_path.glob("small-*.whl")] == ["small-2.0-py3-none-any.whl"]  # two stop an install


def test_excluded_projects_are_skipped(tmp_path):
    plan, index = _build(tmp_path, ["heavy", "tiny"], exclude=["heavy"])
    assert plan.excluded == {"heavy"} and set(plan.fetched) == {"tiny"}


def test_pip_list_and_freeze_both_parse():
    listed = "Package    Version\n---------- -------\nTorch      2.11.0+cu130\nrich 14.0.0\nnumpy\n"
    assert wh.parse_have(listed) == {"torch": "2.11.0+cu130", "rich": "14.0.0", "numpy": ""}
    assert wh.parse_have("PyYAML==6.0.2\n# comment\n-e git+x#egg=y\n") == {"pyyaml": "6.0.2"}
    assert wh.satisfied(wh.Requirement("numpy>=1.24"), {"numpy": ""})  # bare names are trusted


def test_platform_tags_cover_lower_manylinux_levels():
    t = wh.target_for("3.12", "manylinux_2_28_x86_64")
    assert t.platforms[0] == "manylinux_2_28_x86_64" and "manylinux_2_17_x86_64" in t.platforms
    assert "manylinux2014_x86_64" in t.platforms and t.machine == "x86_64"
    assert wh.target_for("3.12", "aarch64").machine == "aarch64"


@pytest.mark.parametrize("args, needle", [
    (["3", "x86_64"], "MAJOR.MINOR"),
    (["3.12", "win_amd64"], "x86_64 or aarch64"),
    (["3.12", "x86_64", "--extras", "nope"], "no optional group 'nope'"),
])
def test_bad_arguments_are_one_line_errors(tmp_path, args, needle):
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "wheelhouse.py"), *args, "-o", str(tmp_path)],
                       capture_output=True, text=True)
    assert r.returncode == 2 and needle in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert "Traceback" not in r.stderr

