"""Store scale: 10^5 and 10^6 nodes in one campaign — insert rate, select latency, dashboard
query latency, bytes per node.

* **insert rate** — the write path of a real step through the Store API (artifact, node, queued,
  running + lease, measurement, verdict, events: one node's whole life), measured on the empty store
  and again on the full one; and the bulk rate used to build the tree (driver ``executemany``).
* **select** — the first load of the tree index (``TreeIndex.refresh`` from nothing), reported
  apart, then per step: the incremental refresh after one new node, the orchestrator's choice
  (policy over every expandable node + the lazy exact prior of the winner, with the loop's
  ``find_node`` duplicate checks), and the store query ``steps.select`` also makes (pending nodes).
  The budget's evaluation count is counted once per process and then kept by the loop: reported apart.
* **dashboard queries** — the store's incremental read methods a live view polls.
* **bytes per node** — the SQLite file (+ WAL) over the node count, with every node carrying an
  artifact, a measurement of 30 paired samples, a verdict and three events.

    python -m benchmarks.store_scale                  # 1e5 and 1e6 (several minutes, ~3 GB of disk)
    python -m benchmarks.store_scale --sizes 100000

Writes ``benchmarks/results/store_scale.json``.
"""

from __future__ import annotations

import argparse
import gc
import random
import resource
import shutil
import statistics
import tempfile
import time
from datetime import timedelta
from pathlib import Path

from benchmarks.common import landscape_paths, table, write_result


def _ms(fn, repeat: int = 5):
    out = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        out.append(1e3 * (time.perf_counter() - t))
    return statistics.median(out)


def api_insert_rate(store, cid: int, parent_id: int, n: int, tag: str) -> float:
    """Nodes per second through the Store API, one full node life each (what a step writes)."""
    t0 = time.perf_counter()
    for i in range(n):
        sha = store.put_artifact(f'{{\n  "api": "{tag}-{i}"\n}}\n', "config")
        node = store.add_node(cid, sha, "kernel-heuristic", parent_id=parent_id, move_id="api", family="api",
                              hypothesis="api insert", prior=0.5, predicted_gain=0.5, step=i)
        store.append_event(cid, "propose", {"move": "api"}, node_id=node.id, agent="kernel-heuristic")
        store.transition(node.id, "queued")
        store.start_running(node.id, "bench")
        samples = [1e-3] * 30
        m = store.record_measurement(node.id, 1, "primary", {
            "status": "ok", "baseline_samples": samples, "candidate_samples": samples,
            "correctness": [{"seed": s, "ok": True} for s in (0, 1, 2)], "fingerprint": {"host": "bench"},
            "duration_s": 1.0}, "local")
        store.record_verdict(node.id, m.id, "reject", "no_gain", "api insert", [{"gate": "ran", "passed": True}],
                             final_state="rejected")
    return n / (time.perf_counter() - t0)


