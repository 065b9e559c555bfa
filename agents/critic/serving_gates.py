"""The Critic's gates for serving configurations.

A serving measurement (``arbor.sandbox.serving.protocol``) holds, for each interleaved round,
every load level's metrics on the baseline server and on the candidate server. From those raw
numbers the Critic derives, itself:

* per round and side, the campaign's objective — *throughput at the SLO* (max req/s among levels
  whose pXX TTFT/TPOT/E2E meet the SLO) or the *hypervolume* of the throughput × pXX-E2E points
  against a reference point fixed from this measurement's baseline rounds
  (``arbor.search_tree.pareto``). If the baseline meets the SLO at no level, throughput at the
  SLO is 0 and cannot form a ratio, so the hypervolume is used and the reason says so;
* the paired per-round ratio candidate/baseline (drift cancels within a round), its median and a
  bootstrap CI over rounds.

Gates, in order: ran (start-up crash → ``oom``/``startup_failed``, hang → ``timeout``) →
requests (any failed request on the candidate fails it; on the baseline only, re-measure) →
accuracy (output-changing knobs: greedy tokens and log-probabilities vs the baseline, else
``accuracy_regression`` however fast) → stable (robust CV across rounds of the paired per-round
ratio over ``max_cv`` → re-measure, then ``unstable``) → significant (CI above 1 and the A/A noise
floor, not below the parent: ``no_gain`` / ``regression``) → a new best is confirmed by an
independent second measurement.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np

from arbor.agents.contracts import Judgement
from arbor.search_tree.pareto import (Point, hypervolume, interpolated_throughput_at_slo, pareto_front,
                                      pareto_improvement_pct, reference_point)

from .gates import CriticConfig, Evidence, GateLog, GateOutcome
from .stats import robust_cv

SIDES = ("baseline", "candidate")
_FINAL = {"accept": "accepted", "reject": "rejected", "fail": "failed", "remeasure": None}
START_FAILURES = {"oom", "startup_failed", "timeout", "runtime_error", "harness_error"}


@dataclass(frozen=True)
class ServingCriticConfig:
    ttft_ms: float | None = None
    tpot_ms: float | None = None
    e2e_ms: float | None = None
    percentile: int = 99
    metric: str = "throughput_at_slo"  # or hypervolume
    latency_margin: float = 1.5
    max_logprob_diff: float = 0.1
    min_prefix_match: float = 0.9


def _pct(level: dict, metric: str, q: int) -> float | None:
    d = level.get(metric) or {}
    return d.get(f"p{q}")


def meets_slo(level: dict, cfg: ServingCriticConfig) -> bool:
    if level.get("completed", 0) == 0:
        return False
    for metric, limit in (("ttft_ms", cfg.ttft_ms), ("tpot_ms", cfg.tpot_ms), ("e2e_ms", cfg.e2e_ms)):
        if limit is None:
            continue
        v = _pct(level, metric, cfg.percentile)
        if metric == "tpot_ms" and v is None:
            continue  # single-token outputs have no TPOT
        if v is None or v > limit:
            return False
    return True


def level_point(level: dict, cfg: ServingCriticConfig) -> Point | None:
    lat = _pct(level, "e2e_ms", cfg.percentile)
    if lat is None or level.get("completed", 0) == 0:
        return None
    return Point(float(level["req_s"]), float(lat), level.get("level", {}).get("label", ""))


def objective(levels: list[dict], cfg: ServingCriticConfig) -> float:
    """Throughput at the SLO (req/s), the crossing interpolated along the load levels."""
    curve = []
    for lv in levels:
        ok = lv.get("completed", 0) > 0
        metrics = []
        for metric, limit in (("ttft_ms", cfg.ttft_ms), ("tpot_ms", cfg.tpot_ms), ("e2e_ms", cfg.e2e_ms)):
            if limit is None:
                continue
            v = _pct(lv, metric, cfg.percentile) if ok else None
            if v is None and metric == "tpot_ms" and ok:
                v = 0.0  # single-token outputs have no TPOT
            metrics.append((v, limit))
        curve.append((float(lv["req_s"]) if ok else 0.0, metrics))
    return interpolated_throughput_at_slo(curve)


@dataclass
class ServingScore:
    metric: str
    baseline: list[float]
    candidate: list[float]
    ratio: float
    ci_low: float
    ci_high: float
    cv_baseline: float
    cv_candidate: float
    cv_ratio: float
    objective_baseline: float
    objective_candidate: float
    hv_baseline: float
    hv_candidate: float
    pareto_improvement_pct: float
    reference_point: list
    front_baseline: list = field(default_factory=list)
    front_candidate: list = field(default_factory=list)
    levels_baseline: list = field(default_factory=list)
    levels_candidate: list = field(default_factory=list)
    failed_baseline: int = 0
    failed_candidate: int = 0
    note: str = ""

    def to_dict(self) -> dict:
        d = asdict(self)
        d["speedup"] = self.ratio  # the loop's generic name for "ratio vs the baseline"
        return d


def _cv(x: list[float]) -> float:
    a = np.asarray(x, dtype=float)
    if a.size < 2:
        return float("inf")
    m = a.mean()
    if m <= 0:
        return 0.0 if np.all(a == 0) else float("inf")
    return float(a.std(ddof=1) / m)


def _ratios(base: list[float], cand: list[float]) -> list[float]:
    return [c / b if b > 0 else (1.0 if c <= 0 else float("inf")) for b, c in zip(base, cand)]


def paired_ratio_ci(base: list[float], cand: list[float], resamples: int = 2000, confidence: float = 0.95,
                    seed: int = 0) -> tuple[float, float, float]:
    """Median of per-round ratios cand/base with a percentile bootstrap over rounds."""
    b, c = np.asarray(base, float), np.asarray(cand, float)
    n = min(b.size, c.size)
    r = np.where(b[:n] > 0, c[:n] / np.where(b[:n] > 0, b[:n], 1.0), np.inf)
    r = np.where(np.isinf(r) & (c[:n] <= 0), 1.0, r)  # 0/0: no difference
    point = float(np.median(r))
    idx = np.random.default_rng(seed).integers(0, n, size=(resamples, n))
    meds = np.median(r[idx], axis=1)
    alpha = (1 - confidence) / 2
    lo, hi = np.quantile(meds, [alpha, 1 - alpha])
    return point, float(lo), float(hi)


def _median_levels(rounds: list[dict], side: str, cfg: ServingCriticConfig) -> list[dict]:
    """Per level, the median over rounds of the numbers a report shows."""
    per_level: dict[int, list[dict]] = {}
    for rd in rounds:
        for i, lv in enumerate(rd.get(side) or []):
            per_level.setdefault(i, []).append(lv)
    out = []
    q = cfg.percentile
    for i in sorted(per_level):
        lvs = per_level[i]

        def med(get):
            vals = [v for v in (get(lv) for lv in lvs) if v is not None]
            return float(np.median(vals)) if vals else None

        out.append({
            "label": lvs[0].get("level", {}).get("label", str(i)),
            "req_s": med(lambda lv: lv["req_s"]), "out_tok_s": med(lambda lv: lv["out_tok_s"]),
            "goodput_req_s": med(lambda lv: lv["goodput_req_s"]),
            f"ttft_p{q}_ms": med(lambda lv: _pct(lv, "ttft_ms", q)),
            f"tpot_p{q}_ms": med(lambda lv: _pct(lv, "tpot_ms", q)),
            f"e2e_p{q}_ms": med(lambda lv: _pct(lv, "e2e_ms", q)),
            "meets_slo": sum(meets_slo(lv, cfg) for lv in lvs) * 2 > len(lvs),
            "failed": med(lambda lv: lv.get("failed")),
            # the columns of `vllm bench serve`: mean / median / p99 of each latency
            **{f"{m}_{st}_ms": med(lambda lv, m=m, st=st: (lv.get(f"{m}_ms") or {}).get(st))
               for m in ("ttft", "tpot", "itl", "e2e") for st in ("mean", "p50", "p99")},
        })
    return out


def score(raw: dict, cfg: ServingCriticConfig, resamples: int = 2000, confidence: float = 0.95,
          seed: int = 0) -> ServingScore | None:
    """Everything the gates and the reports need from one measurement; None without data."""
    rounds = [rd for rd in raw.get("rounds") or [] if rd.get("baseline") and rd.get("candidate")]
    if not rounds:
        return None
    base_points = [p for rd in rounds for lv in rd["baseline"] if (p := level_point(lv, cfg))]
    if not base_points:
        return None
    ref = reference_point(base_points, cfg.latency_margin)
    obj = {s: [objective(rd[s], cfg) for rd in rounds] for s in SIDES}
    hv = {s: [hypervolume([p for lv in rd[s] if (p := level_point(lv, cfg))], ref) for rd in rounds]
          for s in SIDES}
    metric, note = cfg.metric, ""
    if metric == "throughput_at_slo" and float(np.median(obj["baseline"])) <= 0:
        metric = "hypervolume"
        note = "the baseline meets the SLO at no load level, so the hypervolume decides"
    samples = obj if metric == "throughput_at_slo" else hv
    ratio, lo, hi = paired_ratio_ci(samples["baseline"], samples["candidate"], resamples, confidence, seed)
    lv_b, lv_c = _median_levels(rounds, "baseline", cfg), _median_levels(rounds, "candidate", cfg)
    lat = f"e2e_p{cfg.percentile}_ms"
    front = {s: pareto_front(Point(lv["req_s"], lv[lat], lv["label"]) for lv in lvs
                             if lv["req_s"] is not None and lv[lat] is not None)
             for s, lvs in (("baseline", lv_b), ("candidate", lv_c))}
    hv_b, hv_c = hypervolume(front["baseline"], ref), hypervolume(front["candidate"], ref)
    return ServingScore(
        metric=metric, baseline=samples["baseline"], candidate=samples["candidate"], ratio=ratio, ci_low=lo,
        ci_high=hi, cv_baseline=_cv(samples["baseline"]), cv_candidate=_cv(samples["candidate"]),
        cv_ratio=robust_cv(_ratios(samples["baseline"], samples["candidate"])),
        objective_baseline=float(np.median(obj["baseline"])), objective_candidate=float(np.median(obj["candidate"])),
        hv_baseline=hv_b, hv_candidate=hv_c, pareto_improvement_pct=pareto_improvement_pct(hv_c, hv_b),
        reference_point=[ref.throughput, ref.latency],
        front_baseline=[p.as_list() for p in front["baseline"]],
        front_candidate=[p.as_list() for p in front["candidate"]],
        levels_baseline=lv_b, levels_candidate=lv_c,
        failed_baseline=sum(lv["failed"] for rd in raw.get("rounds") or [] for lv in rd.get("baseline") or []),
        failed_candidate=sum(lv["failed"] for rd in raw.get("rounds") or [] for lv in rd.get("candidate") or []),
        note=note)


def accuracy_report(acc: dict | None) -> dict | None:
    """Greedy agreement of the candidate with the baseline on the probe prompts."""
    if not acc or "baseline" not in acc or "candidate" not in acc:
        return None
    prefixes, diffs, failures = [], [], {"baseline": 0, "candidate": 0}
    for b, c in zip(acc["baseline"], acc["candidate"]):
        if not b.get("ok") or not c.get("ok"):
            failures["baseline"] += not b.get("ok")
            failures["candidate"] += not c.get("ok")
            continue
        bt, ct = b.get("tokens") or [], c.get("tokens") or []
        n = 0
        while n < min(len(bt), len(ct)) and bt[n] == ct[n]:
            n += 1
        prefixes.append(n / max(len(bt), 1))
        bl, cl = b.get("logprobs") or [], c.get("logprobs") or []
        d = [abs(x - y) for x, y in zip(bl[:n], cl[:n])]
        if d:
            diffs.append(sum(d) / len(d))
    return {"prompts": len(prefixes), "prefix_match": float(np.mean(prefixes)) if prefixes else 0.0,
            "logprob_diff": float(np.mean(diffs)) if diffs else 0.0, "failed": failures, "knobs": acc.get("knobs") or {}}


def _gate_ran(ev: Evidence) -> GateOutcome | None:
    if ev.status == "ok":
        return None
    cls = ev.error_class if ev.error_class in START_FAILURES else "runtime_error"
    lines = [ln for ln in (ev.error_text or "").strip().splitlines() if ln.strip()]
    detail = lines[0][:300] if lines else "no output"
    return GateOutcome("fail", cls, f"{cls.replace('_', ' ')}: {detail}")


def _gate_requests(ev: Evidence, sc: ServingScore, cfg: CriticConfig) -> GateOutcome | None:
    if sc.failed_candidate and not ev.is_root:
        return GateOutcome("fail", "runtime_error", f"{sc.failed_candidate} request(s) failed on the candidate")
    if sc.failed_baseline or (ev.is_root and sc.failed_candidate):
        n = sc.failed_baseline + (sc.failed_candidate if ev.is_root else 0)
        reason = f"{n} request(s) failed on the baseline server"
        if ev.is_root:
            return GateOutcome("fail", "runtime_error", reason)
        if ev.remeasures_done < cfg.max_remeasures:
            return GateOutcome("remeasure", "unstable", reason + "; measuring again", purpose="remeasure")
        return GateOutcome("reject", "unstable", reason + f" after {ev.remeasures_done} re-measurement(s)")
    return None


def _gate_accuracy(ev: Evidence, acc: dict | None, scfg: ServingCriticConfig) -> GateOutcome | None:
    if acc is None or ev.is_root:
        return None
    if acc["failed"]["candidate"]:
        return GateOutcome("fail", "runtime_error", f"{acc['failed']['candidate']} accuracy probe request(s) "
                                                    "failed on the candidate")
    if acc["prompts"] == 0:
        return GateOutcome("fail", "harness_error", "the accuracy probe got no answer from the baseline")
    if acc["prefix_match"] < scfg.min_prefix_match or acc["logprob_diff"] > scfg.max_logprob_diff:
        knobs = acc.get("knobs") or {}  # the knob is the diagnosis: which setting costs accuracy
        named = (", ".join(f"{k}={v}" for k, v in knobs.items()) + " changes the outputs: ") if knobs else ""
        return GateOutcome("reject", "accuracy_regression",
                           f"{named}greedy outputs match the baseline for {acc['prefix_match']:.0%} of tokens "
                           f"(needs {scfg.min_prefix_match:.0%}), mean |Δ logprob| {acc['logprob_diff']:.3f} "
                           f"(limit {scfg.max_logprob_diff:g}) on {acc['prompts']} prompts")
    return None


def _gate_stable(ev: Evidence, sc: ServingScore, cfg: CriticConfig) -> GateOutcome | None:
    """The CV that matters is the *paired* one: a neighbour's job slowing both servers in one
    round moves both sides alike and cancels in the round's ratio; a comparison that still
    varies across rounds cannot be trusted. Robust (1.4826·MAD/median, as the kernel gates), so
    one round hit by a burst on one side only does not condemn the other rounds."""
    if sc.cv_ratio <= cfg.max_cv:
        return None
    reason = (f"the candidate/baseline {sc.metric} ratio varies {sc.cv_ratio:.1%} across rounds "
              f"(limit {cfg.max_cv:.0%}; per side {sc.cv_baseline:.0%} / {sc.cv_candidate:.0%})")
    if ev.remeasures_done < cfg.max_remeasures:
        return GateOutcome("remeasure", "unstable", reason + "; measuring again", purpose="remeasure")
    return GateOutcome("reject", "unstable", reason + f" after {ev.remeasures_done} re-measurement(s)")


def _describe(sc: ServingScore) -> str:
    what = "throughput at the SLO" if sc.metric == "throughput_at_slo" else "hypervolume"
    return (f"{what} {sc.ratio:.3f}x [{sc.ci_low:.3f}, {sc.ci_high:.3f}] "
            f"({sc.objective_baseline:.2f} → {sc.objective_candidate:.2f} req/s at the SLO; "
            f"Pareto {sc.pareto_improvement_pct:+.1f}%)")


def _gate_significant(ev: Evidence, sc: ServingScore, cfg: CriticConfig) -> GateOutcome | None:
    if ev.is_root:
        return None
    margin = max(cfg.min_speedup - 1.0, ev.noise_floor)
    if sc.ci_high * (1.0 + margin) < ev.parent_speedup:
        return GateOutcome("reject", "regression", f"worse than its parent: {_describe(sc)} vs parent "
                                                   f"{ev.parent_speedup:.3f}x")
    floor = 1.0 + margin
    if sc.ci_low <= 1.0 or sc.ratio < floor:
        return GateOutcome("reject", "no_gain", f"{_describe(sc)} is not significant (needs the CI above 1.0 "
                                                f"and >= {floor:.3f}x)")
    return None


def _gate_confirm(ev: Evidence, sc: ServingScore, cfg: CriticConfig) -> GateOutcome | None:
    # re-measurements so far = unstable ones + confirmations: confirm a node once, not after
    # every noisy re-measurement (each costs two server start-ups and a full load run)
    confirms_asked = ev.attempt - 1 - ev.remeasures_done
    if ev.is_root or not cfg.confirm_new_best or ev.confirmed or ev.purpose == "confirm" or confirms_asked > 0:
        return None
    if sc.ratio > ev.best_speedup:
        return GateOutcome("remeasure", "confirm", f"new best {sc.ratio:.3f}x (was {ev.best_speedup:.3f}x): "
                                                   "confirming with an independent measurement", purpose="confirm")
    return None


def final_ratio(raw: dict | None, cfg: CriticConfig, scfg: ServingCriticConfig) -> float | None:
    """The paired ratio of one final-verification measurement of an accepted node, or None when it
    would not pass the gates that make a number trustworthy: complete rounds, no failed request,
    and the accuracy probe (attached to every measurement of a config that changes numerics)."""
    sc = score(raw or {}, scfg, cfg.bootstrap_resamples, cfg.confidence, cfg.seed)
    if sc is None or sc.failed_candidate or sc.failed_baseline:
        return None
    ev = Evidence(is_root=False, attempt=1, purpose="final", status="ok", error_class=None, error_text=None,
                  correctness=[])
    return None if _gate_accuracy(ev, accuracy_report((raw or {}).get("accuracy")), scfg) else sc.ratio


def judge_serving(ev: Evidence, raw: dict | None, cfg: CriticConfig, scfg: ServingCriticConfig) -> Judgement:
    log = GateLog()
    log.add("guard", True, "config within the campaign's knob table")

    def end(o: GateOutcome, sc: ServingScore | None = None, extra: dict | None = None) -> Judgement:
        log.add(name, False, o.reason)
        stats = {**(sc.to_dict() if sc else {}), **(extra or {})}
        return Judgement(o.decision, o.diagnosis, o.reason, _FINAL[o.decision], log.entries, stats,
                         remeasure_purpose=o.purpose, speedup=sc.ratio if sc else None)

    name = "ran"
    if (o := _gate_ran(ev)) is not None:
        return end(o)
    log.add(name, True, "servers started, load ran")
    sc = score(raw or {}, scfg, cfg.bootstrap_resamples, cfg.confidence, cfg.seed)
    if sc is None:
        name = "samples"
        return end(GateOutcome("fail", "harness_error", "the measurement holds no complete round"))
    acc = accuracy_report((raw or {}).get("accuracy"))
    extra = {"accuracy": acc} if acc else {}
    for name, gate in (("requests", lambda: _gate_requests(ev, sc, cfg)),
                       ("accuracy", lambda: _gate_accuracy(ev, acc, scfg)),
                       ("stable", lambda: _gate_stable(ev, sc, cfg)),
                       ("significant", lambda: _gate_significant(ev, sc, cfg)),
                       ("confirm_best", lambda: _gate_confirm(ev, sc, cfg))):
        o = gate()
        if o is not None:
            return end(o, sc, extra)
        log.add(name, True, "passed")
    stats = {**sc.to_dict(), **extra}
    if ev.is_root:
        noise = max(sc.ci_high - 1.0, 1.0 - sc.ci_low, 0.0)
        reason = (f"baseline {sc.objective_baseline:.2f} req/s at the SLO; A/A {sc.metric} ratio {sc.ratio:.3f} "
                  f"[{sc.ci_low:.3f}, {sc.ci_high:.3f}] sets the noise floor at {noise:.1%}"
                  + (f" ({sc.note})" if sc.note else ""))
        return Judgement("accept", "baseline", reason, "accepted", log.entries, stats, speedup=1.0, value=0.0,
                         noise_floor=noise)
    ratio = sc.ratio if ev.previous_speedup is None else min(sc.ratio, ev.previous_speedup)
    confirmed = "" if ev.previous_speedup is None else f"; confirmed ({ev.previous_speedup:.3f}x before), kept the lower"
    reason = _describe(sc) + confirmed + (f" ({sc.note})" if sc.note else "")
    # better than the baseline but not than its parent: accepted (it is a valid point of the
    # tree), never called an improvement — priors learn from "improved" only
    diagnosis = "improved"
    if not ev.is_root and ev.parent_speedup > 1.0 and ratio < ev.parent_speedup:
        diagnosis = "below_parent"
        reason = f"slower than its parent ({ratio:.3f}x vs {ev.parent_speedup:.3f}x the baseline's throughput); " + reason
    return Judgement("accept", diagnosis, reason, "accepted", log.entries, stats, speedup=ratio,
                     value=math.log(ratio))
