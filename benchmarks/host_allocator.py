"""How stable a measurement is from one harness process to the next, with and without the pinned host allocator.

    python -m benchmarks.host_allocator [--rounds 5] [--problems l1_04_swish ...]

For each problem (at the suite's calibrated size) two candidates are measured: the reference itself
(``eager``) and the reference under ``torch.compile`` (``compiled``: the move whose batch and single
values disagreed on 2026-11-26). Each is measured in both of the protocol's paths — its own harness
process (``measure_kernel``, the campaign's path) and a forked child of a batch job
(``measure_kernels``) — with the harness's allocator pinned (``sandbox/harness/allocator.py``) and,
as the control, with the allocator module replaced by one that changes nothing. Rounds alternate
the order of the modes. The table gives, per problem, mode and path, the reference time's median
and its max/min over the rounds, and the compiled candidate's speedup. A stable protocol has a
max/min near 1 and the same speedup in both paths.

Writes benchmarks/results/host_allocator.json.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.common import fmt, machine, table, write_result

PROBLEMS = ["l1_04_swish", "l1_07_rmsnorm_manual", "l2_12_conv_avgpool_hardswish"]
MODES = ("system", "pinned")
_UNPINNED = 'answer = "not pinned (benchmark control)"\n\n\ndef pin():\n    return answer\n'


def _measure(adapter, runner, source: str, mode: str, path: str):  # type: ignore[no-untyped-def]
    """One measurement of ``source``; ``mode`` system ships the allocator module that changes nothing."""
    import arbor.sandbox.kernel.protocol as kp

    original = kp.build_job

    def build(req, nonce):  # type: ignore[no-untyped-def]
        job = original(req, nonce)
        if mode == "system":
            job.files["allocator.py"] = _UNPINNED
        return job

    kp.build_job = build
    try:
        req = adapter.request(source)
        return kp.measure_kernel(runner, req) if path == "single" else kp.measure_kernels(runner, [req])[0]
    finally:
        kp.build_job = original


def run(names: list[str], rounds: int) -> dict:
    from arbor.agents.transforms import apply_move, to_modelnew
    from arbor.spec_runners import runner_for
    from arbor.targets import make_adapter
    from benchmarks.warm_start_work import _spec, problem_paths, scales

    paths = problem_paths(names)
    scale = scales(paths, None)
    data: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        for p in paths:
            spec = _spec(Path(tmp), f"alloc-{p.stem}", p, 1, scale[p.stem], None)
            adapter = make_adapter(spec)
            eager = to_modelnew(adapter.problem.source)
            sources = {"eager": eager, "compiled": apply_move(eager, "wrap_compile", {})}
            runner = runner_for(spec, guarded=False)
            rows = data.setdefault(p.stem, {"scale": scale[p.stem], "samples": []})
            try:
                for r in range(rounds):
                    for mode in (MODES if r % 2 == 0 else MODES[::-1]):
                        for path in ("single", "batch"):
                            for key, src in sources.items():
                                m = _measure(adapter, runner, src, mode, path)
                                ok = m.ok and m.baseline_samples and m.candidate_samples
                                ref = statistics.median(m.baseline_samples) if ok else None
                                rows["samples"].append({
                                    "round": r, "mode": mode, "path": path, "candidate": key,
                                    "reference_ms": ref * 1e3 if ref else None,
                                    "speedup": ref / statistics.median(m.candidate_samples) if ok else None,
                                    "allocator": (m.fingerprint or {}).get("host_allocator"),
                                    "error": None if ok else f"{m.error_class}: {(m.error_text or '')[:120]}",
                                    "load": round(os.getloadavg()[0], 2)})
                                print(p.stem, rows["samples"][-1], flush=True)
            finally:
                runner.close()
    return data


def summarize(data: dict) -> list[dict]:
    out = []
    for problem, d in data.items():
        for mode in MODES:
            for path in ("single", "batch"):
                got = [s for s in d["samples"] if s["mode"] == mode and s["path"] == path]
                refs = [s["reference_ms"] for s in got if s["reference_ms"]]
                comp = [s["speedup"] for s in got if s["candidate"] == "compiled" and s["speedup"]]
                eager = [s["speedup"] for s in got if s["candidate"] == "eager" and s["speedup"]]
                out.append({"problem": problem, "mode": mode, "path": path, "n": len(refs),
                            "ref_ms": statistics.median(refs) if refs else None,
                            "ref_spread": max(refs) / min(refs) if refs else None,
                            "eager_x": statistics.median(eager) if eager else None,
                            "compiled_x": statistics.median(comp) if comp else None,
                            "compiled_spread": max(comp) / min(comp) if comp else None,
                            "errors": sum(1 for s in got if s["error"])})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--problems", nargs="*", default=PROBLEMS)
    args = ap.parse_args()
    started = time.monotonic()
    info = machine()
    data = run(args.problems, args.rounds)
    rows = summarize(data)
    print(table([{**r, **{k: fmt(r[k], 2) for k in ("ref_spread", "eager_x", "compiled_x", "compiled_spread")}}
                 for r in rows],
                [("problem", "problem"), ("mode", "allocator"), ("path", "path"), ("n", "n"),
                 ("ref_ms", "reference ms (median)"), ("ref_spread", "ref max/min"), ("eager_x", "eager x"),
                 ("compiled_x", "compiled x"), ("compiled_spread", "compiled max/min"), ("errors", "errors")]))
    print("machine load at start:", info["load_avg_at_start"], "at end:", [round(x, 2) for x in os.getloadavg()])
    path = write_result("host_allocator", {"rounds": args.rounds, "summary": rows, "data": data,
                                           "load_avg_at_end": [round(x, 2) for x in os.getloadavg()]}, started)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
