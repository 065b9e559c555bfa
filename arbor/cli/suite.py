"""``arbor suite DIR``: one campaign per KernelBench-style problem file, compared side by side."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from .common import JsonOpt, fail, out, print_json, user_errors


def _ints(text: Optional[str], what: str) -> list[int] | None:
    if not text:
        return None
    try:
        return [int(x) for x in text.replace(" ", "").split(",") if x]
    except ValueError:
        raise typer.BadParameter(f"{what} must be comma-separated integers, e.g. 1,2,19") from None


def suite(directory: Path = typer.Argument(..., help="folder of KernelBench-style problem files (searched recursively)"),
          output: Path = typer.Option(Path("arbor_suite"), "--out", "-o", help="results folder (resumable)"),
          ids: Optional[str] = typer.Option(None, "--ids", help="only these problem ids, e.g. 1,19,23"),
          levels: Optional[str] = typer.Option(None, "--levels", help="only these levels, e.g. 1,2"),
          budget: int = typer.Option(12, "--budget", min=1, help="evaluations per problem"),
          time_target_ms: float = typer.Option(20.0, "--time-target-ms", min=0.1,
                                               help="scale each problem so its eager reference takes about this"),
          max_wall_s: Optional[float] = typer.Option(None, "--max-wall-s", help="wall-clock budget per campaign"),
          max_cv: float = typer.Option(0.15, "--max-cv", min=0.01, help="critic.max_cv of each campaign (noise gate)"),
          device: str = typer.Option("cpu", "--device", help="cpu or cuda: where every campaign runs"),
          scale: Optional[float] = typer.Option(None, "--scale", min=1e-4, max=64.0,
                                                help="one size_scale for every problem instead of calibrating "
                                                     "each (cuda default: 1, the files' own sizes)"),
          precision: str = typer.Option("fp32", "--precision",
                                        help="KernelBench precision mode of every campaign: fp32, fp16 or bf16"),
          json_out: bool = JsonOpt) -> None:
    """Run a campaign per problem; print eager vs torch.compile vs Arbor with fast_p and geomeans."""
    from arbor.suite.run import SuiteOptions, run_suite

    if device not in ("cpu", "cuda"):
        raise typer.BadParameter(f"--device must be cpu or cuda, not {device!r}")
    if precision not in ("fp32", "fp16", "bf16"):
        fail(ValueError(f"--precision {precision!r} is not a precision mode — use fp32, fp16 or bf16"))
    try:
        result = run_suite(SuiteOptions(directory=directory, out=output, ids=_ints(ids, "--ids"),
                                        levels=_ints(levels, "--levels"), budget=budget,
                                        time_target_ms=time_target_ms, max_wall_s=max_wall_s,
                                        max_cv=max_cv, device=device, scale=scale, precision=precision),
                           say=(lambda s: None) if json_out else out.print)
    except user_errors() as exc:
        fail(exc)
    except KeyboardInterrupt:
        out.print("interrupted — finished problems are kept; run the same command to resume")
        raise typer.Exit(130)
    if json_out:
        print_json({k: result[k] for k in ("rows", "summary", "meta", "page")})
    else:
        out.print(result["table"])
        out.print(f"report: {result['page']}")
