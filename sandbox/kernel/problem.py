"""Load and validate a KernelBench-format problem file without executing it.

A campaign names its problem file; a typo or a non-KernelBench file should fail at ``arbor run``
time with one line that says what to fix, not minutes later inside a sandbox traceback. Validation
is AST-only on purpose: importing the file would run arbitrary module-level code (and allocate
tensors) in the orchestrating process.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Problem", "ProblemError", "load_problem", "REQUIRED_NAMES"]

REQUIRED_NAMES = ("Model", "get_inputs", "get_init_inputs")


class ProblemError(ValueError):
    """A problem file that cannot be used; the message is one line naming the file and the fix."""


@dataclass
class Problem:
    """A validated problem: its resolved path, its source text and a short name (the file stem)."""

    path: Path
    source: str
    name: str


def _top_level_names(tree: ast.Module) -> dict[str, str]:
    """Map top-level names to how they are bound: 'class', 'def', or 'other' (assign/import)."""
    names: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            names[node.name] = "class"
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names[node.name] = "def"
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Name):
                    names.setdefault(t.id, "other")
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                names.setdefault((alias.asname or alias.name).split(".")[0], "other")
    return names


def validate_source(source: str, label: str) -> None:
    """Raise ProblemError unless ``source`` parses and binds Model, get_inputs, get_init_inputs."""
    try:
        tree = ast.parse(source, filename=label)
    except SyntaxError as e:
        msg = (e.msg or "invalid syntax").replace("\n", " ")
        raise ProblemError(
            f"problem {label} has a syntax error at line {e.lineno}: {msg} (fix the file)"
        ) from None
    except ValueError as e:  # e.g. null bytes
        raise ProblemError(f"problem {label} cannot be parsed: {e} (fix the file)") from None
    names = _top_level_names(tree)
    if "Model" not in names:
        raise ProblemError(
            f"problem {label} defines no `class Model` — a KernelBench problem needs Model, "
            "get_inputs and get_init_inputs"
        )
    for fn in ("get_inputs", "get_init_inputs"):
        if fn not in names:
            raise ProblemError(
                f"problem {label} defines no `{fn}()` — a KernelBench problem needs Model, "
                "get_inputs and get_init_inputs"
            )


def load_problem(path: str | Path) -> Problem:
    """Read and validate a problem file; every failure is a ProblemError with a one-line message."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise ProblemError(
            f"problem file not found: {p} (check target.problem in the campaign, relative paths "
            "are from the campaign file's folder)"
        )
    try:
        source = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ProblemError(f"problem file {p} cannot be read as UTF-8 text: {e}") from None
    validate_source(source, str(p))
    return Problem(path=p.resolve(), source=source, name=p.stem)
