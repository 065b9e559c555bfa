"""One candidate at a time: ``arbor eval`` (measure a file against a problem now), ``arbor
enqueue`` (measure a file as a node of a campaign on its next run), ``arbor retry`` (measure a
node rejected as unstable again)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from .common import JsonOpt, err, fail, out, print_json, user_errors

SpecOpt = typer.Option(None, "--spec", help="campaign YAML whose measurement, Critic and target settings to use")


def eval_(problem: Path = typer.Argument(..., help="KernelBench-format problem file (Model, get_inputs)"),
          candidate: Path = typer.Argument(..., help="candidate file defining ModelNew"),
          spec_path: Optional[Path] = SpecOpt, json_out: bool = JsonOpt) -> None:
    """Measure one candidate against a problem: compiled? correct? speedup with CI, the Critic's verdict.

    Exit codes: 0 accepted, 1 not accepted (or the baseline failed), 2 bad input."""
    from arbor.spec import SpecError, load_spec

    try:
        for p in (problem, candidate):
            if not p.is_file():
                raise SpecError([f"file not found: {p} — check the path"])
        base = load_spec(spec_path) if spec_path else None
        if base is not None and base.target.kind != "kernel":
            raise SpecError([f"{spec_path}: arbor eval measures kernels; this campaign's target is {base.target.kind}"])
        from arbor.campaign.evaluate import evaluate

        res = evaluate(problem, candidate, base)
    except user_errors() as exc:
        fail(exc, json_out=json_out)
    except KeyboardInterrupt:
        err.print("interrupted")
        raise typer.Exit(130)
    if json_out:
        print_json(res)
    else:
        print_eval(res)
    raise typer.Exit(0 if res["decision"] == "accept" else 1)


def print_eval(res: dict) -> None:
    yn = {True: "yes", False: "no", None: "—"}
    out.print(f"compiled   {yn[res['compiled']]}")
    out.print(f"correct    {yn[res['correct']]}")
    if res["speedup"] is not None:
        ci = f"  95% CI [{res['ci'][0]:.3f}, {res['ci'][1]:.3f}]" if res["ci"] else ""
        how = " (median of the final verification)" if res["verified"] else ""
        out.print(f"speedup    {res['speedup']:.3f}x{ci}{how}")
    if res["baseline_s"] and res["candidate_s"]:
        out.print(f"time       {res['baseline_s'] * 1e3:.3f} ms → {res['candidate_s'] * 1e3:.3f} ms")
    out.print(f"verdict    {res['decision']} / {res['diagnosis']}: {res['reason']}")
    if res["baseline_failed"]:
        out.print(f"[red]the baseline itself failed: {res['baseline_failed']}[/]", markup=True)


def _campaign_write(spec_path: Path):
    from arbor.campaign.enqueue import open_for_write
    from arbor.spec import load_spec

    return open_for_write(load_spec(spec_path))


def enqueue(spec_path: Path = typer.Argument(..., help="campaign YAML"),
            file: Path = typer.Argument(..., help="your candidate (ModelNew source, or a config JSON)"),
            parent: Optional[int] = typer.Option(None, "--parent", help="parent node (default: the baseline)"),
            json_out: bool = JsonOpt) -> None:
    """Add your own candidate to a campaign: it is measured as a node of the tree on the next run."""
    from arbor.campaign.changes import CampaignChanged
    from arbor.campaign.enqueue import enqueue as add
    from arbor.spec import SpecError

    try:
        if not file.is_file():
            raise SpecError([f"file not found: {file} — check the path"])
        store, camp, target = _campaign_write(spec_path)
        try:
            node = add(store, camp, target, file.read_text(encoding="utf-8"), file.name, parent)
        finally:
            store.close()
    except user_errors() + (CampaignChanged,) as exc:
        fail(exc, json_out=json_out)
    if json_out:
        print_json({"node": node.id, "parent": node.parent_id, "campaign": camp.name})
    else:
        out.print(f"node {node.id} queued under node {node.parent_id}; `arbor run {spec_path}` measures it")


def retry(node: int = typer.Argument(..., help="node rejected as unstable"),
          spec_path: Path = typer.Argument(..., help="campaign YAML"), json_out: bool = JsonOpt) -> None:
    """Measure a node rejected as unstable again (as a new node; the old verdict stays)."""
    from arbor.campaign.changes import CampaignChanged
    from arbor.campaign.retry_node import retry as again

    try:
        store, camp, target = _campaign_write(spec_path)
        try:
            new = again(store, camp, target, node)
        finally:
            store.close()
    except user_errors() + (CampaignChanged,) as exc:
        fail(exc, json_out=json_out)
    if json_out:
        print_json({"node": new.id, "retries": node, "campaign": camp.name})
    else:
        out.print(f"node {new.id} queued to measure node {node} again; `arbor run {spec_path}` measures it")
