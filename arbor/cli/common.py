"""What every ``arbor`` command shares: the consoles, the one-line error exit, JSON output and
the campaign argument. Every user mistake ends in one line per problem on stderr and exit code
2 — never a traceback."""

from __future__ import annotations

import json
import sys
from typing import NoReturn

import typer
from rich.console import Console

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)

CampaignArg = typer.Argument(None, help="campaign YAML, store URL, or arbor.db path")
CampaignOpt = typer.Option(None, "--campaign", "-c", help="campaign name when the store holds several")
JsonOpt = typer.Option(False, "--json", help="machine-readable output")


def user_errors() -> tuple[type[BaseException], ...]:
    """The exceptions that mean "the user can fix this": reported in one line, exit 2.

    Evaluated in ``except`` clauses, so it runs while any exception propagates — a Ctrl-C/SIGTERM
    or a ``typer.Exit`` too. An interruption or an exit is never a user error, and importing here
    while one propagates can meet a module the interruption left half-imported (a SIGTERM landing
    inside ``import torch``: the re-import raised "Only a single TORCH_LIBRARY ..." or segfaulted,
    and the clean stop became a traceback — seen in the chaos suite). So: nothing to match then."""
    if isinstance(sys.exc_info()[1], (KeyboardInterrupt, SystemExit)):
        return ()
    from arbor.agents.skills import SkillError
    from arbor.sandbox.kernel.problem import ProblemError
    from arbor.sandbox.runner import SandboxError
    from arbor.search_tree.knowledge import KnowledgeError
    from arbor.search_tree.store import StoreError
    from arbor.spec import SpecError
    from sqlalchemy.exc import SQLAlchemyError

    return (SpecError, ProblemError, SkillError, StoreError, SandboxError, SQLAlchemyError, KnowledgeError)


def fail(exc: BaseException, code: int = 2, json_out: bool = False) -> NoReturn:
    """One line per problem on stderr (or, with --json, one JSON object on stdout), then exit."""
    from arbor.search_tree.sql.errors import store_fault

    exc = store_fault(exc) or exc  # a database error escaping a command: one line, not a traceback
    lines = str(exc).splitlines() or [type(exc).__name__]
    if json_out:
        print_json({"error": lines[0] if len(lines) == 1 else lines, "exit_code": code})
    else:
        for line in lines:
            err.print(f"[bold red]error:[/] {line}", markup=True)
    raise typer.Exit(code)


def print_json(obj) -> None:
    sys.stdout.write(json.dumps(obj, indent=2, default=str) + "\n")
