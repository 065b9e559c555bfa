"""The ``arbor`` command line (typer). Every user mistake ends in one line per problem on
stderr and exit code 2 — never a traceback."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from arbor.search_tree.store import StoreError

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Arbor: autonomous optimization of GPU/CPU kernels and serving configs.")
out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)


def _user_errors() -> tuple[type[BaseException], ...]:
    from arbor.agents.skills import SkillError
    from arbor.sandbox.problem import ProblemError
    from arbor.sandbox.runner import SandboxError
    from arbor.search_tree.store import StoreError
    from arbor.spec import SpecError

    return (SpecError, ProblemError, SkillError, StoreError, SandboxError)


def _fail(exc: BaseException) -> None:
    for line in str(exc).splitlines() or [type(exc).__name__]:
        err.print(f"[bold red]error:[/] {line}", markup=True)
    raise typer.Exit(2)


def _open(target: Optional[str], campaign: Optional[str]):
    """A campaign YAML, a SQLAlchemy URL or a .db path -> (store, campaign record)."""
    from arbor.history import resolve_campaign
    from arbor.search_tree.store import open_store
    from arbor.spec import load_spec

    if target is None:
        target = "arbor.db"
        if not Path(target).exists():
            raise StoreError("no arbor.db here — name a campaign YAML or a store URL")
    if target.endswith((".yaml", ".yml")):
        spec = load_spec(target)
        store = open_store(spec.store_url())
        return store, resolve_campaign(store, campaign or spec.name)
    url = target if "://" in target else f"sqlite:///{Path(target).resolve()}"
    if "://" not in target and not Path(target).exists():
        raise StoreError(f"store not found: {target} — pass the campaign YAML or the arbor.db beside it")
    store = open_store(url)
    return store, resolve_campaign(store, campaign)


def _json(obj) -> None:
    sys.stdout.write(json.dumps(obj, indent=2, default=str) + "\n")


CampaignArg = typer.Argument(None, help="campaign YAML, store URL, or arbor.db path")
CampaignOpt = typer.Option(None, "--campaign", "-c", help="campaign name when the store holds several")
JsonOpt = typer.Option(False, "--json", help="machine-readable output")


@app.command()
def run(spec_path: Path = typer.Argument(..., help="campaign YAML"),
        max_evaluations: Optional[int] = typer.Option(None, help="override budget.max_evaluations"),
        max_wall_s: Optional[float] = typer.Option(None, help="override budget.max_wall_s"),
        store_url: Optional[str] = typer.Option(None, "--store", help="override the store URL"),
        quiet: bool = typer.Option(False, "--quiet", "-q", help="only the final summary"),
        json_log: Optional[Path] = typer.Option(None, "--json-log", help="also write every event as JSON lines to this file"),
        json_out: bool = JsonOpt) -> None:
    """Run (or resume) a campaign until its budget or a stop condition."""
    from arbor.reporting import Reporter, print_summary

    try:
        from arbor.campaign import run_campaign
        from arbor.spec import load_spec

        spec = load_spec(spec_path)
        updates = {}
        if max_evaluations is not None:
            updates["max_evaluations"] = max_evaluations
        if max_wall_s is not None:
            updates["max_wall_s"] = max_wall_s
        if updates:
            spec.budget = spec.budget.model_copy(update=updates)
        if store_url:
            spec.store.url = store_url
        from arbor.dashboard.source import evaluations_done
        from arbor.jsonlog import JsonLog, tee

        silent = quiet or json_out
        reporter = Reporter(out, quiet=silent, total=spec.budget.max_evaluations,
                            done=0 if silent else evaluations_done(spec.store_url(), spec.name))
        log = JsonLog(json_log, spec.name) if json_log else None
        try:
            if log:
                log.write("run_started", {"store": spec.store_url(), "budget": spec.budget.model_dump()})
            with reporter:
                summary = run_campaign(spec, tee(reporter, log) if log else reporter)
            if log:
                log.write("run_finished", summary.to_dict())
        except KeyboardInterrupt:
            if log:
                log.write("run_interrupted", {})
            raise
        finally:
            if log:
                log.close()
    except _user_errors() as exc:
        _fail(exc)
    except KeyboardInterrupt:
        err.print("interrupted — everything measured so far is stored; run the same command to resume")
        raise typer.Exit(130)
    if json_out:
        _json(summary.to_dict())
    else:
        print_summary(out, summary)


@app.command()
def history(target: Optional[str] = CampaignArg, campaign: Optional[str] = CampaignOpt,
            json_out: bool = JsonOpt) -> None:
    """Every node of the campaign in creation order."""
    from arbor.history import history as rows_of
    from arbor.reporting import history_table

    try:
        store, camp = _open(target, campaign)
        rows = rows_of(store, camp.id)
    except _user_errors() as exc:
        _fail(exc)
    if json_out:
        _json(rows)
    else:
        out.print(history_table(rows, camp.name))


@app.command()
def tree(target: Optional[str] = CampaignArg, campaign: Optional[str] = CampaignOpt,
         json_out: bool = JsonOpt) -> None:
    """The hypothesis tree, best path marked with ★."""
    from arbor.history import node_row, tree_lines
    from arbor.reporting import print_tree

    try:
        store, camp = _open(target, campaign)
        lines = tree_lines(store, camp.id)
    except _user_errors() as exc:
        _fail(exc)
    if json_out:
        _json([{**node_row(n), "indent": d, "best_path": p} for d, n, p in lines])
    else:
        print_tree(out, lines)


@app.command()
def show(node: int = typer.Argument(..., help="node id"), target: Optional[str] = CampaignArg,
         campaign: Optional[str] = CampaignOpt, json_out: bool = JsonOpt) -> None:
    """One node: hypothesis, diff against its parent, samples and verdicts."""
    from arbor.history import show as show_node
    from arbor.reporting import print_node

    try:
        store, _ = _open(target, campaign)
        data = show_node(store, node)
    except _user_errors() as exc:
        _fail(exc)
    if json_out:
        _json(data)
    else:
        print_node(out, data)


@app.command()
def best(target: Optional[str] = CampaignArg, campaign: Optional[str] = CampaignOpt,
         output: Path = typer.Option(Path("best_modelnew.py"), "--output", "-o", help="where to write it"),
         json_out: bool = JsonOpt) -> None:
    """Write the best accepted ModelNew source (the final verification's, once there is one) to a file."""
    from arbor.steps import best_node
    from arbor.verify import final_verification

    try:
        store, camp = _open(target, campaign)
        verified = final_verification(store, camp.id)
        if verified and verified.get("best") is not None:
            node, speedup = store.get_node(verified["best"]), verified["speedup"]
        else:
            node = best_node(store.nodes(camp.id))
            speedup = node.speedup if node is not None else None
        if node is None:
            raise StoreError("no accepted node yet — let the campaign run first")
        output.write_text(store.get_artifact(node.artifact_sha))
    except _user_errors() as exc:
        _fail(exc)
    info = {"node": node.id, "speedup": speedup, "verified": bool(verified and verified.get("best")),
            "path": str(output.resolve())}
    if json_out:
        _json(info)
    else:
        out.print(f"node {node.id} ({(speedup or 1.0):.3f}x) written to {output}")


@app.command()
def query(sql: str = typer.Argument(..., help="one read-only SELECT statement"),
          target: Optional[str] = typer.Option(None, "--store", "-s", help="campaign YAML, store URL or arbor.db"),
          json_out: bool = JsonOpt) -> None:
    """Read-only SQL over the store (tables: campaigns, nodes, artifacts, measurements, verdicts, events, leases)."""
    from arbor.reporting import query_table
    from arbor.search_tree.store import open_store
    from arbor.spec import load_spec

    try:
        if target and target.endswith((".yaml", ".yml")):
            url = load_spec(target).store_url()
        else:
            t = target or "arbor.db"
            if "://" not in t and not Path(t).exists():
                raise StoreError(f"store not found: {t} — pass --store CAMPAIGN.yaml or a store URL")
            url = t if "://" in t else f"sqlite:///{Path(t).resolve()}"
        cols, rows = open_store(url).read_only_query(sql)
    except _user_errors() as exc:
        _fail(exc)
    if json_out:
        _json([dict(zip(cols, r)) for r in rows])
    else:
        out.print(query_table(cols, rows))


# Command groups that live in their own modules register themselves on ``app`` when imported.
# A module that is not there yet is skipped; an import error *inside* one is a bug and surfaces.
OPTIONAL_COMMAND_MODULES = ("arbor.cli_dashboard", "arbor.cli_doctor", "arbor.cli_skills", "arbor.cli_record",
                            "arbor.cli_suite")


def _register_optional_commands() -> None:
    import importlib

    for name in OPTIONAL_COMMAND_MODULES:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise


_register_optional_commands()


def main() -> None:
    try:
        app()
    except _user_errors() as exc:  # pragma: no cover - commands catch their own
        _fail(exc)


if __name__ == "__main__":
    main()