def run_size(n: int, landscape: Path | None, workdir: Path, log) -> dict:
    from arbor.agents.orchestrator.heuristic import HeuristicOrchestrator
    from arbor.agents.specialists.kernel_heuristic import HeuristicKernelSpecialist
    from arbor.agents.transforms.knobs import canonical_config
    from arbor.targets.landscape import load_landscape
    from arbor.search_tree.index import TreeIndex
    from arbor.search_tree.policies import make_policy
    from arbor.search_tree import open_store
    from arbor.targets.replay import knob_moves

    from benchmarks.bulk import db_bytes, populate
    from benchmarks.synthetic import make_landscape

    ls = load_landscape(landscape) if landscape else make_landscape()
    url = f"sqlite:///{workdir / 'scale.db'}"
    store = open_store(url)
    camp = store.get_or_create_campaign("scale", "replay", {"landscape": ls.name})
    root_sha = store.put_artifact(canonical_config(ls.default_config()), "config")
    root = store.add_node(camp.id, root_sha, "baseline")
    store.transition(root.id, "queued")
    store.start_running(root.id, "bench")
    m = store.record_measurement(root.id, 1, "primary", {"status": "ok", "baseline_samples": [1e-3] * 30,
                                                         "candidate_samples": [1e-3] * 30}, "local")
    store.record_verdict(root.id, m.id, "accept", "baseline", "A/A", [], final_state="accepted", value=0.0, speedup=1.0)
    store.update_campaign(camp.id, root_node_id=root.id)
    rate_empty = api_insert_rate(store, camp.id, root.id, 300, "empty")
    configs = [p.knobs for p in ls.points if p.status == "ok"]
    log(f"bulk-filling {n} nodes ...")
    fill = populate(store, camp.id, root.id, n - 301, moves=[(mv.id, mv.family or mv.id) for mv in ls.moves] or None,
                    artifact=lambda i: canonical_config({**configs[i % len(configs)], "_filler": i}), progress=log)
    with store.engine.connect() as conn:
        conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    nodes = n
    size = db_bytes(url)

    # --- select: first load, then per step -------------------------------------------
    gc.collect()
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    idx = TreeIndex(camp.id)
    t = time.perf_counter()
    idx.refresh(store)
    load_s = time.perf_counter() - t
    rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    moves = knob_moves(ls, "recorded")
    specialist = HeuristicKernelSpecialist(moves, seed=0)
    orch = HeuristicOrchestrator(make_policy("puct"), specialist, seed=0)
    orch.attach(idx)
    sources: dict[str, str] = {}

    def source_of(sha):
        if sha not in sources:
            sources[sha] = store.get_artifact(sha)
        return sources[sha]

    def is_known(sha):  # as steps.select: the index rules out, the store confirms
        return idx.has_artifact(sha) and store.find_node(camp.id, sha) is not None

    t = time.perf_counter()
    orch.select(idx, source_of, is_known, 0)  # the first choice computes exact priors from scratch
    first_select_s = time.perf_counter() - t
    per = {"refresh": [], "orchestrator": [], "pending_query": [], "total": []}
    rng = random.Random(0)
    for step in range(1, 31):
        sel = orch.select(idx, source_of, is_known, step)
        # one step's worth of writes, so the next refresh has something to apply
        opt = sel.options[0] if sel and sel.options else None
        sha = store.put_artifact(opt.source if opt else f'{{"step": {step}}}', "config")
        node = store.add_node(camp.id, sha, "kernel-heuristic", parent_id=sel.parent.id if sel else root.id,
                              move_id=opt.move.id if opt else "x", family=opt.move.family if opt else None)
        store.transition(node.id, "queued")
        store.start_running(node.id, "bench")
        mm = store.record_measurement(node.id, 1, "primary", {"status": "ok", "baseline_samples": [1e-3] * 30,
                                                              "candidate_samples": [9e-4] * 30}, "local")
        accept = rng.random() < 0.3
        store.record_verdict(node.id, mm.id, "accept" if accept else "reject", "improved" if accept else "no_gain",
                             "bench", [], final_state="accepted" if accept else "rejected",
                             **({"value": 0.1, "speedup": 1.105} if accept else {}))
        t0 = time.perf_counter()
        idx.refresh(store)
        t1 = time.perf_counter()
        store.nodes(camp.id, states=("proposed", "queued", "running", "measured"))
        t2 = time.perf_counter()
        orch.select(idx, source_of, is_known, step + 1000)
        t3 = time.perf_counter()
        for k, v in (("refresh", t1 - t0), ("pending_query", t2 - t1), ("orchestrator", t3 - t2),
                     ("total", t3 - t0)):
            per[k].append(1e3 * v)
    select_ms = {k: statistics.median(v) for k, v in per.items()}
    # the budget's evaluation count: once per process (then kept by the loop), reported apart
    select_ms["eval_count_once"] = _ms(lambda: store.measurement_count(camp.id, distinct_candidates=True), 3)

    # --- dashboard reads -------------------------------------------------------------
    cursor = store.get_node(node.id).updated_at - timedelta(seconds=5)
    with store.engine.connect() as conn:
        max_v = conn.exec_driver_sql("SELECT max(id) FROM verdicts").scalar() or 0
        max_m = conn.exec_driver_sql("SELECT max(id) FROM measurements").scalar() or 0
    dash = {
        "nodes_changed_since(5 s)": _ms(lambda: store.nodes_changed_since(camp.id, cursor)),
        "verdicts_after(last 100)": _ms(lambda: store.verdicts_after(camp.id, max_v - 100, limit=100)),
        "measurements_after(last 100, no samples)": _ms(lambda: store.measurements_after(camp.id, max_m - 100, limit=100,
                                                                                       samples=False)),
        "recent_events(50)": _ms(lambda: store.recent_events(camp.id, 50)),
        "recent_verdicts(20)": _ms(lambda: store.recent_verdicts(camp.id, 20)),
        "event_totals": _ms(lambda: store.event_totals(camp.id)),
        "count_by_state": _ms(lambda: store.count_by_state(camp.id)),
    }
    rate_full = api_insert_rate(store, camp.id, root.id, 300, "full")
    store.close()
    return {
        "nodes": nodes, "landscape": ls.name, "db_bytes": size, "bytes_per_node": size / nodes,
        "bulk_nodes_per_s": fill["nodes_per_s"], "api_nodes_per_s_empty": rate_empty, "api_nodes_per_s_full": rate_full,
        "index_load_s": load_s, "index_rss_mb": (rss1 - rss0) / 1024, "first_select_s": first_select_s,
        "select_ms": select_ms, "dashboard_ms": dash,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100000,1000000")
    ap.add_argument("--landscape", default=None, help="landscape whose moves the selector uses (default: first recorded)")
    ap.add_argument("--dir", default=None, help="where the scratch databases go (default: system temp, on disk)")
    ap.add_argument("--out", default="store_scale")
    args = ap.parse_args(argv)
    started = time.monotonic()
    paths = landscape_paths([args.landscape] if args.landscape else None)
    results = []
    for n in (int(x) for x in args.sizes.split(",")):
        workdir = Path(tempfile.mkdtemp(prefix="arbor-scale-", dir=args.dir))
        try:
            results.append(run_size(n, paths[0] if paths else None, workdir, print))
            r = results[-1]
            print(f"{n}: select {r['select_ms']['total']:.1f} ms/step, index load {r['index_load_s']:.1f} s, "
                  f"{r['bytes_per_node']:.0f} B/node")
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
    print()
    print(table([{"nodes": r["nodes"], "api": r["api_nodes_per_s_full"], "api0": r["api_nodes_per_s_empty"],
                  "bulk": r["bulk_nodes_per_s"], "bpn": r["bytes_per_node"], "load": r["index_load_s"],
                  "sel": r["select_ms"]["total"], "orch": r["select_ms"]["orchestrator"],
                  "refresh": r["select_ms"]["refresh"], "evals": r["select_ms"]["eval_count_once"],
                  "dash": max(r["dashboard_ms"].values())} for r in results],
                [("nodes", "nodes"), ("api0", "API nodes/s (empty)"), ("api", "API nodes/s (full)"),
                 ("bulk", "bulk nodes/s"), ("bpn", "bytes/node"), ("load", "index load s"),
                 ("sel", "select ms/step"), ("orch", "orchestrator ms"), ("refresh", "refresh ms"),
                 ("evals", "eval count (once) ms"), ("dash", "slowest dashboard query ms")]))
    for r in results:
        print(f"\n{r['nodes']} nodes, dashboard queries (ms):")
        print(table([{"q": k, "ms": v} for k, v in r["dashboard_ms"].items()], [("q", "query"), ("ms", "median ms")]))
    path = write_result(args.out, {"goal_select_ms": 50, "results": results}, started)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
