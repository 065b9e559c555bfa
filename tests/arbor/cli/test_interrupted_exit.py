"""An interruption the command handled ends with the exit status the command chose.

Both faults were found by signalling ``arbor run`` at random points of its start-up (the chaos
suite): a SIGTERM landing inside an import. These tests reproduce each one deterministically."""

from __future__ import annotations

import subprocess
import sys

from arbor.cli.common import user_errors


def test_user_errors_imports_nothing_while_an_interrupt_propagates():
    # evaluated in `except user_errors()` clauses: importing there could re-import a module the
    # interrupt left half-imported (torch: "Only a single TORCH_LIBRARY ..." or a segfault)
    try:
        raise KeyboardInterrupt("SIGTERM")
    except user_errors():
        raise AssertionError("an interruption is not a user error")
    except KeyboardInterrupt:
        assert user_errors() == ()
    try:
        raise SystemExit(143)
    except SystemExit:
        assert user_errors() == ()
    assert len(user_errors()) > 3  # otherwise the real list


def test_an_interrupt_caught_inside_exec_does_not_turn_the_exit_into_sigint(tmp_path):
    # CPython flags a KeyboardInterrupt escaping exec(<string>) as unhandled, and `python -m`
    # then dies by SIGINT whatever code it exits with. dataclasses exec()s the __init__ it builds:
    # a SIGTERM landing there, during one of `arbor run`'s imports, made its clean stop (exit 143)
    # a death by SIGINT. Here the interrupt escapes an exec() where the command loads its spec.
    (tmp_path / "interrupted_arbor.py").write_text(
        "import sys\n"
        "import arbor.spec\n"
        "from arbor.cli import main\n"
        "def interrupted(path):\n    exec('raise KeyboardInterrupt')\n"
        "arbor.spec.load_spec = interrupted\n"
        "sys.argv = ['arbor', 'run', 'any.yaml']\n"
        "main()\n")
    r = subprocess.run([sys.executable, "-m", "interrupted_arbor"], cwd=tmp_path, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 130, (r.returncode, r.stderr)  # the command's "interrupted" code, not -SIGINT
    assert "Traceback" not in r.stderr and r.stderr.startswith("interrupted"), r.stderr
