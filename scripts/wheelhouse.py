"""Build a folder of wheels for Arbor's runtime dependencies, for a host that reaches no index.

    python3 scripts/wheelhouse.py PYTHON_VERSION PLATFORM [--have PIP_LIST] [-o DIR] [--extras gpu,test]
                                  [--exclude NAME ...]

Most GPU clusters reach no package index, and the one a GPU machine brings already holds the heavy
part (torch, triton, numpy, CUDA libraries). So this walks Arbor's requirement graph itself rather
than asking pip's resolver for the whole environment: a requirement the target already satisfies
(``--have``: its ``pip list`` or ``pip freeze``) is not fetched and its own requirements are not
followed — resolving them would pull multi-GB CUDA wheels only to learn that they are there. Every
other requirement is downloaded as a wheel for the target's Python and platform (``pip download
--no-deps --only-binary=:all:``), its ``Requires-Dist`` read from the wheel, markers evaluated for
the target, and the walk goes on. Where the machine building the wheelhouse has a project
installed in a version that satisfies the requirement, that version is fetched: the target gets
the versions Arbor's tests passed with. A requirement the target has in an older version than needed is
fetched (and wins at install, which uses ``--upgrade``).

The host's list often names a package without its version. Such an entry satisfies a requirement
with no version bound, and a versioned one only for the heavy stacks the host brings (torch,
triton, numpy, CUDA, JAX: ``HOST_STACK``) — anything else is fetched, because recent wheels need
newer small dependencies than an older host may have; a fetched wheel that turns out compiled or
larger than ``SMALL_MB`` is dropped again and the host's copy trusted (the device carries 64 MiB
in all: matplotlib, pillow and the like are the host's business). ``CARRY`` (typing-extensions, anyio, idna,
certifi) is fetched whatever the list says: a stale list is the usual way a host turns out older.

The result installs with no network on the target, each wheel only where the target's installed
version is missing or older (never a downgrade of what the host's stack was built with):

    python3 scripts/wheelhouse.py install DIR        # or: scripts/wheelhouse.sh --install DIR [PYTHON]

(``scripts/gpu_check.sh``, ``gpu_suite.sh`` and ``gpu_lease.sh`` do this when given the folder).
A one-line error, exit 2, when a requirement has no wheel for the target (a source-only release):
name it in ``--exclude`` or add a platform tag.
"""

from __future__ import annotations

import argparse
import email.parser
import re
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

try:
    from packaging.markers import Marker
    from packaging.requirements import Requirement
    from packaging.specifiers import SpecifierSet
    from packaging.utils import canonicalize_name
    from packaging.version import InvalidVersion, Version
except ImportError:  # pragma: no cover - pip always vendors it
    from pip._vendor.packaging.markers import Marker  # type: ignore[no-redef]
    from pip._vendor.packaging.requirements import Requirement  # type: ignore[no-redef]
    from pip._vendor.packaging.specifiers import SpecifierSet  # type: ignore[no-redef]
    from pip._vendor.packaging.utils import canonicalize_name  # type: ignore[no-redef]
    from pip._vendor.packaging.version import InvalidVersion, Version  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parent.parent
# Heavy packages only some tests import, and too large to carry to a GPU host in one call
# (the device tool moves at most 64 MiB): their tests skip where they are missing.
DEFAULT_EXCLUDE = ("ray",)
# Small dependencies always carried (in the tested version): recent wheels need newer ones than an
# older host has, and the host list names them without versions.
CARRY = ("typing-extensions", "anyio", "idna", "certifi")
SMALL_MB = 1.0  # a bare-listed package is carried only as a pure-Python wheel up to this size
# What the host's stack is: a bare name on its list is trusted for any version of these
HOST_STACK = re.compile(r"^(torch|torchvision|torchaudio|triton|numpy|scipy|jax|jaxlib|nvidia-.*|cuda-.*|"
                        r"pytorch-triton.*|tensorflow.*)$")


class WheelhouseError(Exception):
    """One line: what could not be fetched and what to do."""


