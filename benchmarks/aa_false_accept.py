"""A/A false-accept rate of the Critic: candidates identical to the baseline must never be accepted.

One campaign is simulated the way the loop runs it: the baseline (root) is measured once and sets
the noise floor; then ``--trials`` candidates whose code *is* the reference (renamed ModelNew) are
each measured in their own sandboxed harness process and judged by the full gate chain, with the
re-measurements the Critic orders (``unstable``, ``env_drift``) and the independent confirmation
a would-be new best gets, and the further looks of the sequential test an undecided one gets
(agents/critic/sequential.py, issue 41). A trial counts as a false accept when its final verdict
is ``accept``. Goal (issue 6): at most 1%; the sequential test's stated bound (3.75% against a bar
without the noise floor) is printed beside what it did here.

For comparison the table also shows what a bare "95% CI above 1.0" rule would have accepted on
the same first measurements (no noise floor, no Mann-Whitney, no effect size, no confirmation).

    python -m benchmarks.aa_false_accept                 # 100 trials, 2 sandbox jobs of 10 at a time
    python -m benchmarks.aa_false_accept --trials 20 --jobs 1

Each trial runs in its own process: a batch is one sandbox job whose harness imports torch once and
forks a child per measurement (``measure_kernels``), which saves the import, not the isolation.

    python -m benchmarks.aa_false_accept --bar-at-one --trials 100   # the rule's own error rate

Writes ``benchmarks/results/aa_false_accept.json`` (``aa_false_accept_bar1.json`` with ``--bar-at-one``;
``aa_false_accept_bar1_fixed_effect.json`` is the run before the sequential test's looks were pooled
with random effects).
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

from arbor.agents.contracts import Judgement
from arbor.agents.critic import sequential
from arbor.agents.critic.critic import HeuristicCritic
from arbor.agents.critic.gates import CriticConfig, Evidence
from arbor.agents.transforms import to_modelnew
from arbor.sandbox.kernel.protocol import KernelMeasurement, KernelRequest, measure_kernel, measure_kernels
from arbor.sandbox.runners.local import LocalRunner
from benchmarks.common import ROOT, table, write_result

PROBLEM = ROOT / "campaigns" / "problems" / "gelu_gate.py"
SIZES = {"batch_size": 64, "dim": 512}  # ~0.1 ms per call: cheap, and small enough to be noisy


def _request(source: str, args) -> KernelRequest:  # type: ignore[no-untyped-def]
    return KernelRequest(PROBLEM.read_text(), source, sizes=SIZES, num_threads=1,
                         warmup_s=args.warmup_s, time_budget_s=args.time_budget_s, min_repeats=10,
                         max_repeats=200, timeout_s=120)


def _evidence(m: KernelMeasurement, is_root: bool, noise: float, attempt: int, purpose: str,
              remeasures: int, base_fp: dict | None, previous: float | None, earlier: list | None = None,
              looks: list | None = None) -> Evidence:
    return Evidence(is_root=is_root, attempt=attempt, purpose=purpose, status=m.status,
                    error_class=m.error_class, error_text=m.error_text, correctness=m.correctness,
                    noise_floor=noise, remeasures_done=remeasures, previous_speedup=previous,
                    earlier_speedups=list(earlier or []), earlier_looks=list(looks or []),
                    fingerprint=m.fingerprint, baseline_fingerprint=base_fp, facts=m.stats)


def judge_like_the_loop(critic: HeuristicCritic, req: KernelRequest, is_root: bool, noise: float,
                        base_fp: dict | None) -> tuple[Judgement, list[KernelMeasurement]]:
    """Measure, judge, and follow the Critic's re-measure/confirm orders until a final verdict."""
    trial = _Trial(0)
    while trial.verdict is None:
        trial.step(critic, measure_kernel(LocalRunner(), req), is_root, noise, base_fp)
    return trial.verdict, trial.ms


class _Trial:
    """One candidate's way through the loop: primary, re-measurements, confirmation."""

    def __init__(self, index: int) -> None:
        self.index, self.ms, self.verdict, self.first = index, [], None, None
        self.purpose, self.remeasures, self.previous, self.earlier = "primary", 0, None, []
        self.looks: list = []  # the sequential test's undecided looks (purpose ``extend``)

    def step(self, critic, m, is_root, noise, base_fp) -> None:  # type: ignore[no-untyped-def]
        self.ms.append(m)
        j = critic.judge(_evidence(m, is_root, noise, len(self.ms), self.purpose, self.remeasures,
                                   base_fp, self.previous, self.earlier, self.looks),
                         m.baseline_samples, m.candidate_samples)
        self.first = self.first if self.first is not None else j.stats
        if j.decision != "remeasure" or len(self.ms) >= 12:
            self.verdict = j
        elif j.remeasure_purpose == "confirm":
            self.purpose, self.previous = "confirm", j.speedup
        elif j.remeasure_purpose == "extend":  # undecided: one more look, judged with the earlier ones
            self.purpose = "extend"
            self.looks.append(j.stats)
        elif j.remeasure_purpose == "tiebreak":  # the confirmation disagreed: a third run decides
            self.purpose, self.earlier = "tiebreak", [self.previous, j.speedup]
        else:
            self.purpose, self.remeasures = "remeasure", self.remeasures + 1


