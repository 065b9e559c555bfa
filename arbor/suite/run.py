"""Running a suite: calibrate, campaign and compare each problem, resumably.

Everything lands in the output folder: ``calibration.json`` (scale per problem), one campaign YAML
per problem under ``campaigns/`` (open them with ``arbor show``/``arbor tree``), one shared store
``suite.db``, ``suite_results.json`` (a row per finished problem, written after each one) and the
report page. Re-running the same command skips finished problems (except those whose baseline
was too noisy to measure) and resumes an interrupted campaign where it stopped.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import yaml

from ..spec import parse_spec
from .calibrate import CalibrationError, calibrate
from .compare import compare
from .deadline import Deadline
from .discover import Entry, discover
from .collapse import collapse_moves, open_suite_store
from .headroom import reference_headroom
from .page import write_page
from .table import markdown, summary


@dataclass
class SuiteOptions:
    directory: Path
    out: Path
    ids: list[int] | None = None
    levels: list[int] | None = None
    budget: int = 12
    time_target_ms: float = 20.0
    max_wall_s: float | None = None
    seed: int = 0
    max_cv: float = 0.15
    device: str = "cpu"
    # one size_scale for every problem instead of calibrating each (a GPU set is written at its
    # sizes: on cuda the default is 1; the GPU suite's CPU dry run shrinks it)
    scale: float | None = None
    exclude: list[str] = field(default_factory=list)  # skills or move ids the campaigns leave out
    precision: str = "fp32"  # target.precision of every campaign (KernelBench's fp32 | fp16 | bf16)
    family_posterior: bool = True  # False: the ablation benchmarks/generalization.py runs as "before"
    # the whole suite's deadline (deadline.py): a problem's max_wall_s is cut to what is left less
    # compare_s (its compare job), and a problem that would get less than min_problem_s is skipped
    deadline: Deadline | None = None
    compare_s: float = 20.0
    min_problem_s: float = 40.0

    def fixed_scale(self) -> float | None:
        return self.scale if self.scale is not None else (1.0 if self.device == "cuda" else None)


def _read(path: Path, default):  # type: ignore[no-untyped-def]
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return default


def _write(path: Path, data) -> None:  # type: ignore[no-untyped-def]
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str))
    os.replace(tmp, path)


def campaign_dict(entry: Entry, scale: float, opts: SuiteOptions) -> dict:
    return {
        "name": f"suite-{entry.key}",
        "description": f"arbor suite: {entry.path.name} at size_scale {scale}",
        "target": {"kind": "kernel", "problem": str(entry.path), "size_scale": scale, "device": opts.device,
                   "num_threads": 1, "precision": opts.precision},
        "budget": {"max_evaluations": opts.budget, "max_failures_in_row": opts.budget,
                   "max_wall_s": opts.max_wall_s or 60.0 + 75.0 * opts.budget},
        "agents": {"backend": "heuristic", "seed": opts.seed, "policy": "puct",
                   **({} if opts.family_posterior else {"family_posterior": False})},
        "measurement": {"seeds": [0, 1, 2], "warmup_s": 0.2, "time_budget_s": 1.0, "min_repeats": 10},
        "critic": {"max_cv": opts.max_cv, "min_speedup": 1.02},
        "sandbox": {"kind": "local", "timeout_s": 300},
        "store": {"url": "sqlite:///../suite.db"},
        **({"skills": {"exclude": list(opts.exclude)}} if opts.exclude else {}),
    }


BASELINE_RETRIES = 2
RETRY_WAIT_S = 20.0
# A reference whose output a constant would pass at the calibrated size (Softmax over 84k columns:
# 99.6% of its values within atol 1e-4 of their median) stops its campaign at the baseline; the
# suite halves the size until it is not, down to this scale, and says so in the row.
MIN_SCALE = 0.0625


def _baseline_unstable(reason: str | None) -> bool:
    return bool(reason) and reason.startswith("baseline unstable")


def _degenerate(reason: str | None) -> bool:
    return bool(reason) and "degenerate problem" in reason


def _campaign(entry: Entry, scale: float, opts: SuiteOptions, name: str | None, say: Callable[[str], None]):  # type: ignore[no-untyped-def]
    """Run ``entry``'s campaign at ``scale`` (under ``name`` when given); returns (spec, summary,
    attempts)."""
    from arbor.campaign.run import run_campaign

    data = campaign_dict(entry, scale, opts)
    base = data["name"] = name or data["name"]
    camp_dir = opts.out / "campaigns"
    camp_dir.mkdir(parents=True, exist_ok=True)
    for attempt in range(BASELINE_RETRIES + 1):
        # a baseline too noisy to measure (a loaded machine) ends a campaign at once: wait, retry
        # under a fresh name (the stopped campaign stays in the store as evidence)
        if attempt:
            data = {**data, "name": f"{base}-retry{attempt}"}
            say(f"{entry.key}: baseline too noisy, retrying in {RETRY_WAIT_S:.0f} s")
            time.sleep(RETRY_WAIT_S)
        yaml_path = camp_dir / f"{data['name']}.yaml"
        yaml_path.write_text(yaml.safe_dump(data, sort_keys=False))
        spec = parse_spec(data, str(yaml_path), camp_dir)
        summ = run_campaign(spec, lambda kind, payload: None)
        if not _baseline_unstable(summ.stop_reason):
            break
    return spec, summ, attempt + 1


def run_one(entry: Entry, opts: SuiteOptions, calib: dict, say: Callable[[str], None]) -> dict:
    row: dict = {"key": entry.key, "file": str(entry.path), "level": entry.level, "id": entry.pid}
    scale = opts.fixed_scale()
    calibrated = scale is None
    if calibrated:  # on the CPU, where the suite's default campaigns run
        if entry.key not in calib:
            calib[entry.key] = calibrate(entry.path, opts.time_target_ms)
            _write(opts.out / "calibration.json", calib)
        scale = calib[entry.key]["scale"]
    t0 = time.monotonic()
    spec, summ, attempts = _campaign(entry, scale, opts, None, say)
    while _degenerate(summ.stop_reason) and scale * 0.5 >= MIN_SCALE:
        smaller = round(scale * 0.5, 5)
        say(f"{entry.key}: the reference is degenerate at scale {scale} ({summ.stop_reason[:160]}); "
            f"trying scale {smaller}")
        row.setdefault("degenerate_at", []).append(scale)
        scale = smaller
        spec, summ, more = _campaign(entry, scale, opts, f"suite-{entry.key}-s{scale:g}", say)
        attempts += more
        if calibrated:  # a resumed or repeated suite starts from the size that measured
            calib[entry.key] = {**calib[entry.key], "scale": scale,
                                "degenerate_at": row["degenerate_at"]}
            _write(opts.out / "calibration.json", calib)
    row["scale"] = scale
    row["attempts"] = attempts
    row["precision"] = spec.target.precision
    row.update(campaign=spec.name, stop_reason=summ.stop_reason, campaign_speedup=summ.speedup,
               best_node=summ.best_node, verified=bool(summ.verified), counts=summ.counts,
               campaign_s=round(time.monotonic() - t0, 1))
    _annotate(row, spec)
    best_source = Path(summ.best_path).read_text() if summ.best_path and summ.verified else None
    cmp = compare(spec, best_source)
    row.update({k: cmp.get(k) for k in ("eager", "compile", "best", "eager_ms")}, compare_errors=cmp["errors"])
    best = f"best {row['best'] or 0:.2f}x vs eager" if row["verified"] else "no verified improvement"
    say(f"{entry.key}: scale {scale}, {best}, compile {row['compile'] or 0:.2f}x "
        f"({summ.stop_reason}; {row['campaign_s']:.0f} s)")
    return row


def _annotate(row: dict, spec) -> None:  # type: ignore[no-untyped-def]
    """From the suite's store, opened once: the verified win's collapse moves (None when the store
    cannot say) and how far the reference is from its speed of light."""
    with open_suite_store(spec.store_url()) as store:
        if not row["verified"]:
            row["collapse"] = []
        else:
            row["collapse"] = collapse_moves(store, row["best_node"]) if store is not None else None
        row["speed_of_light"] = reference_headroom(store, spec.name) if store is not None else None


def run_suite(opts: SuiteOptions, say: Callable[[str], None] = print,
              on_row: Callable[[list[dict], dict[str, str]], None] | None = None) -> dict:
    """``on_row(rows, skipped)`` after each problem: a caller's own results file, written as it goes."""
    entries = discover(opts.directory, opts.ids, opts.levels)
    opts.out.mkdir(parents=True, exist_ok=True)
    calib = _read(opts.out / "calibration.json", {})
    results_path = opts.out / "suite_results.json"
    done = {r["key"]: r for r in _read(results_path, {}).get("rows", [])}
    rows: list[dict] = []
    skipped: dict[str, str] = {}  # key -> why: never started, so a resumed suite runs it
    for entry in entries:
        if entry.key in done and "error" not in done[entry.key] and not _baseline_unstable(
                done[entry.key].get("stop_reason")):
            rows.append(done[entry.key])
            continue
        run_opts = opts
        if opts.deadline is not None:
            why = opts.deadline.why_not(opts.min_problem_s)
            if why is not None:
                if not skipped:
                    say(f"{entry.key} and the rest: {why}")
                skipped[entry.key] = why
                continue
            run_opts = dataclasses.replace(opts, max_wall_s=opts.deadline.cut(opts.max_wall_s, opts.compare_s))
        try:
            row = run_one(entry, run_opts, calib, say)
        except KeyboardInterrupt:  # Ctrl-C, or a caller's deadline: the results say where it stopped
            _write(results_path, {"rows": list(done.values()), "skipped": skipped, "interrupted": entry.key})
            raise
        except Exception as exc:  # noqa: BLE001 - one problem's failure must not end the suite
            text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            if not isinstance(exc, CalibrationError):
                text = f"{type(exc).__name__}: {text}"
            row = {"key": entry.key, "file": str(entry.path), "level": entry.level, "error": text}
            say(f"{entry.key}: failed: {text}")
        rows.append(row)
        done[entry.key] = row
        _write(results_path, {"rows": list(done.values()), "skipped": skipped})
        if on_row is not None:
            on_row(rows, skipped)
    summ = summary(rows)
    meta = {"dir": str(opts.directory), "budget": opts.budget, "time_target_ms": opts.time_target_ms,
            "max_cv": opts.max_cv, "device": opts.device, "scale": opts.fixed_scale(), "precision": opts.precision,
            "load_avg": [round(x, 2) for x in os.getloadavg()]}
    _write(results_path, {"rows": list(done.values()), "selected": [r["key"] for r in rows], "summary": summ,
                          "meta": meta, "skipped": skipped})
    page = write_page(opts.out, rows, summ, meta)
    return {"rows": rows, "summary": summ, "table": markdown(rows, summ), "page": str(page), "meta": meta,
            "skipped": skipped}
