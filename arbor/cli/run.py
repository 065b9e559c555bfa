"""``arbor run``: run (or resume) a campaign, with progress lines or a JSON log."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from .common import JsonOpt, err, fail, out, print_json, user_errors


def run(spec_path: Path = typer.Argument(..., help="campaign YAML"),
        max_evaluations: Optional[int] = typer.Option(None, help="override budget.max_evaluations"),
        max_wall_s: Optional[float] = typer.Option(None, help="override budget.max_wall_s"),
        store_url: Optional[str] = typer.Option(None, "--store", help="override the store URL"),
        workers: Optional[int] = typer.Option(None, "--workers", min=1, help="override executor.workers: "
                                              "measurements in flight at once, one device (GPU or cores) each"),
        quiet: bool = typer.Option(False, "--quiet", "-q", help="only the final summary"),
        json_log: Optional[Path] = typer.Option(None, "--json-log", help="also write every event as JSON lines to this file"),
        save_result: Optional[Path] = typer.Option(None, "--save-result", metavar="FILE", help="write the summary as JSON (serving: per load level TTFT/TPOT/ITL mean, median, p99, throughput, goodput, failures)"),
        restart: bool = typer.Option(False, "--restart", help="the spec/problem/skills changed: archive the old nodes and start again under the same name"),
        fork: Optional[str] = typer.Option(None, "--fork", metavar="NEW", help="the spec/problem/skills changed: run as a new campaign NEW beside the old one"),
        json_out: bool = JsonOpt) -> None:
    """Run (or resume) a campaign until its budget or a stop condition.

    Exit codes: 0 finished with a result, 1 the campaign failed (baseline failed or unstable,
    nothing valid) or changed since it was measured, 2 bad input, 130 interrupted."""
    from arbor.campaign.changes import CampaignChanged
    from arbor.campaign.run_guard import signals_interrupt
    from arbor.search_tree.store import CampaignBusy

    from .terminal import Reporter, print_summary

    stop_signals: list[int] = []  # filled by the handler: held before any signal can land
    guard = signals_interrupt(stop_signals)
    try:
        guard.__enter__()  # from here on SIGTERM/SIGHUP are a clean stop, like Ctrl-C
        from arbor.campaign.run import run_campaign
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
        if workers is not None:
            spec.executor = spec.executor.model_copy(update={"workers": workers})
        from arbor.targets import make_adapter

        from .load_notice import load_notice

        busy = None if (quiet or json_out) else load_notice(getattr(spec.target, "num_threads", None))
        if busy:
            make_adapter(spec).validate()  # a bad campaign file gets its one-line error, not this note first
            err.print(busy)
        from arbor.campaign.source import evaluations_done
        from .jsonlog import JsonLog, tee

        silent = quiet or json_out
        reporter = Reporter(out, quiet=silent, total=spec.budget.max_evaluations,
                            done=0 if silent else evaluations_done(spec.store_url(), spec.name))
        log = JsonLog(json_log, spec.name) if json_log else None
        try:
            if log:
                log.write("run_started", {"store": spec.store_url(), "budget": spec.budget.model_dump()})
            with reporter:
                summary = run_campaign(spec, tee(reporter, log) if log else reporter, restart=restart, fork=fork)
            if log:
                log.write("run_finished", summary.to_dict())
        except KeyboardInterrupt:
            if log:
                log.write("run_interrupted", {})
            raise
        finally:
            if log:
                log.close()
    except CampaignBusy as exc:  # not a mistake in the command: another run holds the campaign
        err.print(f"[bold red]error:[/] {exc}", markup=True)
        raise typer.Exit(1)
    except user_errors() as exc:
        fail(exc, json_out=json_out)
    except CampaignChanged as exc:
        fail(exc, code=1, json_out=json_out)
    except KeyboardInterrupt:
        import signal

        by = f"stopped by {signal.Signals(stop_signals[0]).name}" if stop_signals else "interrupted"
        err.print(f"{by} — everything measured so far is stored; run the same command to resume")
        raise typer.Exit(128 + stop_signals[0] if stop_signals else 130)
    finally:
        guard.__exit__(None, None, None)
    if save_result is not None:
        import json

        save_result.write_text(json.dumps(summary.to_dict(), indent=2, default=str) + "\n")
    if json_out:
        print_json(summary.to_dict())
    else:
        print_summary(out, summary)
        if summary.failed:
            err.print(f"campaign failed: {summary.failed}")
    if summary.failed:
        raise typer.Exit(1)