@dataclass(frozen=True)
class Target:
    python: str  # "3.12"
    platforms: tuple[str, ...]  # pip platform tags, most specific first
    machine: str  # x86_64 | aarch64

    def environment(self, extra: str = "") -> dict[str, str]:
        """The PEP 508 marker environment of the target interpreter."""
        return {"python_version": self.python, "python_full_version": f"{self.python}.0",
                "implementation_name": "cpython", "platform_python_implementation": "CPython",
                "platform_system": "Linux", "sys_platform": "linux", "os_name": "posix",
                "platform_machine": self.machine, "platform_release": "", "platform_version": "",
                "implementation_version": f"{self.python}.0", "extra": extra}


def target_for(python: str, platform: str) -> Target:
    """``3.12`` + ``manylinux_2_28_x86_64`` | ``x86_64`` | ``linux_x86_64`` → a Target whose tags
    cover every manylinux level up to the one given (pip matches a tag exactly, and projects
    publish under different levels)."""
    if not re.fullmatch(r"3\.\d+", python):
        raise WheelhouseError(f"python version {python!r} is not like 3.12 — give MAJOR.MINOR")
    m = re.search(r"(x86_64|aarch64)$", platform)
    if m is None:
        raise WheelhouseError(f"platform {platform!r} names no x86_64 or aarch64 machine — "
                              "give e.g. manylinux_2_28_x86_64")
    machine = m.group(1)
    top = re.match(r"manylinux_2_(\d+)_", platform)
    glibc = int(top.group(1)) if top else 39
    tags = [f"manylinux_2_{n}_{machine}" for n in range(glibc, 16, -1)]
    tags += [f"manylinux2014_{machine}"]
    if machine == "x86_64":
        tags += ["manylinux2010_x86_64", "manylinux1_x86_64"]
    return Target(python, tuple(tags), machine)


def parse_have(text: str) -> dict[str, str]:
    """``pip list`` (columns, with or without its header) or ``pip freeze`` (name==version) →
    {canonical name: version}. Local version labels (``2.11.0+cu130``) are kept for display and
    ignored in comparisons."""
    have: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", "Package", "---", "-e ")):
            continue
        if "==" in line:
            name, _, version = line.partition("==")
        elif " @ " in line:
            continue  # a direct reference: no version to compare
        else:
            parts = line.split()
            name, version = parts[0], (parts[1] if len(parts) > 1 else "")  # a bare name: any version
        have[canonicalize_name(name)] = version.strip()
    return have


def satisfied(req: Requirement, have: dict[str, str]) -> bool:
    name = canonicalize_name(req.name)
    version = have.get(name)
    if version is None:
        return False
    if not version:  # listed without a version: enough for "any", or for the host's own stack
        return not req.specifier or bool(HOST_STACK.match(name))
    try:
        return req.specifier.contains(Version(version.split("+")[0]), prereleases=True)
    except InvalidVersion:
        return True  # an unparseable installed version: trust that it is there


def project_requirements(pyproject: Path, extras: Iterable[str]) -> list[Requirement]:
    """Arbor's own runtime requirements plus the named optional groups."""
    import tomllib  # 3.11+: the machine that builds the wheelhouse, not the target

    data = tomllib.loads(pyproject.read_text())["project"]
    reqs = list(data.get("dependencies", []))
    for extra in extras:
        group = data.get("optional-dependencies", {}).get(extra)
        if group is None:
            raise WheelhouseError(f"pyproject.toml has no optional group {extra!r} — "
                                  f"choose from {sorted(data.get('optional-dependencies', {}))}")
        reqs += group
    return [Requirement(r) for r in reqs]


def wheel_requirements(wheel: Path) -> tuple[str, str, list[str]]:
    """(name, version, Requires-Dist lines) read from a wheel's METADATA."""
    with zipfile.ZipFile(wheel) as zf:
        meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        msg = email.parser.Parser().parsestr(zf.read(meta).decode("utf-8", "replace"))
    return msg["Name"], msg["Version"], msg.get_all("Requires-Dist") or []


Fetch = Callable[[Requirement, Target, Path], Path]


