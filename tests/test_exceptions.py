"""Errors cross process boundaries (suite workers, the Ray executor, the fork server): each must
arrive as it was raised, or the one-line message a user sees turns into garbage or a TypeError."""

from __future__ import annotations

import ast
import pickle
from pathlib import Path

from arbor.agents.skills import SkillError
from arbor.sandbox.serving.lifecycle import ServerStartError
from arbor.spec.base import SpecError

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("arbor", "agents", "sandbox", "search_tree")


def test_errors_with_their_own_arguments_survive_pickling():
    spec = pickle.loads(pickle.dumps(SpecError(["name: bad — use letters", "budget: negative — use > 0"])))
    assert spec.problems == ["name: bad — use letters", "budget: negative — use > 0"]
    assert str(spec) == "name: bad — use letters\nbudget: negative — use > 0"
    skill = pickle.loads(pickle.dumps(SkillError("s.md", "moves", "no id", "add one")))
    assert (skill.path, skill.field, skill.fix, str(skill)) == ("s.md", "moves", "add one", "s.md: moves: no id — add one")
    server = pickle.loads(pickle.dumps(ServerStartError("oom", "CUDA out of memory", "tail")))
    assert (server.error_class, str(server), server.log_tail) == ("oom", "CUDA out of memory", "tail")


def test_every_error_with_its_own_init_says_how_to_pickle_it():
    """The default pickling rebuilds an exception from ``args`` (its message): an ``__init__`` with
    other parameters needs a ``__reduce__``."""
    missing = []
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if not isinstance(node, ast.ClassDef):
                    continue
                bases = [ast.unparse(b) for b in node.bases]
                if not any(b.endswith(("Error", "Exception")) for b in bases):
                    continue
                methods = {f.name for f in node.body if isinstance(f, ast.FunctionDef)}
                if "__init__" in methods and "__reduce__" not in methods:
                    missing.append(f"{path.relative_to(ROOT)}: {node.name}")
    assert not missing, missing


def test_the_harness_and_store_errors_keep_their_fields():
    from arbor.sandbox.runners.forkserver import ExtraFailed
    from arbor.sandbox.harness.kernel_checks import Failure
    from arbor.search_tree.store import DuplicateArtifact

    extra = pickle.loads(pickle.dumps(ExtraFailed("import failed", True)))
    assert (str(extra), extra.unsafe) == ("import failed", True)
    failure = pickle.loads(pickle.dumps(Failure("oom", "out of memory")))
    assert (failure.error_class, failure.text) == ("oom", "out of memory")
    assert pickle.loads(pickle.dumps(DuplicateArtifact(7))).node_id == 7
