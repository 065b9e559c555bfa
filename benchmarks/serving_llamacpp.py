"""Baseline vs the Critic-verified best of a real engine (llama.cpp + SmolLM2-135M), beside the
bundled tiny_lm server's campaign: the gain and how much it moves from one repeat to the next.

Each campaign runs once to find its verified best configuration (or ``--best-*`` gives one);
then the best and the defaults are measured against each other ``--repeats`` more times, each an
independent interleaved A/B measurement (fresh servers, the campaign's load and rounds). The
gain of a repeat is the candidate/baseline ratio of the campaign's objective (requests/s under
the SLO); the spread is max − min of the repeats' gains in percentage points. A shared machine
moves both sides of a round alike, which the paired ratio cancels; its load is recorded.

    python -m benchmarks.serving_llamacpp                 # both campaigns, 3 repeats each
    python -m benchmarks.serving_llamacpp --only llamacpp --best-llamacpp '{"parallel": 8}' --timeout-s 900
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

import yaml

from benchmarks.common import RESULTS, ROOT, machine, table, write_result

CAMPAIGNS = {"tiny_lm": ROOT / "campaigns" / "serving_cpu.yaml",
             "llamacpp": ROOT / "campaigns" / "serving_llamacpp.yaml"}


def _spec_in(workdir: Path, name: str, timeout_s: float | None = None):
    """The campaign as shipped, with its store under ``workdir`` (a benchmark never resumes a
    user's campaign) and its relative paths still pointing into campaigns/."""
    from arbor.spec import load_spec

    src = CAMPAIGNS[name]
    data = yaml.safe_load(src.read_text())
    data["name"] = f"bench_{name}"
    data["store"] = {"url": f"sqlite:///{workdir / (name + '.db')}"}
    if timeout_s is not None:  # a loaded machine stretches one measurement; the ratio stays paired
        data.setdefault("sandbox", {})["timeout_s"] = timeout_s
    path = src.parent / f".bench_{name}_{os.getpid()}.yaml"  # beside the original: {campaign_dir} holds
    path.write_text(yaml.safe_dump(data))
    try:
        return load_spec(path)
    finally:
        path.unlink()


def _campaign_best(spec) -> tuple[dict | None, dict]:
    from arbor.campaign.run import run_campaign

    t0 = time.monotonic()
    summary = run_campaign(spec, lambda kind, data: None)
    serving = summary.serving or {}
    return serving.get("best_config"), {
        "stop_reason": summary.stop_reason, "wall_s": round(time.monotonic() - t0, 1),
        "campaign_ratio": serving.get("ratio"), "best_is_baseline": serving.get("best_is_baseline"),
        "pareto_improvement_pct": serving.get("pareto_improvement_pct"), "counts": summary.counts}


def _repeat(adapter, best: dict) -> dict:
    from arbor.agents.critic.serving_gates import accuracy_report, score

    result = adapter.measure(None, adapter.canonical(best))  # type: ignore[arg-type]
    raw = result["stats"].get("serving") or {}
    c = adapter.spec.critic
    sc = score(raw, adapter.critic_cfg, c.bootstrap_resamples, c.confidence, adapter.spec.agents.seed)
    sym = raw.get("symptoms") or {}
    return {"status": result["status"], "error": result.get("error_text"),
            "gain": sc.ratio if sc else None, "metric": sc.metric if sc else None,
            "baseline_req_s": (sym.get("baseline") or {}).get("req_s"),
            "best_req_s": (sym.get("candidate") or {}).get("req_s"),
            "accuracy": accuracy_report(raw.get("accuracy")), "load_avg": os.getloadavg()[0]}


def bench(name: str, repeats: int, best: dict | None, workdir: Path, timeout_s: float | None = None) -> dict:
    from arbor.targets import make_adapter

    spec = _spec_in(workdir, name, timeout_s)
    campaign = None
    if best is None:
        best, campaign = _campaign_best(spec)
    else:  # a partial config, e.g. {"parallel": 8}: the rest at the defaults
        best = {**spec.target.defaults(), **best}
    row: dict = {"campaign": name, "engine": spec.target.engine, "campaign_run": campaign, "best_config": best,
                 "best_from": "this run's campaign" if campaign is not None else "--best-" + name,
                 "timeout_s": spec.sandbox.timeout_s}
    if campaign is not None and campaign["counts"].get("accepted", 0) == 0:
        row["note"] = f"the campaign has no result: {campaign['stop_reason']}"
        return row
    if not best or best == spec.target.defaults():
        row["note"] = "the campaign verified no configuration better than the defaults"
        return row
    adapter = make_adapter(spec)
    adapter.validate()
    runs = []
    for i in range(repeats):  # each printed as it ends: a long run on a loaded machine keeps what it measured
        runs.append(_repeat(adapter, best))
        print(f"{name} repeat {i + 1}: {json.dumps(runs[-1], default=str)}", flush=True)
    gains = [r["gain"] for r in runs if r["gain"] is not None]
    row.update(repeats=runs, gains=gains,
               gain_mean=sum(gains) / len(gains) if gains else None,
               spread_pp=100 * (max(gains) - min(gains)) if len(gains) > 1 else None)
    return row


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # finally blocks remove the spec copy
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--only", choices=sorted(CAMPAIGNS), action="append")
    ap.add_argument("--best-llamacpp", type=json.loads, default=None, help="skip the campaign: this config")
    ap.add_argument("--best-tiny_lm", dest="best_tiny_lm", type=json.loads, default=None)
    ap.add_argument("--timeout-s", type=float, default=None,
                    help="one measurement's limit (default: the campaign's sandbox.timeout_s)")
    ap.add_argument("--out", default="serving_llamacpp")
    ap.add_argument("--keep", action="store_true",
                    help="keep the rows of campaigns not run now from the existing result file")
    args = ap.parse_args(argv)
    started = time.monotonic()
    info = machine()
    rows = []
    with tempfile.TemporaryDirectory(prefix="arbor-bench-serving-") as tmp:
        for name in args.only or sorted(CAMPAIGNS, reverse=True):  # tiny_lm first: the reference
            best = args.best_llamacpp if name == "llamacpp" else args.best_tiny_lm
            rows.append(bench(name, args.repeats, best, Path(tmp), args.timeout_s))
    info["load_avg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    old = RESULTS / f"{args.out}.json"
    if args.keep and old.is_file():  # the other campaign, measured in an earlier sitting
        ran = {r["campaign"] for r in rows}
        kept = json.loads(old.read_text())
        rows = [{"machine": kept["machine"], **r} for r in kept["rows"] if r["campaign"] not in ran] + rows
    print(table([{"campaign": r["campaign"], "gain": r.get("gain_mean"), "spread_pp": r.get("spread_pp"),
                  "gains": " ".join(f"{g:.3f}" for g in r.get("gains") or []) or r.get("note", "")}
                 for r in rows], [("campaign", "campaign"), ("gain", "mean gain (x)"),
                                  ("spread_pp", "spread (pp)"), ("gains", "per repeat")]))
    path = write_result(args.out, {"machine": info, "repeats": args.repeats, "rows": rows}, started)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