def pip_fetch(req: Requirement, target: Target, dest: Path) -> Path:
    """Download one wheel (no dependencies) for the target; the path of the wheel written."""
    dest = dest.resolve()  # pip runs in a scratch folder: a relative destination would land there
    spec = f"{req.name}{req.specifier}"
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--quiet",
           "--disable-pip-version-check", "--python-version", target.python, "--implementation", "cp",
           "-d", str(dest), spec]
    for tag in target.platforms:
        cmd += ["--platform", tag]
    with tempfile.TemporaryDirectory() as tmp:
        before = set(dest.glob("*.whl"))
        r = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp)
    if r.returncode != 0:
        why = [ln for ln in r.stderr.splitlines() if ln.startswith("ERROR")][:1]
        raise WheelhouseError(f"no wheel of {spec} for Python {target.python} on {target.machine} "
                              f"({why[0] if why else 'pip download failed'}) — add it to --exclude if the "
                              "target does not need it, or give a newer manylinux platform")
    new = set(dest.glob("*.whl")) - before
    name = canonicalize_name(req.name)
    matches = [w for w in new | before if canonicalize_name(w.name.split("-")[0]) == name]
    if not matches:
        raise WheelhouseError(f"pip reported success for {spec} but wrote no wheel into {dest}")
    return max(matches, key=lambda w: w.stat().st_mtime)


@dataclass
class Plan:
    fetched: dict[str, tuple[str, Path]] = field(default_factory=dict)  # name -> (version, wheel)
    present: dict[str, str] = field(default_factory=dict)  # satisfied by the target: name -> version
    excluded: set[str] = field(default_factory=set)


def tested_versions() -> dict[str, str]:
    """The versions installed where this runs — the environment Arbor's tests passed in, and a
    consistent resolution: preferring them spares this walk the backtracking a resolver does
    (the newest release of a project may need a release of another that the index lacks)."""
    from importlib import metadata

    out = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if name:
            out[canonicalize_name(name)] = dist.version
    return out


def build(reqs: list[Requirement], target: Target, have: dict[str, str], dest: Path,
          exclude: Iterable[str] = DEFAULT_EXCLUDE, fetch: Fetch = pip_fetch,
          prefer: dict[str, str] | None = None, carry: Iterable[str] = CARRY) -> Plan:
    """Walk the requirement graph breadth-first, fetching what the target lacks, in the version
    given by ``prefer`` (default: the versions installed here) where it satisfies the requirement.
    ``carry``: fetched whatever ``have`` says (the install decides by what is really there)."""
    prefer = tested_versions() if prefer is None else prefer
    plan = Plan()
    skip = {canonicalize_name(e) for e in exclude}
    carried = {canonicalize_name(c) for c in carry}
    queue: list[tuple[Requirement, str]] = [(r, "") for r in reqs] + [(Requirement(c), "") for c in carry]
    seen_specs: dict[str, SpecifierSet] = {}
    while queue:
        req, extra = queue.pop(0)
        if req.marker is not None and not req.marker.evaluate(target.environment(extra)):
            continue
        name = canonicalize_name(req.name)
        if name in skip:
            plan.excluded.add(name)
            continue
        if name not in carried and satisfied(req, have):
            plan.present[name] = have[name]
            continue
        spec = seen_specs.get(name, SpecifierSet()) & req.specifier
        if name in plan.fetched:
            version = plan.fetched[name][0]
            if spec.contains(Version(version), prereleases=True) and not req.extras:
                continue
        seen_specs[name] = spec
        combined = Requirement(f"{req.name}{spec}")
        tested = prefer.get(name)
        if tested and spec.contains(Version(tested), prereleases=True):
            combined = Requirement(f"{req.name}=={tested}")
        if name in plan.fetched:  # a stricter requirement arrived: one version of each, or install fails
            plan.fetched.pop(name)[1].unlink(missing_ok=True)
        wheel = fetch(combined, target, dest)
        if name not in carried and have.get(name) == "" and not _small(wheel):
            wheel.unlink(missing_ok=True)  # listed bare and not small: the host's copy is trusted
            plan.present[name] = ""
            continue
        _, version, requires = wheel_requirements(wheel)
        plan.fetched[name] = (version, wheel)
        extras = sorted(req.extras)
        for line in requires:
            sub = Requirement(line)
            # a requirement guarded by `extra == "x"` applies only when x was asked for
            for e in extras or [""]:
                queue.append((sub, e))
    return plan