def run_trials(critic, req, n: int, jobs: int, batch: int, noise: float, base_fp) -> list[_Trial]:  # type: ignore[no-untyped-def]
    """All trials, ``batch`` measurements per sandbox job (one forked process each), ``jobs`` jobs
    at a time; trials the Critic sends back are measured again in later batches."""
    trials = [_Trial(i) for i in range(n)]
    pending = list(trials)
    while pending:
        chunks = [pending[k:k + batch] for k in range(0, len(pending), batch)]
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            results = list(pool.map(lambda ch: measure_kernels(LocalRunner(), [req] * len(ch)), chunks))
        for chunk, ms in zip(chunks, results):
            for t, m in zip(chunk, ms):
                t.step(critic, m, False, noise, base_fp)
        pending = [t for t in pending if t.verdict is None]
        print(f"  {n - len(pending)}/{n} trials decided", flush=True)
    return trials


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=100)
    ap.add_argument("--jobs", type=int, default=2, help="sandbox jobs at a time")
    ap.add_argument("--batch", type=int, default=10, help="measurements per sandbox job (forked each)")
    ap.add_argument("--time-budget-s", type=float, default=0.4)
    ap.add_argument("--warmup-s", type=float, default=0.05)
    ap.add_argument("--max-cv", type=float, default=None,
                    help="override the stability bar (e.g. 1.0) to see the significance gate alone "
                         "on a machine too noisy for the default")
    ap.add_argument("--bar-at-one", action="store_true",
                    help="judge against 1.0 (no noise floor, min_speedup 1.0): the bare error rate of the "
                         "first look and the sequential test, to compare with their stated bound")
    args = ap.parse_args(argv)
    started = time.monotonic()
    cfg = CriticConfig(**({} if args.max_cv is None else {"max_cv": args.max_cv}),
                       **({"min_speedup": 1.0} if args.bar_at_one else {}))
    critic = HeuristicCritic(cfg)
    source = to_modelnew(PROBLEM.read_text())
    req = _request(source, args)

    root, root_ms = judge_like_the_loop(critic, req, True, 0.0, None)
    if root.decision != "accept":
        print(f"the baseline itself was not accepted: {root.diagnosis}: {root.reason}")
        return 1
    noise, base_fp = 0.0 if args.bar_at_one else (root.noise_floor or 0.0), root_ms[-1].fingerprint
    print(f"baseline: {root.reason}")
    trials = run_trials(critic, req, args.trials, args.jobs, args.batch, noise, base_fp)
    rows = []
    for t in trials:
        first, j = t.first or {}, t.verdict
        gate = next((g["gate"] for g in j.gates if g.get("passed") is False), None)
        rows.append({"trial": t.index, "decision": j.decision, "diagnosis": j.diagnosis, "gate": gate,
                     "reached_significance": any(g.get("gate") == "significant" for g in j.gates),
                     "speedup": first.get("speedup"), "ci_low": first.get("ci_low"),
                     "ci_high": first.get("ci_high"), "mw_p": first.get("mw_p"),
                     "measurements": len(t.ms), "extended": len(t.looks), "reason": j.reason})
    seq = [r for r in rows if r["extended"]]
    accepts = sum(r["decision"] == "accept" for r in rows)
    naive = sum((r["ci_low"] or 0) > 1.0 for r in rows)
    by_diag = Counter(r["diagnosis"] for r in rows)
    summary = [
        {"rule": "Critic (all gates)", "accepted": accepts, "rate": f"{accepts / len(rows):.1%}"},
        {"rule": "bare 95% CI above 1.0", "accepted": naive, "rate": f"{naive / len(rows):.1%}"},
    ]
    print(table(summary, [("rule", "rule"), ("accepted", f"accepted of {len(rows)}"), ("rate", "rate")]))
    print("final diagnoses: " + ", ".join(f"{k} {v}" for k, v in by_diag.most_common()))
    reached = sum(r["reached_significance"] for r in rows)
    print(f"{reached} of {len(rows)} trials got past the stability and environment gates to the "
          f"significance test; {accepts} of those were accepted")
    bound = sequential.error_bound(critic.config.confidence, critic.config.sequential_alpha)
    seq_accepts = sum(r["decision"] == "accept" for r in seq)
    print(f"sequential test: {len(seq)} undecided trials got more looks ({sum(r['extended'] for r in seq)} in "
          f"all), {seq_accepts} accepted; stated false-accept bound {bound:.2%} (first look plus "
          f"sequential_alpha {critic.config.sequential_alpha:g}), measured {accepts / len(rows):.2%} overall")
    speedups = sorted(r["speedup"] for r in rows if r["speedup"])
    if speedups:
        print(f"A/A speedups: min {speedups[0]:.3f}x, median {speedups[len(speedups) // 2]:.3f}x, "
              f"max {speedups[-1]:.3f}x; noise floor {noise:.2%}")
    path = write_result("aa_false_accept_bar1" if args.bar_at_one else "aa_false_accept", {
        "goal": "false-accept rate <= 1%", "trials": len(rows), "false_accepts": accepts,
        "false_accept_rate": accepts / len(rows), "bare_ci_rule_accepts": naive,
        "diagnoses": dict(by_diag), "noise_floor": noise, "baseline": root.reason,
        "reached_significance": sum(r["reached_significance"] for r in rows),
        "sequential": {"extended_trials": len(seq), "accepted": seq_accepts, "stated_bound": bound},
        "config": {**critic.config.__dict__, "problem": PROBLEM.name, "sizes": SIZES,
                   "time_budget_s": args.time_budget_s, "jobs": args.jobs, "batch": args.batch},
        "rows": rows}, started)
    print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
