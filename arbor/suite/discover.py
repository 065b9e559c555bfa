"""Finding KernelBench-style problem files in a directory, with their level and id.

Upstream keeps ``level1/23_Softmax.py``; our development set uses ``l1_06_softmax.py``. The level
comes from a ``levelN`` folder or an ``lN_`` prefix, the id from the file's leading number.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from arbor.sandbox.kernel.problem import ProblemError, load_problem

_LEVEL_DIR = re.compile(r"level[_-]?(\d+)$", re.IGNORECASE)
_LEVEL_PREFIX = re.compile(r"^l(\d+)_(\d+)_")
_ID = re.compile(r"^(\d+)_")


@dataclass(frozen=True)
class Entry:
    path: Path
    level: int | None
    pid: int | None
    key: str  # unique, filesystem- and campaign-name-safe

    @property
    def name(self) -> str:
        return self.path.stem


def _level_and_id(path: Path) -> tuple[int | None, int | None]:
    m = _LEVEL_PREFIX.match(path.name)
    if m:
        return int(m.group(1)), int(m.group(2))
    level = None
    for part in reversed(path.parent.parts):
        d = _LEVEL_DIR.search(part)
        if d:
            level = int(d.group(1))
            break
    m = _ID.match(path.name)
    return level, int(m.group(1)) if m else None


def _key(path: Path, level: int | None) -> str:
    stem = re.sub(r"[^A-Za-z0-9_.-]", "_", path.stem)
    return stem if level is None or stem.startswith(f"l{level}_") else f"l{level}-{stem}"


def discover(root: Path, ids: list[int] | None = None, levels: list[int] | None = None) -> list[Entry]:
    """Problem files under ``root`` (recursive), filtered by ``ids``/``levels``; ProblemError if none."""
    root = Path(root).expanduser()
    if not root.is_dir():
        raise ProblemError(f"suite directory not found: {root} (pass a folder of KernelBench-style .py files)")
    out = []
    for path in sorted(root.rglob("*.py")):
        if path.name.startswith(("_", ".")):
            continue
        try:
            load_problem(path)
        except ProblemError:
            continue  # helpers, tests and other files that are not problems
        level, pid = _level_and_id(path.relative_to(root))
        if levels and level not in levels:
            continue
        if ids and pid not in ids:
            continue
        out.append(Entry(path.resolve(), level, pid, _key(path, level)))
    if not out:
        raise ProblemError(f"no KernelBench-style problem in {root} matches (need Model, get_inputs and "
                           "get_init_inputs; check --ids/--levels)")
    return out
