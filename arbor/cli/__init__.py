"""The ``arbor`` command line: the typer app and ``main`` (the console script); every command
is registered here, explicitly, in the order ``--help`` lists them.

* ``common``   — consoles, the one-line error exit, JSON output, the campaign argument;
* ``run``, ``read`` (history/tree/show/best/query), ``views`` (dashboard/report/export),
  ``doctor``, ``skills``, ``record``, ``knowledge`` (+ ``calibration``) — one module per command group;
* ``terminal`` — progress lines and tables; ``history`` — the read-side rows; ``jsonlog`` — ``--json-log``;
* ``doctor_checks`` (+ ``doctor_gpu``, ``doctor_row``) — what ``arbor doctor`` checks; ``logs`` —
  library log records as one line.
"""

from __future__ import annotations

import typer

from . import best, campaigns, candidates, compare, doctor, knowledge, read, record, redteam, run, skills, suite, views
from .common import fail, user_errors
from .logs import one_line_library_logs, one_line_unraisable

__all__ = ["app", "main"]

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Arbor: autonomous optimization of GPU/CPU kernels and serving configs.")


def _version(value: bool) -> None:
    if value:
        from arbor import __version__

        typer.echo(f"arbor {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                       help="print the version and exit")) -> None:
    """Arbor: autonomous optimization of GPU/CPU kernels and serving configs."""
    one_line_library_logs()

app.command()(run.run)
for command in (read.history, read.tree, read.show, best.best, read.query,
                views.dashboard, views.report, views.export, doctor.doctor):
    app.command()(command)
app.command()(compare.compare)
app.command("eval")(candidates.eval_)
app.command()(candidates.enqueue)
app.command()(candidates.retry)
app.add_typer(campaigns.campaigns_app, name="campaigns")
app.add_typer(skills.skills_app, name="skills")
app.add_typer(knowledge.knowledge_app, name="knowledge")
app.command()(knowledge.calibration)
app.command()(record.record)
app.command()(suite.suite)
app.command()(redteam.redteam)


def main() -> None:
    from arbor.campaign.run_guard import forget_caught_interrupt

    one_line_unraisable()
    try:
        app()
    except user_errors() as exc:  # pragma: no cover - commands catch their own
        fail(exc)
    finally:
        forget_caught_interrupt()
