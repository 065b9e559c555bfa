"""``arbor best``: the winner, ready to use — written with a header that says where it came
from and how to check it again, or an honest "no win" when nothing beat the baseline."""

from __future__ import annotations

import hashlib
from contextlib import closing
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Optional

import typer

from .common import CampaignArg, CampaignOpt, JsonOpt, err, fail, out, print_json, user_errors


@dataclass
class Winner:
    campaign: str
    kind: str
    node: int | None
    speedup: float | None
    ci: tuple[float, float] | None
    verified: bool
    source: str | None
    problem: str | None  # the problem file, when the campaign file says where it is
    node_speedup: float | None = None  # the node's Critic value (what history/tree/show give)


def find_winner(store, camp, problem: str | None) -> Winner:
    from arbor.campaign.final_best import final_best
    from arbor.campaign.run import _accepted_stats

    final = final_best(store, camp.id)  # the node and number every other surface shows
    node, speedup, is_verified = final.node, final.speedup, final.verified
    if node is None or node.parent_id is None:  # the baseline is not a win
        return Winner(camp.name, camp.kind, None, None, None, False, None, problem)
    from arbor.campaign.one_number import paired_estimate

    # the CI of the same estimate as the number: for a verified median, the paired measurement
    # whose ratio it is; otherwise the Critic's own interval of its value
    est = paired_estimate(store, node.id, speedup) if speedup and is_verified else None
    stats = _accepted_stats(store, node.id) or {}
    ci = est[2] if est else ((stats["ci_low"], stats["ci_high"]) if stats.get("ci_low") is not None else None)
    return Winner(camp.name, camp.kind, node.id, speedup, ci, is_verified,
                  store.get_artifact(node.artifact_sha), problem, node.speedup)


def header(w: Winner, output: Path, spec_file: str | None) -> str:
    """A comment block for Python artifacts (a JSON config takes no comments: written as is)."""
    ci = f" (95% CI [{w.ci[0]:.3f}, {w.ci[1]:.3f}])" if w.ci else ""
    how = (f"median of the final verification (Critic value {w.node_speedup:.3f}x)" if w.verified and w.node_speedup
           else "median of the final verification" if w.verified else "Critic-accepted")
    check = (f"arbor eval {w.problem} {output}" + (f" --spec {spec_file}" if spec_file else "")) if w.problem \
        else f"arbor best {spec_file or 'CAMPAIGN.yaml'} --check"
    sha = hashlib.sha256(w.source.encode()).hexdigest()
    return (f"# arbor best: campaign {w.campaign}, node {w.node}\n"
            f"# speedup {w.speedup:.3f}x{ci}, {how}\n"
            f"# artifact sha256 {sha}\n"
            f"# written {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}\n"
            f"# re-verify: {check}\n")


def best(target: Optional[str] = CampaignArg, campaign: Optional[str] = CampaignOpt,
         output: Optional[Path] = typer.Option(None, "--output", "-o",
                                               help="where to write it (default best_modelnew.py; with --json only when given)"),
         check: bool = typer.Option(False, "--check", help="measure it again now (arbor eval) against the problem"),
         json_out: bool = JsonOpt) -> None:
    """Write the campaign's winner (the final verification's, once there is one) with a header.

    Exit code 1 when no candidate beat the baseline."""
    from arbor.campaign.source import open_campaign

    try:
        source, store, camp = open_campaign(target, campaign)
        with closing(store):
            problem = _problem(source, camp)
            w = find_winner(store, camp, problem)
    except user_errors() as exc:
        fail(exc, json_out=json_out)
    if w.node is None:
        msg = f"campaign {camp.name}: no candidate beat the baseline yet — nothing written"
        print_json({"campaign": camp.name, "node": None, "speedup": None, "error": msg}) if json_out \
            else err.print(msg)
        raise typer.Exit(1)
    path = output if output is not None else (None if json_out else Path("best_modelnew.py"))
    if path is not None:
        # a Python artifact carries its provenance as comments; a JSON config takes none
        text = header(w, path, source.spec_file) + w.source if path.suffix == ".py" else w.source
        path.write_text(text)
    info = {"campaign": w.campaign, "node": w.node, "speedup": w.speedup, "ci": list(w.ci) if w.ci else None,
            "verified": w.verified, "node_speedup": w.node_speedup, "path": str(path.resolve()) if path else None}
    if check:
        info["check"] = _check(w, source.spec_file, path)
    if json_out:
        print_json(info)
    else:
        ci = f" [{w.ci[0]:.3f}, {w.ci[1]:.3f}]" if w.ci else ""
        critic = f", Critic value {w.node_speedup:.3f}x" if w.verified and w.node_speedup else ""
        out.print(f"node {w.node} ({w.speedup:.3f}x{ci}, {'verified' if w.verified else 'Critic-accepted'}{critic})"
                  + (f" written to {path}" if path else ""))
        if check:
            from .candidates import print_eval

            print_eval(info["check"])
    if check and info["check"]["decision"] != "accept":
        raise typer.Exit(1)


def _problem(source, camp) -> str | None:
    """The problem file: resolved against the campaign file when given one, else as stored."""
    problem = ((camp.spec or {}).get("target") or {}).get("problem")
    if not problem:
        return None
    if source.spec_file:
        from arbor.spec import load_spec

        return str(load_spec(source.spec_file).problem_path())
    return problem if Path(problem).is_absolute() else None


def _check(w: Winner, spec_file: str | None, path: Path | None) -> dict:
    import tempfile

    from arbor.campaign.evaluate import evaluate
    from arbor.spec import load_spec

    if w.kind != "kernel" or not w.problem:
        fail(ValueError("--check re-measures kernels and needs the campaign file — pass CAMPAIGN.yaml"))
    with tempfile.TemporaryDirectory() as tmp:
        cand = path or Path(tmp) / "best.py"
        if path is None:
            cand.write_text(w.source)
        return evaluate(Path(w.problem), cand, load_spec(spec_file) if spec_file else None)
