"""Harness overhead: wall and CPU time per campaign step *excluding the measurement* (select,
propose, guard, store writes, Critic, index refresh, LangGraph checkpoint), at 10^3 and 10^5 nodes.

For each size: a real replay campaign is started (baseline A/A and a couple of steps), the store is
then filled in bulk to the target size (``benchmarks/bulk.py``: nodes, artifacts, measurements,
verdicts, events), and the campaign is resumed for ``--steps`` real loop steps with every step
function timed. The replayed measurement itself (``adapter.measure``) is timed separately and
subtracted. The first resumed step also loads the tree index from scratch; it is reported apart.

Filler nodes carry an extra ``_filler`` key in their config so they are distinct artifacts; the
replay lookup ignores it, so expanding a filler node measures a real landscape point.

    python -m benchmarks.overhead                   # 1e3 and 1e5 nodes, 60 steps each
    python -m benchmarks.overhead --sizes 1000 --steps 20

Writes ``benchmarks/results/overhead.json``.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from benchmarks.common import landscape_paths, table, write_result

PHASES = ("select", "propose", "guard", "measure", "critique", "update")


class StepClock:
    """Wraps the loop's step functions and the adapter's measure with wall/CPU timers."""

    def __init__(self):
        self.events: list[tuple[str, float, float, float, float]] = []  # name, t0, t1, c0, c1
        self._saved: dict = {}

    def install(self) -> None:
        from arbor.campaign import steps
        from arbor.targets.replay import ReplayAdapter

        for name in PHASES:
            fn = getattr(steps, name)
            self._saved[(steps, name)] = fn
            setattr(steps, name, self._wrap(name, fn))
        self._saved[(ReplayAdapter, "measure")] = ReplayAdapter.measure
        ReplayAdapter.measure = self._wrap("adapter.measure", ReplayAdapter.measure)

    def uninstall(self) -> None:
        for (owner, name), fn in self._saved.items():
            setattr(owner, name, fn)
        self._saved.clear()

    def _wrap(self, name, fn):
        def timed(*args, **kwargs):
            t0, c0 = time.perf_counter(), time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                self.events.append((name, t0, time.perf_counter(), c0, time.process_time()))
        return timed

    def steps(self) -> list[dict]:
        """Group events into steps (each starts at a select); per step: wall from select start to
        the end of its last event, the measurement's wall, and per-phase sums."""
        out, cur = [], None
        for name, t0, t1, c0, c1 in self.events:
            if name == "select":
                if cur:
                    out.append(cur)
                cur = {"t0": t0, "t1": t1, "c0": c0, "c1": c1, "measure_wall": 0.0, "measure_cpu": 0.0,
                       "phases": defaultdict(float), "phases_cpu": defaultdict(float)}
            if cur is None:
                continue
            cur["t1"], cur["c1"] = max(cur["t1"], t1), max(cur["c1"], c1)
            if name == "adapter.measure":
                cur["measure_wall"] += t1 - t0
                cur["measure_cpu"] += c1 - c0
            else:
                cur["phases"][name] += t1 - t0
                cur["phases_cpu"][name] += c1 - c0
        if cur:
            out.append(cur)
        return [s for s in out if s["phases"].get("propose")]  # a final select that stopped is no step


def _patch_lookup():
    """Filler configs carry ``_filler``; look them up as the landscape point they decorate."""
    from arbor.agents.transforms.knobs import parse_config
    from arbor.targets.replay import ReplayAdapter

    original = ReplayAdapter.lookup

    def lookup(self, source):
        cfg = parse_config(source)
        if cfg is None:
            return None
        cfg.pop("_filler", None)
        return self.landscape.point(cfg)

    ReplayAdapter.lookup = lookup
    return lambda: setattr(ReplayAdapter, "lookup", original)


