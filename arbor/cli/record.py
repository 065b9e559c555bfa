"""``arbor record``: measure every point of a campaign's knob space into a landscape file
(``arbor/targets/sweep.py``), for the replay target and the search benchmarks."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from .common import err, fail, out, print_json, user_errors


def record(spec_path: Path = typer.Argument(..., help="campaign YAML of a parametric kernel"),
           output: Path = typer.Option(..., "--output", "-o", help="landscape JSON to write"),
           repeats: int = typer.Option(3, "--repeats", "-n", min=1, max=50, help="measurements per point"),
           name: Optional[str] = typer.Option(None, help="landscape name (default: the file stem)"),
           seed: int = typer.Option(0, help="seed of the measuring order"),
           limit: Optional[int] = typer.Option(None, min=1, help="only the first N points (smoke tests)"),
           max_load: Optional[float] = typer.Option(None, help="shared machine: hold each measurement while the "
                                                    "1-minute load average is above this"),
           max_wait_s: float = typer.Option(120.0, help="longest hold per measurement for --max-load"),
           refresh_policy: bool = typer.Option(False, "--refresh-policy", help="measure nothing: rewrite an existing "
                                               "landscape's moves (ids, priors, families) and Critic settings "
                                               "from the campaign"),
           quiet: bool = typer.Option(False, "--quiet", "-q", help="only the final line"),
           json_out: bool = typer.Option(False, "--json", help="machine-readable summary")) -> None:
    """Measure EVERY point of the campaign's declared knob space, --repeats times each."""
    from arbor.targets.sweep import record as run_record
    from arbor.targets.sweep import refresh_policy as run_refresh
    from arbor.spec import load_spec

    try:
        spec = load_spec(spec_path)
        if refresh_policy:
            ls = run_refresh(spec, output)
            out.print(f"{output}: {len(ls.moves)} moves and the Critic settings refreshed from {spec_path}")
            return
        say = (lambda _line: None) if (quiet or json_out) else (lambda line: err.print(line, markup=False))
        ls = run_record(spec, repeats, output, name=name, seed=seed, progress=say, limit=limit,
                        max_load=max_load, max_wait_s=max_wait_s)
    except user_errors() as exc:
        fail(exc)
    except KeyboardInterrupt:
        err.print(f"interrupted — finished passes are in {output}")
        raise typer.Exit(130)
    ok = [p for p in ls.points if p.speedup is not None]
    best = max(ok, key=lambda p: p.speedup, default=None)
    summary = {"landscape": str(output), "points": len(ls.points), "ok": len(ok), "repeats": repeats,
               "optimum": best.speedup if best else None, "best_knobs": best.knobs if best else None,
               "duration_s": ls.recorded.get("duration_s")}
    if json_out:
        print_json(summary)
    else:
        out.print(f"{len(ok)}/{len(ls.points)} points measured x{repeats} in {summary['duration_s']} s -> {output}; "
                  f"optimum {summary['optimum'] or 0:.3f}x at {summary['best_knobs']}")
