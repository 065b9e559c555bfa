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
                    prefer=prefer or {}, carry=())
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



def test_a_bare_name_on_the_host_list_is_trusted_only_for_any_version_or_the_hosts_stack(tmp_path):
    plan, _ = _build(tmp_path, ["app-dep"], have={"app-dep": "", "small": "", "torch": ""})
    assert "app-dep" in plan.present  # no version asked for: present is enough
    plan, _ = _build(tmp_path, ["small>=1", "torch>=2.2"], have={"small": "", "torch": ""})
    assert plan.fetched["small"][0] == "2.0" and plan.present["torch"] == ""  # torch: the host's own stack


def test_the_carried_small_dependencies_are_fetched_whatever_the_host_lists(tmp_path):
    index = FakeIndex({**INDEX, "certifi": {"2025.1.1": []}, "idna": {"3.10": []}})
    plan = wh.build([wh.Requirement("tiny")], TARGET, {"tiny": "0.1", "certifi": "2020.1.1", "idna": ""}, tmp_path,
                    (), index, prefer={"certifi": "2025.1.1"}, carry=("certifi", "idna"))
    assert plan.fetched["certifi"][0] == "2025.1.1" and plan.fetched["idna"][0] == "3.10"
    assert plan.present == {"tiny": "0.1"}
    assert set(wh.CARRY) == {"typing-extensions", "anyio", "idna", "certifi"}


def test_install_takes_a_wheel_only_where_the_host_is_missing_it_or_older(tmp_path):
    wheels = [_wheel(tmp_path, "anyio", "4.9.0", []), _wheel(tmp_path, "idna", "3.10", []),
              _wheel(tmp_path, "certifi", "2025.1.1", []), _wheel(tmp_path, "typing-extensions", "4.14.0", [])]
    chosen, kept = wh.to_install(wheels, {"anyio": "3.7.1", "idna": "3.10", "certifi": "2026.2.1",
                                          "typing-extensions": "4.14.0+local"})
    assert [wh.wheel_version(w)[0] for w in chosen] == ["anyio"]  # older here: upgraded
    assert set(kept) == {"idna", "certifi", "typing-extensions"}  # as new, or newer: never downgraded
    assert "2026.2.1 installed" in kept["certifi"]
    chosen, _ = wh.to_install(wheels, {})
    assert len(chosen) == 4  # nothing there: all of them


def test_install_with_nothing_to_do_says_so_and_a_bad_folder_is_one_line(tmp_path):
    _wheel(tmp_path, "pip", "0.1", [])  # older than any pip: kept
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "wheelhouse.py"), "install", str(tmp_path)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "nothing to install" in r.stdout and "kept     pip" in r.stdout, r.stdout + r.stderr
    r = subprocess.run(["bash", str(ROOT / "scripts" / "wheelhouse.sh"), "--install", str(tmp_path / "none"),
                        sys.executable], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stderr.strip() == "wheelhouse: usage: wheelhouse.py install DIR (a folder of wheels)"


def test_a_bare_listed_package_is_carried_only_when_small_and_pure_python(tmp_path, monkeypatch):
    monkeypatch.setattr(wh, "SMALL_MB", 0.0005)  # 500 bytes: the fake wheels are a few hundred
    plan, _ = _build(tmp_path, ["small>=2"], have={"small": ""})
    assert "small" in plan.fetched  # pure Python and small: carried
    big = _wheel(tmp_path, "big", "1.0", [])
    with zipfile.ZipFile(big, "a") as zf:
        zf.writestr("big/data.bin", "x" * 5000)

    def fetch(req, target, dest):  # type: ignore[no-untyped-def]
        return big

    plan = wh.build([wh.Requirement("big>=1")], TARGET, {"big": ""}, tmp_path, (), fetch, prefer={}, carry=())
    assert plan.present == {"big": ""} and "big" not in plan.fetched and not big.exists()
