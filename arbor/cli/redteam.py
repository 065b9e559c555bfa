"""``arbor redteam PROBLEM.py``: hostile candidates generated against the Critic, and honest twins.

Exit codes: 0 when no hostile variant was accepted or stopped only by a noise gate (``unstable``,
``env_drift``: a quieter machine could let it through) and no honest twin was flagged, 1 otherwise,
2 on bad input."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

import typer

from .common import JsonOpt, err, fail, out, print_json, user_errors


def _split(values: Optional[list[str]]) -> list[str] | None:
    if not values:
        return None
    return [x.strip() for v in values for x in v.split(",") if x.strip()]


def redteam(problem: Path = typer.Argument(..., help="KernelBench-format problem file (Model, get_inputs)"),
            seed: int = typer.Option(0, "--seed", help="the same seed writes the same variants"),
            classes: Optional[list[str]] = typer.Option(None, "--classes", help="hack classes to use "
                                                        "(ids from docs/integrity.md, e.g. 7,7b,21; default all)"),
            disguises: Optional[list[str]] = typer.Option(None, "--disguises", help="disguises to use "
                                                          "(default all; see docs/integrity.md#red-team)"),
            per_combo: int = typer.Option(2, "--per-combo", min=1, help="payloads per class and disguise"),
            twins: int = typer.Option(2, "--twins", min=0, help="honest twins per class"),
            workers: int = typer.Option(1, "--workers", min=1, help="measurement batches side by side"),
            spec_path: Optional[Path] = typer.Option(None, "--spec", help="campaign YAML whose measurement, "
                                                     "Critic, target and LLM settings to use"),
            llm: Optional[str] = typer.Option(None, "--llm", help="OpenAI-compatible base URL: an LLM red team "
                                              "writes more variants from the Critic's verdicts"),
            llm_model: Optional[str] = typer.Option(None, "--llm-model", help="model name for --llm"),
            llm_key_env: Optional[str] = typer.Option(None, "--llm-key-env", help="NAME of the env variable "
                                                      "holding the --llm key"),
            llm_variants: int = typer.Option(6, "--llm-variants", min=1, help="variants the LLM writes"),
            out_dir: Optional[Path] = typer.Option(None, "-o", "--out", help="write redteam.json, the variants' "
                                                   "sources, escapes in corpus format and the store here"),
            json_out: bool = JsonOpt) -> None:
    """Generate hostile variants of PROBLEM for every hack class and disguise, plus honest twins,
    run them through `arbor eval`'s path and report attack success and false positives."""
    from arbor.spec import SpecError, load_spec

    try:
        if not problem.is_file():
            raise SpecError([f"file not found: {problem} — check the path"])
        base = load_spec(spec_path) if spec_path else None
        if base is not None and base.target.kind != "kernel":
            raise SpecError([f"{spec_path}: arbor redteam attacks kernel problems; this campaign's target is "
                             f"{base.target.kind}"])
        from arbor.redteam import session

        client = session.llm_client(base, llm, llm_model, llm_key_env, seed)
        progress = None if json_out else (lambda v, what: err.print(f"  {v.id}: {what}", highlight=False))
        t0 = time.monotonic()
        summary = session.run(problem, seed=seed, classes=_split(classes), disguises=_split(disguises),
                              per_combo=per_combo, twins=twins, workers=workers, base=base,
                              # absolute: the store's URL is resolved against it again (`-o rt` wrote rt/rt/)
                              out_dir=out_dir.resolve() if out_dir is not None else None,
                              client=client, llm_variants=llm_variants, progress=progress)
    except user_errors() as exc:
        fail(exc, json_out=json_out)
    except (KeyError, ValueError) as exc:
        fail(SpecError([f"{exc}".strip("'") + " — see `arbor redteam --help`"]), json_out=json_out)
    except KeyboardInterrupt:
        err.print("interrupted")
        raise typer.Exit(130)
    if json_out:
        print_json({k: v for k, v in summary.items() if k != "variants"} | {"variants": summary["variants"]})
    else:
        from arbor.redteam.report import render

        render(summary, out)
        if out_dir is not None:
            out.print(f"wrote {out_dir / 'redteam.json'} ({time.monotonic() - t0:.0f} s)")
    clean = summary["accepted"] == 0 and summary["false_positives"] == 0 and summary["stopped_by_noise"] == 0
    raise typer.Exit(0 if clean else 1)