def wheel_version(wheel: Path) -> tuple[str, str]:
    """(canonical name, version) from a wheel's file name (PEP 427: name-version-...)."""
    name, version = wheel.name.split("-")[:2]
    return canonicalize_name(name), version


def installed_versions() -> dict[str, str]:
    """What this interpreter has (the target's, when run there)."""
    return tested_versions()


def to_install(wheels: Iterable[Path], installed: dict[str, str]) -> tuple[list[Path], dict[str, str]]:
    """The wheels to install — missing here, or newer than what is here — and why each other is
    left out. Never a downgrade: the host's stack was built against what it has."""
    chosen, kept = [], {}
    for wheel in sorted(wheels):
        name, version = wheel_version(wheel)
        have = installed.get(name)
        try:
            older = have is None or Version(have.split("+")[0]) < Version(version.split("+")[0])
        except InvalidVersion:
            older = False  # an installed version we cannot read: leave it as it is
        if older:
            chosen.append(wheel)
        else:
            kept[name] = f"{have} installed, the wheel has {version}"
    return chosen, kept


def install_main(argv: list[str]) -> int:
    """``install DIR``: pip-install (no index, no deps) the wheels of DIR this interpreter lacks or
    has older; one line per decision."""
    if len(argv) != 1 or not Path(argv[0]).is_dir():
        print("wheelhouse: usage: wheelhouse.py install DIR (a folder of wheels)", file=sys.stderr)
        return 2
    wheels = sorted(Path(argv[0]).glob("*.whl"))
    chosen, kept = to_install(wheels, installed_versions())
    for name, why in sorted(kept.items()):
        print(f"  kept     {name}: {why}")
    for wheel in chosen:
        print(f"  install  {wheel.name}")
    if not chosen:
        print(f"wheelhouse: nothing to install from {argv[0]} ({len(wheels)} wheels, all present and as new)")
        return 0
    r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps",
                        "--disable-pip-version-check", *map(str, chosen)])
    return 0 if r.returncode == 0 else 1


def _small(wheel: Path) -> bool:
    return wheel.name.endswith("-none-any.whl") and wheel.stat().st_size <= SMALL_MB * 1e6


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["install"]:
        return install_main(argv[1:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("python", help="target Python version, e.g. 3.12")
    ap.add_argument("platform", help="target platform tag, e.g. manylinux_2_28_x86_64 (or x86_64)")
    ap.add_argument("--have", help="the target's `pip list` or `pip freeze` output (a file): what it has is not fetched")
    ap.add_argument("-o", "--out", default="wheelhouse", help="folder for the wheels (default: wheelhouse)")
    ap.add_argument("--extras", default="gpu,test", help="optional groups of pyproject.toml to include (default: gpu,test)")
    ap.add_argument("--exclude", nargs="*", default=list(DEFAULT_EXCLUDE),
                    help=f"projects never fetched (default: {' '.join(DEFAULT_EXCLUDE)})")
    args = ap.parse_args(argv)
    try:
        target = target_for(args.python, args.platform)
        have = parse_have(Path(args.have).read_text()) if args.have else {}
        extras = [e for e in args.extras.split(",") if e]
        reqs = project_requirements(ROOT / "pyproject.toml", extras)
        dest = Path(args.out)
        dest.mkdir(parents=True, exist_ok=True)
        plan = build(reqs, target, have, dest, args.exclude)
    except (WheelhouseError, OSError) as exc:
        print(f"wheelhouse: {exc}", file=sys.stderr)
        return 2
    size = sum(w.stat().st_size for _, w in plan.fetched.values())
    for name, (version, wheel) in sorted(plan.fetched.items()):
        print(f"  fetched  {name} {version}  ({wheel.stat().st_size / 1e6:.1f} MB)")
    print(f"{len(plan.fetched)} wheels, {size / 1e6:.1f} MB in {dest}; {len(plan.present)} requirements "
          f"already on the target; excluded: {', '.join(sorted(plan.excluded)) or 'none'}")
    print(f"install there with:  python{args.python} scripts/wheelhouse.py install {dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
