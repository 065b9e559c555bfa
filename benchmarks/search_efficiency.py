"""Search efficiency: evaluations needed to reach 95% of each landscape's optimum.

For every recorded landscape in ``benchmarks/landscapes/`` and every searcher — Arbor with each
selection policy (real campaigns on the replay target: same agents, same Critic, same store),
Optuna TPE, random search and grid search — runs ``--seeds`` seeds and reports the median and IQR
of the evaluations it took until the configuration it believed best was truly within 95% of the
optimum speedup. Runs that never get there count as infinite (shown as ``censored``).

    python -m benchmarks.search_efficiency            # all landscapes, 20 seeds, ~5-10 min on 2 cores
    python -m benchmarks.search_efficiency --seeds 5 --landscapes cpu_tiled_matmul

Writes ``benchmarks/results/search_efficiency.json``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from benchmarks.common import fmt, landscape_paths, quartiles, table, write_result

POLICIES = ("puct", "ucb1", "greedy", "random")
BASELINES = ("tpe", "random", "grid")


def _work(job: tuple) -> list[dict]:
    """One (landscape, searcher) over its seeds, in a worker process with its own store."""
    path, method, seeds, threshold, moves = job
    from arbor.targets.landscape import load_landscape
    from arbor.search_tree import open_store

    from benchmarks import searchers as S

    ls = load_landscape(path)
    target = threshold * ls.optimum()
    out = []
    if method.startswith("arbor-"):
        policy = method.split("-", 1)[1]
        workdir = Path(tempfile.mkdtemp(prefix="arbor-bench-", dir=_scratch()))
        store = open_store(f"sqlite:///{workdir / 'bench.db'}")
        try:
            for s in seeds:
                t = time.monotonic()
                tr = S.run_arbor(Path(path), ls, policy, s, target, workdir, store, moves=moves)
                out.append({**tr.to_dict(), "method": method, "wall_s": time.monotonic() - t})
        finally:
            store.close()
            shutil.rmtree(workdir, ignore_errors=True)
        return out
    run = {"tpe": S.run_tpe, "random": S.run_random, "grid": S.run_grid}[method]
    for s in seeds:
        t = time.monotonic()
        tr = run(ls, s, target)
        out.append({**tr.to_dict(), "wall_s": time.monotonic() - t})
    return out


def _scratch() -> str | None:
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None


def summarize(ls, rows: list[dict], methods: list[str]) -> list[dict]:
    opt = ls.optimum()
    out = []
    for m in methods:
        mine = [r for r in rows if r["method"] == m]
        q = quartiles([r["evals_to_target"] for r in mine])
        found = quartiles([r.get("evals_to_found", float("inf")) for r in mine])
        finals = [r["final_true"] for r in mine if r["final_true"] is not None]
        out.append({"method": m, **q, "reached": sum(1 for r in mine if r["evals_to_target"] != float("inf")),
                    "final_true_median": sorted(finals)[len(finals) // 2] if finals else None,
                    "found_median": found["median"], "found_q1": found["q1"], "found_q3": found["q3"],
                    "optimum": opt, "wall_s": sum(r["wall_s"] for r in mine)})
    ref = {r["method"]: r["median"] for r in out}
    for r in out:
        for base in ("tpe", "random"):
            b = ref.get(base)
            # undefined when the baseline's median is censored (it never got there in most seeds)
            finite = r["median"] is not None and b and b != float("inf")
            r[f"vs_{base}"] = (r["median"] / b) if finite else None
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--landscapes", nargs="*", help="landscape names (file stems) or paths; default all")
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--policies", default=",".join(POLICIES))
    ap.add_argument("--baselines", default=",".join(BASELINES))
    ap.add_argument("--moves", default="recorded", choices=("recorded", "neighbours", "any"),
                    help="Arbor's move space on the replay target (recorded = the skills' moves)")
    ap.add_argument("--threshold", type=float, default=0.95)
    ap.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--out", default="search_efficiency")
    args = ap.parse_args(argv)
    started = time.monotonic()

    from arbor.targets.landscape import load_landscape

    paths = landscape_paths(args.landscapes)
    if not paths:
        print("no landscapes found in benchmarks/landscapes/ — record some with `arbor record`", file=sys.stderr)
        return 2
    methods = [f"arbor-{p}" for p in args.policies.split(",") if p] + [b for b in args.baselines.split(",") if b]
    if "tpe" in methods:
        try:
            import optuna  # noqa: F401
        except ImportError:
            print("the TPE baseline needs Optuna: pip install -e '.[bench]' (or --baselines random,grid)",
                  file=sys.stderr)
            return 2
    seeds = list(range(args.seeds))
    jobs = [(str(p), m, seeds, args.threshold, args.moves) for p in paths for m in methods]
    jobs.sort(key=lambda j: not j[1].startswith("arbor-"))  # the slow ones first
    if args.jobs > 1:
        with ProcessPoolExecutor(args.jobs) as ex:
            results = list(ex.map(_work, jobs))
    else:
        results = [_work(j) for j in jobs]
    by_path: dict[str, list[dict]] = {}
    for job, rows in zip(jobs, results):
        by_path.setdefault(job[0], []).extend(rows)

    report = {"threshold": args.threshold, "seeds": args.seeds, "moves": args.moves, "landscapes": {}}
    headline = []
    for p in paths:
        ls = load_landscape(p)
        rows = by_path[str(p)]
        summ = summarize(ls, rows, methods)
        ok = [pt for pt in ls.points if pt.speedup is not None]
        near = sum(1 for pt in ok if pt.speedup >= args.threshold * ls.optimum())
        info = {"points": len(ls.points), "ok_points": len(ok), "within_threshold": near,
                "optimum": ls.optimum(), "default_speedup": ls.true_speedup(ls.default_config()),
                "recorded": ls.recorded}
        report["landscapes"][ls.name] = {"info": info, "summary": summ, "runs": rows}
        print(f"\n{ls.name}: {len(ok)} points, optimum {ls.optimum():.3f}x, {near} within "
              f"{args.threshold:.0%} of it, default {info['default_speedup'] or 0:.3f}x")
        print(table([{**r, "iqr": f"{fmt(r['q1'])}-{fmt(r['q3'])}", "reached": f"{r['reached']}/{r['n']}",
                      "vs_tpe": fmt(r["vs_tpe"], 2), "vs_random": fmt(r["vs_random"], 2)} for r in summ],
                    [("method", "searcher"), ("median", "evals (median)"), ("iqr", "IQR"), ("reached", "reached"),
                     ("vs_tpe", "x TPE"), ("vs_random", "x random"), ("final_true_median", "final true x"),
                     ("found_median", "first measured (median)")]))
        puct = next((r for r in summ if r["method"] == "arbor-puct"), None)
        if puct:
            headline.append({"landscape": ls.name, "arbor_puct": puct["median"], "vs_tpe": puct["vs_tpe"],
                             "vs_random": puct["vs_random"]})
    report["headline"] = headline
    path = write_result(args.out, report, started)
    print(f"\nwrote {path} in {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
