"""The LLM agents against a real small model: SmolLM2-135M on a local llama-server.

Every LLM role (orchestrator, specialist, critic) is pointed at llama.cpp's OpenAI endpoint and
the campaigns run to their own budget through the CLI, as a user would run them. Every call is in
the campaign's store; this reads them back and reports, per role, the share of replies that were
valid (first try, after the repair request, or not at all: a fallback), and the share of the
specialist's proposals that compiled / were measured. A traceback anywhere in the CLI's output
counts as a failure of the run.

    python -m benchmarks.llm_agents_llamacpp                  # quickstart and serving_llamacpp
    python -m benchmarks.llm_agents_llamacpp --only quickstart --max-evaluations 4
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import yaml

from benchmarks.common import ROOT, machine, table, write_result

CAMPAIGNS = {"quickstart": ROOT / "campaigns" / "quickstart.yaml",
             "serving_llamacpp": ROOT / "campaigns" / "serving_llamacpp.yaml"}
# SmolLM2 has an 8192-token context: the prompt budget and the reply cap must fit in one slot, and
# on two shared cores a 2,000-token prompt is what a call can read in well under its 300 s. A
# 135M model fails often; ten failed calls in a row (not the default three) before the campaign
# stops on them, so the run reaches its budget and the shares below measure the model
AGENTS = {"backend": "openai", "model": "smollm2", "temperature": 0.0, "prompt_tokens": 2000,
          "max_output_tokens": 512, "timeout_s": 300, "max_retries": 1, "retry_backoff_s": 0.5,
          "max_children": 2, "max_llm_failures_in_row": 10}


def _agent_server(tmp: Path, threads: int):
    from arbor.sandbox.serving.lifecycle import ServerConfig, start_servers
    from arbor.sandbox.serving.llamacpp_install import missing_reason, model_path, server_binary

    if (why := missing_reason()) is not None:
        raise SystemExit(f"llm_agents_llamacpp: {why}")
    cfg = ServerConfig(argv=[str(server_binary()), "-m", str(model_path()), "-a", "smollm2", "--host", "{host}",
                             "--port", "{port}", "-np", "1", "-c", "8192", "-t", str(threads), "-tb", str(threads),
                             "--no-webui"],
                       lease_dir=tmp / "leases", startup_timeout_s=60, stop_grace_s=2, label="agents-llm")
    started: list = []
    start_servers([cfg], started)
    return started


def _run(name: str, tmp: Path, base_url: str, max_evals: int | None, max_wall_s: float | None = None,
         timeout_s: float | None = None) -> dict:
    src = CAMPAIGNS[name]
    data = yaml.safe_load(src.read_text())
    data["name"] = f"llm_{name}"
    data["store"] = {"url": f"sqlite:///{tmp / (name + '.db')}"}
    data["agents"] = {**data.get("agents", {}), **AGENTS, "base_url": base_url,
                      **{role: {"backend": "openai"} for role in ("orchestrator", "specialist", "critic")}}
    if max_evals:
        data["budget"]["max_evaluations"] = max_evals
    if max_wall_s:  # a loaded machine: the LLM's calls and the measurements share its 2 cores
        data["budget"]["max_wall_s"] = max_wall_s
    if timeout_s:
        data.setdefault("sandbox", {})["timeout_s"] = timeout_s
    path = src.parent / f".llm_{name}_{os.getpid()}.yaml"  # beside the original: its relative paths hold
    path.write_text(yaml.safe_dump(data))
    t0 = time.monotonic()
    try:
        proc = subprocess.run([sys.executable, "-m", "arbor", "run", str(path)], cwd=ROOT, capture_output=True,
                              text=True, timeout=1800)
    finally:
        path.unlink()
    out = proc.stdout + proc.stderr
    row = {"campaign": name, "exit": proc.returncode, "wall_s": round(time.monotonic() - t0, 1),
           "tracebacks": out.count("Traceback (most recent call last)"),
           "last_lines": out.strip().splitlines()[-6:]}
    row.update(_calls(tmp / (name + ".db")))
    return row


def _calls(db: Path) -> dict:
    from arbor.search_tree import open_store

    store = open_store(f"sqlite:///{db}")
    (camp,) = store.list_campaigns()
    events = store.events(camp.id, limit=100_000)
    roles: dict[str, Counter] = {}
    for ev in events:
        c = roles.setdefault(ev.agent or "?", Counter())
        p = ev.payload or {}
        if ev.kind == "llm_call":
            c[f"calls_{p.get('status')}"] += 1
            c["repair_sent"] += p.get("phase") == "repair"
        elif ev.kind in ("llm_fallback", "llm_no_proposal", "llm_no_narrative"):
            c["fallbacks"] += 1  # the role's call was abandoned: the heuristic decided, or nothing
    per_role = {}
    for agent, c in roles.items():
        if not c:  # the loop's, the profiler's and the gate Critic's own events: no LLM role
            continue
        replies = c["calls_ok"] + c["calls_invalid"]
        per_role[agent] = {**dict(c), "replies": replies,
                           "valid_share": c["calls_ok"] / replies if replies else None}
    nodes = [n for n in store.nodes(camp.id) if n.parent_id is not None]
    measured = sum(1 for n in nodes if any(m.status == "ok" for m in store.measurements(n.id)))
    ran = sum(1 for n in nodes if store.measurements(n.id))
    return {"roles": per_role, "proposals": len(nodes), "proposals_run": ran, "proposals_measured_ok": measured,
            "stop_reason": camp.stop_reason}


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # finally blocks remove the spec copy, stop the server
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", choices=sorted(CAMPAIGNS), action="append")
    ap.add_argument("--max-evaluations", type=int, default=None, help="override the campaigns' budgets")
    ap.add_argument("--max-wall-s", type=float, default=None, help="override the campaigns' wall budgets")
    ap.add_argument("--timeout-s", type=float, default=None, help="override one measurement's limit")
    ap.add_argument("--server-threads", type=int, default=1,
                    help="the agents' llama-server threads: 1 by default, because two threads synchronise at "
                         "every op and on a machine loaded past its cores each sync waits for a time slice "
                         "(with two, no call finished in 4 minutes at a load average of 10-12)")
    ap.add_argument("--out", default="llm_agents_llamacpp")
    args = ap.parse_args(argv)
    started = time.monotonic()
    info = machine()
    from arbor.sandbox.serving.lifecycle import stop_all

    rows = []
    with tempfile.TemporaryDirectory(prefix="arbor-llm-agents-") as tmp:
        servers = []
        try:
            servers = _agent_server(Path(tmp), args.server_threads)
            for name in args.only or list(CAMPAIGNS):
                rows.append(_run(name, Path(tmp), servers[0].base_url + "/v1", args.max_evaluations,
                                 args.max_wall_s, args.timeout_s))
        finally:
            stop_all(servers)
    flat = [{"campaign": r["campaign"], "role": role, "replies": s["replies"], "valid": s.get("valid_share"),
             "repairs": s.get("repair_sent", 0), "fallbacks": s.get("fallbacks", 0)}
            for r in rows for role, s in sorted(r["roles"].items())]
    print(table(flat, [("campaign", "campaign"), ("role", "role"), ("replies", "replies"),
                       ("valid", "valid share"), ("repairs", "repairs"), ("fallbacks", "fallbacks")]))
    for r in rows:
        print(f"{r['campaign']}: exit {r['exit']}, {r['tracebacks']} tracebacks, {r['proposals']} proposals, "
              f"{r['proposals_run']} run, {r['proposals_measured_ok']} measured ok, {r['wall_s']} s")
    info["load_avg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    path = write_result(args.out, {"machine": info, "agents": AGENTS, "server_threads": args.server_threads,
                                   "overrides": {
        "max_evaluations": args.max_evaluations, "max_wall_s": args.max_wall_s, "timeout_s": args.timeout_s},
        "rows": rows}, started)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
