"""Pre-populating a store with a large, realistic campaign tree, in bulk.

Going through ``Store.add_node``/``record_verdict`` costs a transaction per write (that rate is
measured separately by ``store_scale``); to reach 10^5-10^6 nodes in minutes this writes the same
rows with the driver's ``executemany``: per node an artifact, the node, one measurement with
30 paired samples (none for guard failures), a verdict and three events (select, propose,
verdict), shaped like a long campaign — a quarter of the nodes accepted (expandable), most
rejected, some failed; parents drawn among accepted nodes, recent ones favoured, so paths grow deep.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import time
from datetime import timedelta
from typing import Callable

from sqlalchemy import func, select

from arbor.search_tree.sql.models import Measurement, Node, utcnow

REJECT = ("no_gain", "regression", "regression", "no_gain", "incorrect", "unstable")
FAIL = ("compile_error", "runtime_error", "timeout")
GATES = ["ran", "correct", "stable", "environment", "plausible", "significant", "confirm_best"]


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def populate(store, campaign_id: int, root_id: int, n: int, *, seed: int = 0,
             artifact: Callable[[int], str] | None = None, moves: list[tuple[str, str]] | None = None,
             chunk: int = 20_000, samples: int = 30, progress: Callable[[str], None] | None = None) -> dict:
    """Insert ``n`` finished nodes below ``root_id``; returns counts and the insert rate."""
    rng = random.Random(seed)
    artifact = artifact or (lambda i: f'{{\n  "_filler": {i}\n}}\n')
    moves = moves or [(f"move-{k}", f"family-{k % 4}") for k in range(12)]
    eng = store.engine
    with eng.begin() as conn:
        node_base = (conn.scalar(select(func.max(Node.id))) or 0) + 1
        meas_base = (conn.scalar(select(func.max(Measurement.id))) or 0) + 1
        root_depth = conn.scalar(select(Node.depth).where(Node.id == root_id)) or 0
    accepted: list[tuple[int, int, float]] = [(root_id, root_depth, 0.0)]  # (id, depth, value)
    t_old = utcnow() - timedelta(hours=1)
    t0 = time.perf_counter()
    rows_written = 0
    # Sample lists and gate logs are JSON-encoded once and reused: encoding floats dominates
    # otherwise, and the rows only need realistic sizes, not unique noise.
    pool_ok = [(json.dumps([1e-3 * (1 + 0.02 * rng.random()) for _ in range(samples)]),
                json.dumps([7e-4 * (1 + 0.02 * rng.random()) for _ in range(samples)])) for _ in range(64)]
    gates = json.dumps([{"gate": g, "passed": True, "reason": "passed"} for g in GATES])
    fingerprint = json.dumps({"host": "bulk", "device": "cpu"})
    corr = {ok: json.dumps([{"seed": s, "ok": ok} for s in (0, 1, 2)]) for ok in (True, False)}
    q = {
        "artifacts": "INSERT OR IGNORE INTO artifacts (sha256, kind, content, size, created_at) VALUES (?,?,?,?,?)",
        "nodes": "INSERT INTO nodes (id, campaign_id, parent_id, depth, state, artifact_sha, specialist, move_id, "
                 "family, hypothesis, prior, predicted_gain, value, speedup, diagnosis, reason, step, created_at, "
                 "updated_at, finished_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        "measurements": "INSERT INTO measurements (id, node_id, artifact_sha, attempt, purpose, status, error_class, "
                        "error_text, baseline_samples, candidate_samples, stats, correctness, fingerprint, runner, "
                        "duration_s, created_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        "verdicts": "INSERT INTO verdicts (node_id, measurement_id, decision, diagnosis, reason, gates, agent, "
                    "created_at) VALUES (?,?,?,?,?,?,?,?)",
        "events": "INSERT INTO events (campaign_id, node_id, kind, agent, payload, prompt_tokens, completion_tokens, "
                  "cost_usd, created_at) VALUES (?,?,?,?,?,0,0,0.0,?)",
    }
    for start in range(0, n, chunk):
        rows: dict[str, list] = {k: [] for k in q}
        for i in range(start, min(n, start + chunk)):
            nid, mid = node_base + i, meas_base + i
            if rng.random() < 0.5 and len(accepted) > 1:
                pid, pdepth, pval = accepted[-1 - min(int(rng.expovariate(0.2)), len(accepted) - 1)]
            else:
                pid, pdepth, pval = accepted[rng.randrange(len(accepted))]
            u = rng.random()
            state = "accepted" if u < 0.25 else ("failed" if u < 0.37 else "rejected")
            move, family = moves[rng.randrange(len(moves))]
            content = artifact(i)
            sha = _sha(content)
            stamp = (t_old + timedelta(microseconds=i)).strftime("%Y-%m-%d %H:%M:%S.%f")
            value = speedup = None
            if state == "accepted":
                value = pval + abs(rng.gauss(0.02, 0.03))
                speedup = math.exp(value)
                diagnosis, decision = "improved", "accept"
            elif state == "rejected":
                diagnosis, decision = REJECT[rng.randrange(len(REJECT))], "reject"
            else:
                diagnosis, decision = FAIL[rng.randrange(len(FAIL))], "fail"
            reason = f"synthetic {diagnosis} verdict for node {nid}: speedup {speedup or 0.97:.3f}x [0.95, 1.01]"
            ok = diagnosis not in FAIL
            base, cand = pool_ok[i % len(pool_ok)] if ok else ("[]", "[]")
            stats = f'{{"speedup": {speedup or 0.97:.4f}, "ci_low": 0.95, "ci_high": 1.01}}'
            rows["artifacts"].append((sha, "config", content, len(content), stamp))
            rows["nodes"].append((nid, campaign_id, pid, pdepth + 1, state, sha, "kernel-heuristic", move, family,
                                  f"{move} on node {pid}", 0.5, 0.5, value, speedup, diagnosis, reason, i, stamp,
                                  stamp, stamp))
            rows["measurements"].append((mid, nid, sha, 1, "primary", "ok" if ok else "error",
                                         None if ok else diagnosis, None if ok else f"synthetic {diagnosis}",
                                         base, cand, stats, corr[ok], fingerprint, "local", 2.0, stamp))
            rows["verdicts"].append((nid, mid, decision, diagnosis, reason, gates, "critic", stamp))
            rows["events"].append((campaign_id, None, "select", "orchestrator", f'{{"parent": {pid}, "why": "puct"}}', stamp))
            rows["events"].append((campaign_id, nid, "propose", "kernel-heuristic",
                                   f'{{"move": "{move}", "prior": 0.5}}', stamp))
            rows["events"].append((campaign_id, nid, "verdict", "critic",
                                   json.dumps({"decision": decision, "diagnosis": diagnosis, "reason": reason}), stamp))
            if state == "accepted":
                accepted.append((nid, pdepth + 1, value))
        raw = eng.raw_connection()
        try:
            cur = raw.cursor()
            for k, sql in q.items():
                cur.executemany(sql, rows[k])
                rows_written += len(rows[k])
            raw.commit()
        finally:
            raw.close()
        if progress:
            done = min(n, start + chunk)
            progress(f"  bulk: {done}/{n} nodes ({done / (time.perf_counter() - t0):,.0f} nodes/s)")
    secs = time.perf_counter() - t0
    return {"nodes": n, "rows": rows_written, "seconds": secs, "nodes_per_s": n / secs if secs else None,
            "accepted": len(accepted) - 1}


def db_bytes(url: str) -> int:
    """Size of a SQLite store on disk (main file + WAL)."""
    from pathlib import Path

    from sqlalchemy import make_url

    path = Path(make_url(url).database)
    return sum(p.stat().st_size for p in (path, path.with_name(path.name + "-wal")) if p.exists())