def _summary(measured: list[dict]) -> dict:
    first, rest = measured[0], measured[1:]

    def per_step(s):
        wall = s["t1"] - s["t0"]
        return {"wall_ms": 1e3 * (wall - s["measure_wall"]), "cpu_ms": 1e3 * (s["c1"] - s["c0"] - s["measure_cpu"]),
                "measure_ms": 1e3 * s["measure_wall"],
                **{f"{p}_ms": 1e3 * (s["phases"].get(p, 0.0) - (s["measure_wall"] if p == "measure" else 0.0))
                   for p in PHASES},
                **{f"{p}_cpu_ms": 1e3 * (s["phases_cpu"].get(p, 0.0) - (s["measure_cpu"] if p == "measure" else 0.0))
                   for p in PHASES},
                # what is not inside any step function: LangGraph's scheduling and its checkpoint writes
                "graph_ms": 1e3 * (wall - sum(s["phases"].values()))}

    rows = [per_step(s) for s in rest]

    def med(key):
        return statistics.median(r[key] for r in rows) if rows else None

    def p90(key):
        xs = sorted(r[key] for r in rows)
        return xs[int(0.9 * (len(xs) - 1))] if xs else None

    return {"steps_timed": len(rows), "first_step_ms": per_step(first)["wall_ms"],
            "step_wall_ms_median": med("wall_ms"), "step_wall_ms_p90": p90("wall_ms"),
            "step_cpu_ms_median": med("cpu_ms"), "measure_ms_median": med("measure_ms"),
            "phases_ms_median": {p: med(f"{p}_ms") for p in PHASES}, "graph_ms_median": med("graph_ms"),
            "phases_cpu_ms_median": {p: med(f"{p}_cpu_ms") for p in PHASES}, "steps": rows}


def run_size(path: Path, n: int, steps: int, workdir: Path, log) -> list[dict]:
    from arbor.agents.transforms.knobs import canonical_config
    from arbor.campaign.run import run_campaign
    from arbor.targets.landscape import load_landscape
    from arbor.search_tree import open_store

    from benchmarks.bulk import populate
    from benchmarks.searchers import replay_spec

    ls = load_landscape(path)
    name = f"overhead-{n}"
    spec = replay_spec(path, ls, name, "puct", 0, workdir)
    store = open_store(spec.store_url())
    undo = _patch_lookup()
    out = []
    try:
        spec.budget = spec.budget.model_copy(update={"max_evaluations": 3})
        run_campaign(spec, lambda *a: None, store=store)  # baseline accepted + a few real nodes
        camp = store.get_campaign(name)
        have = len(store.nodes(camp.id))
        configs = [p.knobs for p in ls.points if p.status == "ok"]
        log(f"{ls.name}: filling the store to {n} nodes ...")
        fill = populate(store, camp.id, camp.root_node_id, max(0, n - have),
                        artifact=lambda i: canonical_config({**configs[i % len(configs)], "_filler": i}),
                        moves=[(m.id, m.family or m.id) for m in ls.moves] or None, progress=log)
        evals = store.measurement_count(camp.id, distinct_candidates=True)
        spec.budget = spec.budget.model_copy(update={"max_evaluations": evals + steps})
        clock = StepClock()
        clock.install()
        t0 = time.perf_counter()
        try:
            run_campaign(spec, lambda *a: None, store=store)
        finally:
            clock.uninstall()
        total = time.perf_counter() - t0
        out.append({"nodes": len(store.nodes(camp.id)), "landscape": ls.name, "fill": fill,
                    "resume_total_s": total, **_summary(clock.steps())})
        log(f"  {out[-1]['step_wall_ms_median']:.1f} ms/step wall, {out[-1]['step_cpu_ms_median']:.1f} ms CPU")
    finally:
        undo()
        store.close()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,100000")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--landscape", default=None, help="landscape name or path (default: the first recorded)")
    ap.add_argument("--out", default="overhead")
    args = ap.parse_args(argv)
    started = time.monotonic()
    paths = landscape_paths([args.landscape] if args.landscape else None)
    if not paths:
        print("no landscape found — record one with `arbor record`")
        return 2
    results = []
    for n in (int(x) for x in args.sizes.split(",")):
        workdir = Path(tempfile.mkdtemp(prefix="arbor-overhead-"))
        try:
            results.extend(run_size(paths[0], n, args.steps, workdir, print))
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
    cols = [("nodes", "nodes"), ("step_wall_ms_median", "step ms (median)"), ("step_wall_ms_p90", "p90"),
            ("step_cpu_ms_median", "CPU ms"), ("first_step_ms", "first step (index load) ms")]
    cols += [(f"ph_{p}", f"{p} ms") for p in PHASES] + [("graph_ms_median", "LangGraph ms")]
    print()
    print(table([{**r, **{f"ph_{p}": r["phases_ms_median"][p] for p in PHASES}} for r in results], cols))
    print("(harness time per step, the replayed measurement excluded; goal <= 50 ms)")
    path = write_result(args.out, {"goal_ms": 50, "results": results}, started)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
